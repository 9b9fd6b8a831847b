#!/usr/bin/env bash
# Session 48 call C (planned; no machine was lent in session 48): decode beside prefill
# with the experiment build of raw/2026-12-07-s48-exp-rows32-reserve.patch in .gpu_exp/
# (tools/gpu/gpu_bundle.sh //tools/bench:serving_worker, then mv .gpu .gpu_exp).
# GEMMD_EXP_ROWS32=0: decode batches on ROWS32 tiles (the narrow width model's width);
# GEMMD_EXP_RESERVE=R: pieces on the SMs less R, other batches on R SMs while a piece runs.
# 16 C shm decode workers (8x4096x4096, 16 weights) beside 2 Python prefill workers of
# 4096x7168x16384, default flags; each run measures decode alone, prefill alone, the mix.
set -u
source .gpu_exp/gpu_env.sh
export GEMMD_BIN_DIR=$PWD/.gpu_exp/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
log=$OUT/s48c.log
mix() { local label=$1; shift
  echo "=== $label $*" | tee -a $log
  env "$@" timeout 150 python3 tools/bench/serving.py --backend cuda --shape 8x4096x4096 --weights 16 \
    --clients , --seconds 10 --mix c-shm:16:py-shm:2:4096x7168x16384 >>$log 2>&1
  tail -n 30 $log | grep -E "^mixed:|^\| (decode|prefill|mixed)" | tail -6
}
mix main
mix rows32 GEMMD_EXP_ROWS32=0
mix reserve32 GEMMD_EXP_RESERVE=32
mix rows32-reserve32 GEMMD_EXP_ROWS32=0 GEMMD_EXP_RESERVE=32
mix rows32-reserve48 GEMMD_EXP_ROWS32=0 GEMMD_EXP_RESERVE=48
mix rows32-reserve16 GEMMD_EXP_ROWS32=0 GEMMD_EXP_RESERVE=16
