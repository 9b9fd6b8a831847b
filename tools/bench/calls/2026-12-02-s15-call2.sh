#!/usr/bin/env bash
# Session 15's second device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_shadow //kernels:gpu_gemm_shadow_test \
#     //kernels:gemm_bench_stamps //kernels:gemm_bench_shadow_stamps
# Call 1: `boundary` 1.06-1.07x the time on every 256-row case; the timeline put a
# warpgroup's last half's completion ~620 clk before the next block's issue (~200 between
# halves). Candidate `shadow`: the next block's stage, phase, descriptor field and a
# non-blocking test of its full barrier done while the last half's WGMMAs run.
# 1. every gpu_gemm test of the bundle (shadow's against FP64);
# 2. v21 against shadow on the M >= 4096 cases, both orders;
# 3. the stamps probe with and without shadow at 4096x7168x16384.
# Output: $OUT/kernel_ab.tar.gz, $OUT/call2.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=380 \
  GEMMD_AB_ONLY='dense 4096x,dense 8192x,stacked' \
  tools/bench/kernel_ab.sh gemm_bench_shadow
source tools/bench/calls/lib.sh && call_setup call2
for b in gemm_bench_stamps gemm_bench_shadow_stamps; do
  timeout -s KILL 50 .gpu/bin/$b --kernel wgmma --reps 3 --stamps \
    --only 'dense 4096x7168x16384' >"$o/$b.log" 2>&1
  echo "## $b: rc=$?"
  grep -E "^(dense|decode)|stamps" "$o/$b.log" | cut -c1-330
  grep "wgmma clk" "$o/$b.log" | cut -c1-900
  pack
done
