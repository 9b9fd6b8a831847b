#!/usr/bin/env bash
# Session 10's seventh device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on
# the default bundle (deploy/gpu_bundle.sh): v16, ROWS128_WIDE (96 and 192 columns) as a
# fifth kind with a kernel of its own; the other four kernels' SASS is v14's.
#   1. every GPU test (gpu_gemm_test forces the wide kind at 96 and 192 on every batch);
#   2. every case of issue 6;
#   3. ROWS128 and ROWS128_WIDE each timed on the cases the rule gives the wide kind;
#   4. cuda_test, grpc_api_test, shm_test (the engine: part masks one bit wider).
# Output: $OUT/call7.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call7
OUT="$o" GEMMD_TEST_TIMEOUT=120 .gpu/gpu_run.sh gpu_ 2>&1 | tail -n 12
pack
timeout 200 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --csv "$o/gemm_bench.csv" >"$o/gemm_bench.log" 2>&1
echo "## gemm_bench rc=$?"
pack
python3 tools/bench/kernel_summary.py "$o/gemm_bench.log" 2>&1 | head -n 8
grep -v "^#" "$o/gemm_bench.log" | cut -c1-60,120-400
timeout 100 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --only 'x24576x1536,4096x2112' --kinds rows128,wide \
  >"$o/kinds.log" 2>&1
echo "## kinds rc=$?"
grep -v "^#" "$o/kinds.log" | cut -c1-44,120-400
pack
OUT="$o" GEMMD_SUITES="cuda_test grpc_api_test shm_test" timeout 150 deploy/gpu_suite.sh suites 2>&1 | tail -n 8
pack
