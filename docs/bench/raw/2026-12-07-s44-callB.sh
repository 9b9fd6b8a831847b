#!/usr/bin/env bash
# Session 44 call B: issue 42's mix (16 C shm decode workers beside 2 Python prefill workers of
# 4096x7168x16384): main against an experiment build with env knobs:
#   GEMMD_EXP_ROWS128_GRID=N  ROWS128 kernels launch N x SMs CTAs (a decode batch's tiles
#                             one or two per CTA: the block scheduler balances them)
#   GEMMD_EXP_MIN_PIECE_ROWS  pieces may be 128 rows (with --split-flops 32e9)
#   GEMMD_EXP_CHAIN_PIECES    pieces' kernels one after another across slots
#   GEMMD_EXP_GRPC_ARGS       extra gRPC channel args in gemmd and libgemmclient
set -u
cd "$(dirname "$0")/.."
out="${OUT:-/tmp}"; LIM="${LIM:-560}"; t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
left() { [ $(( LIM - $(el) )) -gt "$1" ]; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1 && export PYTHONPATH=/tmp/site
source .gpu/gpu_env.sh
mkdir -p .gpu_ab/main_x && tar -C .gpu_ab/main_x -xJf .gpu_ab/main.tar.xz
export PYTHONUNBUFFERED=1
exec > >(tee "$out/c44b.log") 2>&1
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader)"
X=.gpu/bin; M=.gpu_ab/main_x/bin
mix() { # label bindir gemmd-args [env...]
  local label=$1 dir=$2 args=$3; shift 3
  echo "## mix $label [$(el) s] args='$args' env='$*'"
  env "$@" GEMMD_BIN_DIR="$PWD/$dir" timeout -s KILL 110 python3 tools/bench/serving.py --backend cuda --shape 8x4096x4096 --seconds 2 \
    --workers 16 --clients , --mix c-shm:16:py-shm:2:4096x7168x16384 ${args:+--gemmd-args="$args"} 2>&1 \
    | grep -E '^\| |^mixed|^# CPU' | grep -v '^| client\|^| ---\|^| torch baseline' | awk '!seen[$0]++'
}
R128="GEMMD_EXP_MIN_PIECE_ROWS=128"; CH=GEMMD_EXP_CHAIN_PIECES=1
left 400 && mix main $M ""
left 340 && mix chain-2slots $X "" $CH
left 300 && mix rows128pieces-2slots $X "--split-flops 32e9" $R128
left 260 && mix chain-3slots $X "--piece-slots 3" $CH
left 220 && mix chain-rows128-3slots $X "--split-flops 32e9 --piece-slots 3" $R128 $CH
sv() { # label bindir [env...]: gRPC C workers at 1 and 32
  local label=$1 dir=$2; shift 2
  echo "## grpc $label [$(el) s] env='$*'"
  env "$@" GEMMD_BIN_DIR="$PWD/$dir" timeout -s KILL 60 python3 tools/bench/serving.py --backend cuda --shape 8x4096x4096 --seconds 2 \
    --weights 16 --clients c-grpc --workers 1,32 2>&1 | grep -E '^\| c-|^# CPU|^# clients' | grep -v "^| client" | awk '!seen[$0]++'
}
A=GEMMD_EXP_GRPC_ARGS
left 200 && sv base $X
left 175 && sv bdp0 $X $A=grpc.http2.bdp_probe=0
left 150 && sv all $X $A=grpc.http2.bdp_probe=0,grpc.http2.lookahead_bytes=4194304,grpc.http2.max_frame_size=4194304,grpc.experimental.tcp_read_chunk_size=262144,grpc.experimental.tcp_min_read_chunk_size=131072
echo "## cuda_test with pieces chained and 128-row pieces allowed [$(el) s]"
if left 45; then
  env GEMMD_EXP_CHAIN_PIECES=1 GEMMD_EXP_MIN_PIECE_ROWS=128 GEMMD_BIN_DIR="$PWD/$X" GEMMD_TEST_ARGS="--backend cuda" GEMMD_TEST_BACKEND=cuda GEMMD_TEST_NO_PROMTOOL=1 \
     timeout $(( LIM - $(el) - 10 )) python3 tests/cuda_test.py > "$out/cuda_test.log" 2>&1 && r=PASSED || r=FAILED
  echo "cuda_test $r [$(el) s]: $(grep -E '^Ran |^OK|^FAILED' "$out/cuda_test.log" | tr '\n' ' ')"; grep -E '^(FAIL|ERROR):' "$out/cuda_test.log" | head -5
fi
left 40 && mix main-again $M ""
echo "# done [$(el) s]"
