#!/usr/bin/env bash
# Session 9's third device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on
# the default bundle (deploy/gpu_bundle.sh): a tile's group by division where every group
# has as many tiles (decode batches; no binary search), and 2 K parts at twice the width
# for 65..128-row groups with K >= 48 blocks.
#   1. every GPU test (gpu_gemm_test: two uniform batches at every kind and width);
#   2. every case of issue 6;
#   3. cuda_test, grpc_api_test, shm_test (the engine, with the scheduling area 4 bytes longer).
# Output: $OUT/call3.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call3  # its prologue, as it ran, now in lib.sh
OUT="$o" GEMMD_TEST_TIMEOUT=120 .gpu/gpu_run.sh gpu_ 2>&1 | tail -n 14
pack
timeout 200 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --csv "$o/gemm_bench.csv" >"$o/gemm_bench.log" 2>&1
echo "## gemm_bench rc=$?"
pack
grep -v "^#" "$o/gemm_bench.log" | cut -c1-60,120-400
python3 tools/bench/kernel_summary.py "$o/gemm_bench.log" 2>&1 | head -n 8
OUT="$o" GEMMD_SUITES="cuda_test grpc_api_test shm_test" timeout 150 deploy/gpu_suite.sh suites 2>&1 | tail -n 8
pack
