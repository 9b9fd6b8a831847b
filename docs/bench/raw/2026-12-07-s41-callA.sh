#!/usr/bin/env bash
# Session 41 call A (never ran: no machine): the launch clock, kept copy nodes and the
# finisher hand-off (exp/s41, docs/bench/raw/2026-12-07-s41-exp-clock-copynodes-handoff.patch) against main.
# Build: git am the patch on main, tools/gpu/gpu_bundle.sh //tools/bench:serving_worker; main's gemmd,
# serving_worker and gemm_bench (-c opt, stripped) in .gpu_ab/main. Run: OUT=$OUT LIM=540 .gpu_ab/c41a.sh
set -u
cd "$(dirname "$0")/.."
out="${OUT:-/tmp}"; LIM="${LIM:-540}"; t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
left() { [ $(( LIM - $(el) )) -gt "$1" ]; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1 && export PYTHONPATH=/tmp/site
source .gpu/gpu_env.sh
export PYTHONUNBUFFERED=1
log="$out/c41a.log"
exec > >(tee "$log") 2>&1
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader)"
M=.gpu_ab/main; X=.gpu/bin
echo "## gpu_gemm_test, gpu_copy_test (exp) [$(el) s]"
timeout 120 $X/gpu_gemm_test > "$out/gpu_gemm_test.log" 2>&1; echo "gpu_gemm_test rc=$? $(grep -E 'TEST_SEED|split-K variants|groups checked|launch clock' "$out/gpu_gemm_test.log" | tr '\n' ' ')"
grep -E "launch clock [0-9]|failed|FAIL" "$out/gpu_gemm_test.log" | head -5
timeout 60 $X/gpu_copy_test > "$out/gpu_copy_test.log" 2>&1; echo "gpu_copy_test rc=$?: $(tail -n 3 "$out/gpu_copy_test.log" | tr '\n' ' ')"
sv() { # label bindir env... ; serving args in SV
  local label=$1 dir=$2; shift 2
  echo "## serving $label [$(el) s]"
  env GEMMD_BIN_DIR="$PWD/$dir" "$@" timeout -s KILL 100 python3 tools/bench/serving.py --backend cuda --shape 8x4096x4096 --seconds 2 \
    --weights 16 $SV 2>&1 | grep -E '^\| c-|^# CPU|^# clients' | grep -v "^| client"
}
SV="--clients c-dev,c-shm --workers 1"
left 110 && sv main $M GEMMD_X=0
left 100 && sv exp $X GEMMD_X=0
left 90 && sv exp-noclock $X GEMMD_EXP_NO_CLOCK=1
left 80 && sv exp-setalways $X GEMMD_EXP_SET_ALWAYS=1
left 80 && sv exp-finsignal $X GEMMD_EXP_FIN_SIGNAL=1
left 250 && sv main-2 $M GEMMD_X=0
left 240 && sv exp-2 $X GEMMD_X=0
left 230 && sv exp-noclock-2 $X GEMMD_EXP_NO_CLOCK=1
SH=8x4096x4096,64x7168x2048,128x32768x512,2048x2112x7168,4096x7168x16384,8192x8192x8192
for b in $M/gemm_bench $X/gemm_bench; do
  left 40 || break
  echo "## $b [$(el) s]"
  timeout 60 $b --kernel wgmma --reps 10 --shape $SH 2>&1 | grep -E "^dense|^#"
done
echo "## suites (exp) [$(el) s]"
for t in cuda_test shm_test cuda_regions_test; do
  left 45 || break
  if env GEMMD_BIN_DIR="$PWD/$X" GEMMD_TEST_ARGS="--backend cuda" GEMMD_TEST_BACKEND=cuda GEMMD_TEST_NO_PROMTOOL=1 \
     timeout $(( LIM - $(el) - 45 > 100 ? 100 : LIM - $(el) - 45 )) python3 tests/$t.py > "$out/$t.log" 2>&1; then r=PASSED; else r=FAILED; fi
  echo "$t $r [$(el) s]: $(grep -E '^Ran |^OK|^FAILED' "$out/$t.log" | tr '\n' ' ')"; grep -E '^(FAIL|ERROR):' "$out/$t.log" | head -5
done
SV="--clients c-dev,c-shm --workers 8"
left 60 && sv main-8 $M GEMMD_X=0
left 45 && sv exp-8 $X GEMMD_X=0
SV="--clients c-grpc --workers 1"
left 35 && sv grpc-exp $X GEMMD_X=0
left 25 && sv grpc-cqspin $X GEMMD_EXP_CQ_SPIN_US=200
left 15 && sv grpc-exp-2 $X GEMMD_X=0
left 8 && sv grpc-cqspin-2 $X GEMMD_EXP_CQ_SPIN_US=200
echo "# done [$(el) s]"
