#!/usr/bin/env bash
# Session 8's second device call (docs/bench/kernels.md, 2026-12-01), kept as it ran:
#   1. gpu_gemm_test and gpu_gemm_splitk_test on the seed that failed the split-K test in
#      call 1 (is it the split-K build or the extreme-code check?), then on fresh seeds;
#   2. the integration suites against the per-kind engine (a graph per tile kind);
#   3. split-K's rule (only batches whose unsplit width is 16) and a forced 2/4 parts;
#   4. the tile-width sweep of the small-M cases, for tools/bench/fit_tile_model.py.
# Each step has its own time limit; logs are packed into $OUT/call2.tar.gz after each.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call2  # its prologue, as it ran, now in lib.sh
small='dense 1x,dense 8x,dense 16x,dense 64x,dense 128x,decode'
for t in gpu_gemm_test gpu_gemm_splitk_test; do
  TEST_SEED=1796118472610397921 timeout 120 ".gpu/bin/$t" >"$o/seed-$t.log" 2>&1
  echo "## $t on call 1's seed: rc=$?"; tail -n 4 "$o/seed-$t.log"
done
pack
OUT="$o" GEMMD_TEST_TIMEOUT=120 .gpu/gpu_run.sh gpu_ 2>&1 | tail -n 20
pack
OUT="$o" GEMMD_SUITES="cuda_test grpc_api_test shm_test" timeout 330 deploy/gpu_suite.sh suites 2>&1 | tail -n 20
pack
timeout 120 .gpu/bin/gemm_bench_splitk --kernel wgmma --reps 10 --splits 2,4 --only "$small" >"$o/splitk.log" 2>&1
echo "## splitk rc=$?"
pack
timeout 150 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --tile-n 16,32,64,128 --only "$small" >"$o/sweep.log" 2>&1
echo "## sweep rc=$?"
pack
python3 tools/bench/kernel_summary.py "$o/splitk.log" "$o/sweep.log" 2>&1 | tail -n 12
