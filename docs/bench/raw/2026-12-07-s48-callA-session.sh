#!/usr/bin/env bash
# Session 48 call A (planned; no machine was lent in session 48): unary gRPC calls against GEMM sessions (one GemmStream per C worker).
set -u
source .gpu/gpu_env.sh
export GEMMD_BIN_DIR=$PWD/.gpu/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
log=$OUT/s48a.log
sv() { local label=$1 cl=$2 w=$3; shift 3
  echo "=== $label $cl workers=$w $*" | tee -a $log
  env "$@" timeout 90 python3 tools/bench/serving.py --backend cuda --shape 8x4096x4096 --seconds 3 --weights 16 \
    --clients $cl --workers $w >>$log 2>&1
  tail -n 40 $log | grep -E "^\| $cl \| " | tail -1
}
for r in 1 2 3; do sv r$r c-grpc 32; sv r$r c-stream 32; done
for r in 1 2 3; do sv r$r c-grpc 1; sv r$r c-stream 1; done
sv r1 c-grpc 64; sv r1 c-stream 64
sv r1 c-stream 16; sv r1 c-grpc 16
