#!/usr/bin/env bash
# Session 40's device call A, as written; it ran cut to its shortest form (suites: cuda_test
# only; serving and gRPC: 1 worker), LIM=250: raw/2026-12-07-s40-callA-graphcopies-tail-grpc-h100.log.
# The experiment build (.gpu_ab/graphup) was 8bacdcb with the copies in the graph, PDL and
# the spinning CQ threads, each behind its environment variable; the copies are main since
# 25af7b2 (GEMMD_EXP_GRAPH_COPIES no longer read), the rest is
# raw/2026-12-07-s40-exp-pdl-cqspin.patch. Builds it needs, here:
#   tools/gpu/gpu_bundle.sh //tools/bench:serving_worker          # main -> .gpu
#   git apply docs/bench/raw/2026-12-07-s40-exp-pdl-cqspin.patch
#   bazel build -c opt //daemon:gemmd //tools/bench:engine_bench //kernels/bench:gemm_bench //kernels:gpu_gemm_test
#   mkdir -p .gpu_ab/graphup && cp bazel-bin/daemon/gemmd bazel-bin/tools/bench/{engine_bench,serving_worker} \
#     bazel-bin/kernels/bench/gemm_bench bazel-bin/kernels/gpu_gemm_test .gpu_ab/graphup/   # then git checkout .
#   sed -i 's/kTailMargin = 0.95;/kTailMargin = 0.0;/' kernels/wgmma/tile_rules.cc   # the rule without the tail
#   bazel build -c opt //kernels/bench:gemm_bench && mkdir -p .gpu_ab/notail && cp bazel-bin/kernels/bench/gemm_bench .gpu_ab/notail/
#   cp docs/bench/raw/2026-12-07-s40-callA.sh .gpu_ab/c40a.sh   # .gpu_ab in .git/info/exclude
#   /usr/bin/python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux2014_x86_64 -d .whl grpcio-tools==1.84.0   # the GPU machine generates the tests' gRPC classes
# Then through the device tool, carrying .gpu .whl .gpu_ab: OUT=$OUT LIM=540 .gpu_ab/c40a.sh
# Session 40 call A: graph copies (exp/graph-copies) correctness + A/B; tail rule A/B.
# OUT=$OUT LIM=520 .gpu_ab/c40a.sh
set -u
cd "$(dirname "$0")/.."
out="${OUT:-/tmp}"; LIM="${LIM:-520}"; t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
left() { [ $(( LIM - $(el) )) -gt "$1" ]; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1 && export PYTHONPATH=/tmp/site
source .gpu/gpu_env.sh
export PYTHONUNBUFFERED=1
log="$out/c40a.log"
exec > >(tee "$log") 2>&1
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader)"
G=.gpu_ab/graphup
echo "## gpu_gemm_test (main) [$(el) s]"
timeout 90 .gpu/bin/gpu_gemm_test > "$out/gpu_gemm_test.log" 2>&1; echo "rc=$? $(grep -E 'TEST_SEED|split-K variants|groups checked' "$out/gpu_gemm_test.log" | tr '\n' ' ')"
echo "## graph copies + PDL: suites with GEMMD_EXP_GRAPH_COPIES=1 GEMMD_EXP_PDL=1 [$(el) s]"
timeout 90 $G/gpu_gemm_test > "$out/gpu_gemm_test_branch.log" 2>&1; echo "branch gpu_gemm_test rc=$? $(grep -E 'TEST_SEED|split-K variants|groups checked' "$out/gpu_gemm_test_branch.log" | tr '\n' ' ')"
for t in cuda_test cuda_regions_test shm_test; do
  left 300 || break
  if env GEMMD_BIN_DIR="$PWD/$G" GEMMD_TEST_ARGS="--backend cuda" GEMMD_TEST_BACKEND=cuda GEMMD_TEST_NO_PROMTOOL=1 \
     GEMMD_EXP_GRAPH_COPIES=1 GEMMD_EXP_PDL=1 timeout 100 python3 tests/$t.py > "$out/$t.log" 2>&1; then r=PASSED; else r=FAILED; fi
  echo "$t $r [$(el) s]: $(grep -E '^Ran |^OK|^FAILED' "$out/$t.log" | tr '\n' ' ')"; grep -E '^(FAIL|ERROR):' "$out/$t.log" | head -5
  grep -h "copies stay out" "$out/$t.log" | head -2
