#!/usr/bin/env bash
# Session 8's third device call (docs/bench/kernels.md, 2026-12-01), kept as it ran: the
# build as committed (each tile kind its own kernel, the kind rule of call 1, the loose
# FP16-overflow check of extreme codes):
#   1. gpu_gemm_test on call 1's failing seed, then every GPU test on fresh seeds;
#   2. issue 6's benchmark on all 43 cases (the numbers of record);
#   3. the engine suites that drive the kernel through gRPC (cuda_test, grpc_api_test).
# Logs are packed into $OUT/call3.tar.gz after each step.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call3  # its prologue, as it ran, now in lib.sh
TEST_SEED=1796118472610397921 timeout 120 .gpu/bin/gpu_gemm_test >"$o/seed-gpu_gemm_test.log" 2>&1
echo "## gpu_gemm_test on call 1's seed: rc=$?"; tail -n 4 "$o/seed-gpu_gemm_test.log"
pack
OUT="$o" GEMMD_TEST_TIMEOUT=120 .gpu/gpu_run.sh gpu_ 2>&1 | tail -n 12
pack
timeout 300 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --csv "$o/gemm_bench.csv" >"$o/gemm_bench.log" 2>&1
echo "## gemm_bench rc=$?"
pack
python3 tools/bench/kernel_summary.py "$o/gemm_bench.log" 2>&1 | tail -n 8
OUT="$o" GEMMD_SUITES="cuda_test grpc_api_test" timeout 150 deploy/gpu_suite.sh suites 2>&1 | tail -n 8
pack
