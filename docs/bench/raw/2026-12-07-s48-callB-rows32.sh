#!/usr/bin/env bash
# Session 48 call B (planned; no machine was lent in session 48): ROWS32 (32 rows of A a stage) against ROWS128 on decode, full grid and
# fewer SMs (GEMMD_EXP_GRID), after gpu_gemm_test's FP64 checks; the experiment build of
# raw/2026-12-07-s48-exp-rows32-reserve.patch in .gpu_exp/ (gpu_bundle.sh, then mv .gpu .gpu_exp).
set -u
source .gpu_exp/gpu_env.sh
export GEMMD_BIN_DIR=$PWD/.gpu_exp/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
log=$OUT/s48b.log
echo "=== gpu_gemm_test" | tee -a $log
timeout 300 .gpu_exp/bin/gpu_gemm_test > $OUT/gpu_gemm_test.log 2>&1; echo "gpu_gemm_test rc=$?" | tee -a $log
tail -n 5 $OUT/gpu_gemm_test.log | tee -a $log
for grid in 0 16 32 48; do
  echo "=== grid $grid decode" | tee -a $log
  GEMMD_EXP_GRID=$grid timeout 200 .gpu_exp/bin/gemm_bench --only decode --kinds rows128,rows32 --tile-n 32,64,128 --reps 10 2>&1 | tee -a $log | grep -E "decode|kind=" | cut -c1-400
  echo "=== grid $grid single" | tee -a $log
  GEMMD_EXP_GRID=$grid timeout 200 .gpu_exp/bin/gemm_bench --shape 8x4096x4096,32x7168x2048 --kinds rows128,rows32 --tile-n 32,64,128 --reps 10 2>&1 | tee -a $log | grep -E "dense|kind=" | cut -c1-400
done