done
sv() { # label bindir env... -- serving args
  local label=$1 dir=$2; shift 2
  echo "## serving $label [$(el) s]"
  env GEMMD_BIN_DIR="$PWD/$dir" "$@" timeout -s KILL 120 python3 tools/bench/serving.py --backend cuda --shape 8x4096x4096 --seconds 2 \
    --clients c-dev,c-shm $SV 2>&1 | grep -vE '^\s*$' | tail -n 30
}
SV="--workers 1,8,32"
left 200 && sv main .gpu/bin GEMMD_X=0
left 180 && sv graphcopies $G GEMMD_EXP_GRAPH_COPIES=1
left 160 && sv graphcopies+pdl $G GEMMD_EXP_GRAPH_COPIES=1 GEMMD_EXP_PDL=1
SV="--workers 1"
left 140 && sv main-again .gpu/bin GEMMD_X=0
left 130 && sv graphcopies-again $G GEMMD_EXP_GRAPH_COPIES=1
left 120 && sv graphcopies+pdl-again $G GEMMD_EXP_GRAPH_COPIES=1 GEMMD_EXP_PDL=1
SH=2048x2112x7168,2304x2112x7168,4096x2112x7168,4352x2112x7168,6400x2112x7168,4096x576x7168,6912x576x7168,7168x576x7168,7424x576x7168,7680x576x7168,7936x576x7168,8192x576x7168,1280x7168x16384,1280x4096x7168,2304x4096x7168,3328x4096x7168
for b in .gpu/bin/gemm_bench .gpu_ab/notail/gemm_bench; do
  left 50 || break
  echo "## $b tail shapes [$(el) s]"
  timeout 100 $b --kernel wgmma --reps 10 --shape $SH 2>&1 | grep -E "^dense|^#"
done
SVC="--clients c-grpc --workers 1,32 --weights 16"
sg() { local label=$1; shift; echo "## grpc $label [$(el) s]"
  env GEMMD_BIN_DIR="$PWD/$G" "$@" timeout -s KILL 90 python3 tools/bench/serving.py --backend cuda --shape 8x4096x4096 --seconds 2 $SVC 2>&1 | grep -vE '^\s*$' | tail -n 14; }
left 70 && sg main GEMMD_X=0
left 60 && sg cqspin200 GEMMD_EXP_CQ_SPIN_US=200
SVC="--clients c-grpc --workers 1 --weights 16"
left 45 && sg main-again GEMMD_X=0
left 40 && sg cqspin200-again GEMMD_EXP_CQ_SPIN_US=200
echo "## engine_bench [$(el) s]"
if left 45; then
  timeout 60 .gpu/bin/engine_bench --backend cuda --groups 1,8,32 --reps 200 2>&1 | tail -n 5
  GEMMD_EXP_GRAPH_COPIES=1 timeout 60 $G/engine_bench --backend cuda --groups 1,8,32 --reps 200 2>&1 | tail -n 5
  GEMMD_EXP_GRAPH_COPIES=1 GEMMD_EXP_PDL=1 timeout 60 $G/engine_bench --backend cuda --groups 1,8,32 --reps 200 2>&1 | tail -n 5
fi
for b in $G/gemm_bench .gpu/bin/gemm_bench; do
  left 50 || break
  echo "## $b tail shapes [$(el) s]"
  timeout 100 $b --kernel wgmma --reps 10 --shape $SH 2>&1 | grep -E "^dense|^#"
done
echo "# done [$(el) s]"
