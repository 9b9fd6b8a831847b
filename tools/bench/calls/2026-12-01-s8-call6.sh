#!/usr/bin/env bash
# Session 8's sixth device call (docs/bench/kernels.md, 2026-12-01), kept as it ran:
# ROWS256 batches on wgmma_gemm_kernel_joint (every unsplit kind's code in one kernel, so
# ptxas issues ROWS256's QGMMAs back to back, as in session 5's kinds3 build):
#   1. every GPU test (gpu_gemm_test forces ROWS256 at every width through the joint kernel);
#   2. the M ≥ 4096 cases, ROWS128 and ROWS256 each timed;
#   3. cuda_test (a 256-row batch through the engine), grpc_api_test.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call6  # its prologue, as it ran, now in lib.sh
OUT="$o" GEMMD_TEST_TIMEOUT=120 .gpu/gpu_run.sh gpu_ 2>&1 | tail -n 12
pack
timeout 200 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --kinds rows128,rows256 \
  --only 'dense 4096x,8192x8192,stacked' >"$o/gemm_bench.log" 2>&1
echo "## gemm_bench rc=$?"
pack
python3 tools/bench/kernel_summary.py "$o/gemm_bench.log" 2>&1 | head -n 2
OUT="$o" GEMMD_SUITES="cuda_test grpc_api_test" timeout 120 deploy/gpu_suite.sh suites 2>&1 | tail -n 6
pack
