#!/usr/bin/env bash
# Session 22's second device call (docs/bench/kernels.md, 2026-12-03), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_tmapat1 //kernels:gpu_gemm_tmapat1_test \
#     //kernels:gemm_bench_tmapat2 //kernels:gpu_gemm_tmapat2_test
# with "tmapat1": ["-DGEMMD_WGMMA_TMAP_AT=1"] and "tmapat2": ["-DGEMMD_WGMMA_TMAP_AT=2"] in
# kernels/BUILD's KERNEL_EXPERIMENTS (at the commit that adds this script).
# Every gpu_gemm test of the bundle, then `tmapat1` (a one-group batch's two
# prefetch.tensormap issued by thread 64 once the header has landed, before the CTA's
# barrier) and `tmapat2` (none issued) against v27 on M in {1, 64, 128} and the decode
# batches, both orders (kernel_ab.sh).
# Output: $OUT/kernel_ab.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=420 GEMMD_AB_ONLY="dense 1x,dense 64x,dense 128x,decode" \
  tools/bench/kernel_ab.sh gemm_bench_tmapat1 gemm_bench_tmapat2
