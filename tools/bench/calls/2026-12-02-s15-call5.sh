#!/usr/bin/env bash
# Session 15's fifth device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_probe4_joint //kernels:gemm_bench_probe10_joint
# Call 4's probes 8 and 9: skipping a 256-row K block's last half's promotion takes 6% off
# the long-K cases, the first half's 3.6%. What is left when both promotions and the loads
# are gone is each warpgroup's chain of issue -> wait -> issue (probe 4). Probe 10: as 4,
# with each warpgroup's two halves in two accumulators, the next half issued before the last
# completes: the ceiling of a design with independent WGMMA streams.
# v22, probe 4 and probe 10 on three long-K cases, two passes. Output: $OUT/call5.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call5
for pass in 1 2; do
  for b in gemm_bench gemm_bench_probe4_joint gemm_bench_probe10_joint; do
    timeout -s KILL 60 .gpu/bin/$b --kernel wgmma --reps 10 \
      --only 'dense 4096x7168x16384,dense 8192x8192x8192,stacked 4x8192 4096x7168' >"$o/pass$pass-$b.log" 2>&1
    echo "## pass $pass $b: rc=$?"
    grep -E "^(dense|stacked)" "$o/pass$pass-$b.log" | cut -c1-120
  done
  pack
done
