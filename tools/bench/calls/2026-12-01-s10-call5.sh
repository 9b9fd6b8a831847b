#!/usr/bin/env bash
# Session 10's fifth device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on a
# bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_pow2 //kernels:gpu_gemm_pow2_test
# gemmd's build now has ROWS128 widths 56, 96 and 192 (v15); `pow2` is v14's set (16..128).
#   1. every GPU test (gpu_gemm_test forces 56, 96 and 192 on every batch);
#   2. every case of issue 6 on v15;
#   3. pow2 on the M <= 128 and decode cases and 4096x2112x7168;
#   4. v15 with widths 96, 128, 192 timed on the cases 192 could win;
#   5. cuda_test, grpc_api_test, shm_test.
# Output: $OUT/call5.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call5
OUT="$o" GEMMD_TEST_TIMEOUT=120 .gpu/gpu_run.sh gpu_ 2>&1 | tail -n 16
pack
timeout 200 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --csv "$o/gemm_bench.csv" >"$o/gemm_bench.log" 2>&1
echo "## gemm_bench rc=$?"
pack
python3 tools/bench/kernel_summary.py "$o/gemm_bench.log" 2>&1 | head -n 8
only='decode,dense 1x,dense 8x,dense 16x,dense 64x,dense 128x,dense 4096x2112'
timeout 150 .gpu/bin/gemm_bench_pow2 --kernel wgmma --reps 10 --only "$only" >"$o/gemm_bench_pow2.log" 2>&1
echo "## gemm_bench_pow2 rc=$?"
python3 tools/bench/kernel_summary.py "$o/gemm_bench_pow2.log" 2>&1 | head -n 8
pack
timeout 150 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --only 'x24576x1536,decode,4096x2112,128x7168' \
  --tile-n 96,128,192 >"$o/sweep.log" 2>&1
echo "## sweep rc=$?"
pack
grep -v "^#" "$o/gemm_bench.log" | cut -c1-60,120-400
grep -v "^#" "$o/sweep.log" | cut -c1-44,120-400
OUT="$o" GEMMD_SUITES="cuda_test grpc_api_test shm_test" timeout 150 deploy/gpu_suite.sh suites 2>&1 | tail -n 8
pack
