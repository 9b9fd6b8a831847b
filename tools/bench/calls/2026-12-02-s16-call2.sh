#!/usr/bin/env bash
# Session 16's second device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_r256w96 //kernels:gpu_gemm_r256w96_test
# Candidate `r256w96` (GEMMD_WGMMA_ROWS256_96=1): 256-row tiles of 96 columns, paired, where
# the rule gave 128 x 192 tiles (ROWS128_WIDE) before: 4096x2112x7168 (0.81x cuBLASLt), whose
# 128 x 192 tiles bring 40 KB per SM and K block from L2, the paired 256 x 96 ones 28 KB.
# 1. every gpu_gemm test of the bundle (r256w96's against FP64, ROWS256 at 96 forced on
#    every batch);
# 2. v22 against r256w96 on the M >= 4096 cases, both orders (only 4096x2112x7168 should
#    move); then both with --kinds wide,rows256 --tile-n 96,192 on 4096x2112x7168.
# Output: $OUT/kernel_ab.tar.gz, $OUT/call2.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=300 \
  GEMMD_AB_ONLY='dense 4096x,dense 8192x,stacked' \
  tools/bench/kernel_ab.sh gemm_bench_r256w96
source tools/bench/calls/lib.sh && call_setup call2
for b in gemm_bench gemm_bench_r256w96; do
  timeout -s KILL 60 .gpu/bin/$b --kernel wgmma --reps 10 --only 'dense 4096x2112x7168' \
    --kinds wide,rows256 --tile-n 96,192,128 >"$o/$b-kinds.log" 2>&1
  echo "## $b kinds: rc=$?"
  grep -E "^(dense|  )" "$o/$b-kinds.log" | cut -c1-200
  pack
done
