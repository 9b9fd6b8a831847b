#!/usr/bin/env bash
# Session 15's third device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_shadow //kernels:gemm_bench_lazyrel \
#     //kernels:gpu_gemm_lazyrel_test //kernels:gemm_bench_lazyrel_stamps
# Call 2: `shadow` 0.98x the time on every 256-row case; its timeline still put ~340 clk
# between a warpgroup's release of a stage and its next block's wait (the last half's
# promotion; ~140 between halves). Candidate `lazyrel` (on shadow): the stage is released
# after the next block's first WGMMAs are issued, while they run.
# 1. every gpu_gemm test of the bundle (lazyrel's against FP64);
# 2. v21, shadow and lazyrel on the M >= 4096 cases, both orders;
# 3. the stamps probe with lazyrel at 4096x7168x16384 (call 2 has v21's and shadow's).
# Output: $OUT/kernel_ab.tar.gz, $OUT/call3.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=440 \
  GEMMD_AB_ONLY='dense 4096x,dense 8192x,stacked' \
  tools/bench/kernel_ab.sh gemm_bench_shadow gemm_bench_lazyrel
source tools/bench/calls/lib.sh && call_setup call3
for b in gemm_bench_lazyrel_stamps; do
  timeout -s KILL 50 .gpu/bin/$b --kernel wgmma --reps 3 --stamps \
    --only 'dense 4096x7168x16384' >"$o/$b.log" 2>&1
  echo "## $b: rc=$?"
  grep -E "^(dense|decode)|stamps" "$o/$b.log" | cut -c1-330
  grep "wgmma clk" "$o/$b.log" | cut -c1-900
  pack
done
