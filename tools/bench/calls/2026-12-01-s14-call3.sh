#!/usr/bin/env bash
# Session 14's third device call (docs/bench/kernels.md, 2026-12-01), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_early //kernels:gpu_gemm_early_test \
#     //kernels:gemm_bench_stamps //kernels:gemm_bench_early_stamps
# Call 2's stamps put a small-M launch's first landed stage ~4.5 us after its CTAs start
# (header ~0.5, prefix sums ~0.4, first group's fields ~0.8, maps and data ~2.3).
# 1. every gpu_gemm test of the bundle (early's against FP64);
# 2. v20 against `early` (the first group's fields prefetched with the header; a one-group
#    batch reads no prefix sums and prefetches its two maps right after the header) on the
#    M <= 128 and decode cases and the two short-K M = 4096 ones, both orders;
# 3. the stamps probe on a few cases, without and with early: the launch's first steps, and
#    (fixed since call 2) the WGMMA timeline of each CTA's last blocks: do the two consumer
#    warpgroups' WGMMAs complete one after the other or together?
# Output: $OUT/kernel_ab.tar.gz, $OUT/call3.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=330 \
  GEMMD_AB_ONLY='dense 1x,dense 8x,dense 16x,dense 64x,dense 128x,decode,dense 4096x32768,dense 4096x7168x2048' \
  tools/bench/kernel_ab.sh gemm_bench_early
source tools/bench/calls/lib.sh && call_setup call3
for b in gemm_bench_stamps gemm_bench_early_stamps; do
  timeout -s KILL 60 .gpu/bin/$b --kernel wgmma --reps 5 --stamps \
    --only 'dense 8x7168x2048,dense 64x7168x16384,dense 128x32768x512,decode 128x4,dense 4096x7168x16384' \
    >"$o/$b.log" 2>&1
  echo "## $b: rc=$?"
  grep -E "^(dense|decode)|stamps" "$o/$b.log" | cut -c1-330
  grep "wgmma clk" "$o/$b.log" | cut -c1-200
  pack
done
