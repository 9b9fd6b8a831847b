#!/usr/bin/env bash
# Session 11's second device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on a
# bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_hold256 //kernels:gpu_gemm_hold256_test
# v17 against `hold256` (256-row tiles stage their output in the ring stage of their last K
# block, released after the epilogue: 4 stages at width 128 instead of 3):
#   1. every gpu_gemm test, then the M >= 4096 cases on each build (kernel_ab.sh);
#   2. the same cases again, the candidate first;
#   3. v17 with every kind at widths 64, 96, 128 and 192 on the M >= 4096 and M = 128
#      cases: is the rule's pick still the fastest after v17?
# Output: $OUT/kernel_ab.tar.gz and $OUT/call2.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
only='dense 4096x,dense 8192x,stacked'
GEMMD_AB_ONLY="$only" GEMMD_AB_DEADLINE_S=300 tools/bench/kernel_ab.sh gemm_bench_hold256
source tools/bench/calls/lib.sh && call_setup call2
for b in gemm_bench_hold256 gemm_bench; do
  timeout 100 .gpu/bin/$b --kernel wgmma --reps 10 --only "$only" >"$o/again-$b.log" 2>&1
  echo "## again $b rc=$?"
  pack
done
for b in gemm_bench_hold256 gemm_bench; do grep -v "^#" "$o/again-$b.log" | cut -c1-60,120-300; done
timeout 240 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --only "$only,dense 128x" \
  --kinds rows128,tma_store,rows256,wide --tile-n 64,96,128,192 >"$o/kinds.log" 2>&1
echo "## kinds rc=$?"
pack
grep -v "^#" "$o/kinds.log" | cut -c1-44,120-600
