#!/usr/bin/env bash
# Session 50's call for issue 42, written and not run (no device time this session): the
# PDL chain experiment (git apply the patch beside this file, at its sha; bundle into
# .gpu_exp/ with tools/gpu/gpu_bundle.sh //tools/bench:serving_worker, then
# mv .gpu .gpu_exp), one build, GEMMD_EXP_PDL off and on alternately in one call:
# correctness under PDL (the GPU test binaries, cuda_test against FP64), one decode worker's
# round trip, then decode beside prefill. About 8 minutes.
set -u
source .gpu_exp/gpu_env.sh
export GEMMD_BIN_DIR=$PWD/.gpu_exp/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
log=$OUT/s50pdl.log
echo "=== GPU tests under PDL" | tee -a $log
GEMMD_EXP_PDL=1 GEMMD_TEST_TIMEOUT=150 .gpu_exp/gpu_run.sh 2>&1 | tail -n 12 | tee -a $log
echo "=== cuda_test under PDL" | tee -a $log
GEMMD_EXP_PDL=1 GEMMD_TEST_ARGS="--backend cuda" GEMMD_TEST_BACKEND=cuda GEMMD_TEST_NO_PROMTOOL=1 \
  timeout 200 python3 tests/cuda_test.py > $OUT/cuda_test_pdl.log 2>&1; echo "cuda_test rc=$?" | tee -a $log
grep -E '^Ran |^OK|^FAILED|^(FAIL|ERROR):' $OUT/cuda_test_pdl.log | head -8 | tee -a $log
one() { local label=$1; shift
  echo "=== one worker $label" | tee -a $log
  env "$@" timeout 60 python3 tools/bench/serving.py --backend cuda --shape 8x4096x4096 --weights 16 \
    --clients c-shm --workers 1,16 --seconds 3 >>$log 2>&1
  tail -n 8 $log | grep -E "^\| c-shm" | cut -c1-160
}
mix() { local label=$1; shift
  echo "=== mix $label" | tee -a $log
  env "$@" timeout 100 python3 tools/bench/serving.py --backend cuda --shape 8x4096x4096 --weights 16 \
    --clients , --seconds 8 --mix c-shm:16:py-shm:2:4096x7168x16384 >>$log 2>&1
  tail -n 30 $log | grep -E "^mixed:|^\| (decode|prefill|mixed)" | tail -6
}
one off GEMMD_EXP_PDL=0
one on GEMMD_EXP_PDL=1
mix off GEMMD_EXP_PDL=0
mix on GEMMD_EXP_PDL=1
mix off2 GEMMD_EXP_PDL=0
mix on2 GEMMD_EXP_PDL=1
