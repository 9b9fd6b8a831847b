#!/usr/bin/env bash
# Session 19's second device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench //kernels:gemm_bench_colsplit \
#     //kernels:gpu_gemm_colsplit_test //kernels:gpu_gemm_test
# with "colsplit": ["-DGEMMD_WGMMA_COLSPLIT=1"] in kernels/BUILD's KERNEL_EXPERIMENTS.
# Every gpu_gemm test of the bundle, then candidate `colsplit` (256-row tiles of 128
# columns: each half's K block as two 64-column groups into two 32-register accumulators,
# two groups in flight) against v25 on the M >= 4096 cases, both orders (kernel_ab.sh).
# Output: $OUT/kernel_ab.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=480 GEMMD_AB_ONLY="dense 4096x,stacked,8192x8192" \
  tools/bench/kernel_ab.sh gemm_bench_colsplit
