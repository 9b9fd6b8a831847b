#!/usr/bin/env bash
# Session 49 call B+C: the ROWS32 / SM-reservation experiment build
# (git show 6ac0c83:docs/bench/raw/2026-12-07-s48-exp-rows32-reserve.patch) in .gpu_exp/:
# gpu_gemm_test's FP64 checks, decode ROWS32 against ROWS128 at the full grid and 32 SMs,
# then decode beside prefill with each switch.
set -u
source .gpu_exp/gpu_env.sh
export GEMMD_BIN_DIR=$PWD/.gpu_exp/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
log=$OUT/s49bc.log
echo "=== gpu_gemm_test" | tee -a $log
timeout 150 .gpu_exp/bin/gpu_gemm_test > $OUT/gpu_gemm_test.log 2>&1; echo "gpu_gemm_test rc=$?" | tee -a $log
tail -n 5 $OUT/gpu_gemm_test.log | tee -a $log
for grid in 0 32; do
  echo "=== grid $grid decode" | tee -a $log
  GEMMD_EXP_GRID=$grid timeout 100 .gpu_exp/bin/gemm_bench --only decode --kinds rows128,rows32 --tile-n 32,64,128 --reps 10 2>&1 | tee -a $log | grep -E "decode|kind=" | cut -c1-300
done
mix() { local label=$1; shift
  echo "=== $label $*" | tee -a $log
  env "$@" timeout 100 python3 tools/bench/serving.py --backend cuda --shape 8x4096x4096 --weights 16 \
    --clients , --seconds 8 --mix c-shm:16:py-shm:2:4096x7168x16384 >>$log 2>&1
  tail -n 30 $log | grep -E "^mixed:|^\| (decode|prefill|mixed)" | tail -6
}
mix main
mix rows32 GEMMD_EXP_ROWS32=0
mix rows32-reserve32 GEMMD_EXP_ROWS32=0 GEMMD_EXP_RESERVE=32
mix reserve32 GEMMD_EXP_RESERVE=32
