#!/usr/bin/env bash
# Session 49 call D (written, not run: the session's device time ran out): decode beside prefill with existing knobs that make decode batches
# fewer and larger (main's bundle with the timerfd batch delay): --max-batch-delay-us.
set -u
source .gpu/gpu_env.sh
export GEMMD_BIN_DIR=$PWD/.gpu/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
log=$OUT/s49d.log
mix() { local label=$1; shift
  echo "=== $label $*" | tee -a $log
  timeout 100 python3 tools/bench/serving.py --backend cuda --shape 8x4096x4096 --weights 16 \
    --clients , --seconds 8 --mix c-shm:16:py-shm:2:4096x7168x16384 --gemmd-args "$*" >>$log 2>&1
  tail -n 30 $log | grep -E "^mixed:|^\| (decode|prefill|mixed)" | tail -6
}
mix main

mix delay300-req16 --max-batch-delay-us 300 --max-batch-requests 16
mix delay150 --max-batch-delay-us 150
