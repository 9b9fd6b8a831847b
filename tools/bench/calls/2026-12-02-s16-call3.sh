#!/usr/bin/env bash
# Session 16's third device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh
# gemmd's build is v23 here: `r256w96` as the default (call 2: 4096x2112x7168 0.95-0.96x the
# time, the other M >= 4096 cases 1.00x; its SASS is the measured candidate's, sass_diff.py).
# 1. every GPU test and the engine suites cuda_test, grpc_api_test, shm_test against
#    --backend cuda (deploy/gpu_suite.sh);
# 2. gemm_bench on every case of issue 6 (v23's numbers for the versions table), twice.
# Output: $OUT/call3.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call3
OUT="$o" timeout -s KILL 200 deploy/gpu_suite.sh tests suites 2>&1 | tail -n 20
pack
for pass in 1 2; do
  timeout -s KILL 200 .gpu/bin/gemm_bench --kernel wgmma --reps 10 >"$o/gemm_bench-all-pass$pass.log" 2>&1
  echo "## gemm_bench (every case), pass $pass: rc=$?"
  python3 tools/bench/kernel_summary.py "$o/gemm_bench-all-pass$pass.log"
  grep -E "^dense 4096x2112" "$o/gemm_bench-all-pass$pass.log" | cut -c1-160
  pack
done
