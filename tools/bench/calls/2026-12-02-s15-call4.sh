#!/usr/bin/env bash
# Session 15's fourth device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_probe8_joint //kernels:gemm_bench_probe9_joint
# gemmd's build is v22 here: `shadow` as the default (calls 2 and 3: 0.98x the time on every
# 256-row case; its SASS is the measured candidate's, sass_diff.py).
# 1. every GPU test and the engine suites cuda_test, grpc_api_test, shm_test against
#    --backend cuda (deploy/gpu_suite.sh);
# 2. gemm_bench on every case of issue 6 (v22's numbers for the versions table);
# 3. probes 8 and 9 (a 256-row K block's last / first half not promoted) beside v22 on
#    three long-K cases: does the promotion between two K blocks cost more than the one
#    between a block's halves (session 15's stamps: ~340 clk against ~140)?
# Output: $OUT/call4.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call4
OUT="$o" timeout -s KILL 200 deploy/gpu_suite.sh tests suites 2>&1 | tail -n 20
pack
timeout -s KILL 200 .gpu/bin/gemm_bench --kernel wgmma --reps 10 >"$o/gemm_bench-all.log" 2>&1
echo "## gemm_bench (every case): rc=$?"
python3 tools/bench/kernel_summary.py "$o/gemm_bench-all.log"
pack
for pass in 1 2; do
  for b in gemm_bench gemm_bench_probe8_joint gemm_bench_probe9_joint; do
    timeout -s KILL 60 .gpu/bin/$b --kernel wgmma --reps 10 \
      --only 'dense 4096x7168x16384,dense 8192x8192x8192,stacked 4x8192 4096x7168' >"$o/pass$pass-$b.log" 2>&1
    echo "## pass $pass $b: rc=$?"
    grep -E "^(dense|stacked)" "$o/pass$pass-$b.log" | cut -c1-120
  done
  pack
done
