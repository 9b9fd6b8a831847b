#!/usr/bin/env bash
# Session 15's first device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_boundary //kernels:gpu_gemm_boundary_test \
#     //kernels:gemm_bench_stamps //kernels:gemm_bench_boundary_stamps
# Candidate `boundary` (session 14's patch): a 256-row tile's warpgroup waits for the next K
# block's full barrier right after releasing the stage, before promoting the last half.
# 1. every gpu_gemm test of the bundle (boundary's against FP64);
# 2. v21 against boundary on the M >= 4096 cases, both orders;
# 3. the stamps probe with and without boundary at 4096x7168x16384 (the WGMMA timeline:
#    does the block boundary's idle shrink?), also the first run of the stamps report
#    after session 14's review mend.
# Output: $OUT/kernel_ab.tar.gz, $OUT/call1.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=380 \
  GEMMD_AB_ONLY='dense 4096x,dense 8192x,stacked' \
  tools/bench/kernel_ab.sh gemm_bench_boundary
source tools/bench/calls/lib.sh && call_setup call1
for b in gemm_bench_stamps gemm_bench_boundary_stamps; do
  timeout -s KILL 50 .gpu/bin/$b --kernel wgmma --reps 3 --stamps \
    --only 'dense 4096x7168x16384,dense 64x7168x16384' >"$o/$b.log" 2>&1
  echo "## $b: rc=$?"
  grep -E "^(dense|decode)|stamps" "$o/$b.log" | cut -c1-330
  grep "wgmma clk" "$o/$b.log" | cut -c1-600
  pack
done
