#!/usr/bin/env bash
# Session 8's fourth device call (docs/bench/kernels.md, 2026-12-01), kept as it ran: split-K
# as a tile kind of its own (ROWS128_SPLIT; the other kinds' SASS byte-identical to call
# 3's build):
#   1. every GPU test (gpu_gemm_test runs the split variants on a workspace of its own);
#   2. the small-M cases with the kernel's choice (split-K at N = 2112) and 2/4 parts forced;
#   3. cuda_test (a split-K and a 256-row batch through the engine), grpc_api_test, shm_test.
# Logs are packed into $OUT/call4.tar.gz after each step.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call4  # its prologue, as it ran, now in lib.sh
OUT="$o" GEMMD_TEST_TIMEOUT=120 .gpu/gpu_run.sh gpu_ 2>&1 | tail -n 14
pack
timeout 150 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --splits 2,4 \
  --only 'dense 1x,dense 8x,dense 16x,dense 64x,dense 128x,decode' >"$o/gemm_bench.log" 2>&1
echo "## gemm_bench rc=$?"
pack
python3 tools/bench/kernel_summary.py "$o/gemm_bench.log" 2>&1 | tail -n 6
OUT="$o" GEMMD_SUITES="cuda_test grpc_api_test shm_test" timeout 200 deploy/gpu_suite.sh suites 2>&1 | tail -n 10
pack
