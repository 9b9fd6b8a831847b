#!/usr/bin/env bash
# Session 19's fifth device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench //kernels:gemm_bench_quadstore \
#     //kernels:gemm_bench_quadstore4 //kernels:gpu_gemm_quadstore_test //kernels:gpu_gemm_quadstore4_test
# with "quadstore": ["-DGEMMD_WGMMA_QUADSTORE=1"] and "quadstore4": ["-DGEMMD_WGMMA_QUADSTORE=1",
# "-DGEMMD_WGMMA_QUADSTORE_RING=1"] in kernels/BUILD's KERNEL_EXPERIMENTS.
# Every gpu_gemm test of the bundle, then candidates `quadstore` (the staged epilogue's
# tiles leave straight from registers, 16 bytes per lane after a shuffle within each quad)
# and `quadstore4` (the same, and the staging area given to the ring: 4 stages at 256 x 128)
# against v25 on every case, both orders (kernel_ab.sh).
# Output: $OUT/kernel_ab.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=500 \
  tools/bench/kernel_ab.sh gemm_bench_quadstore gemm_bench_quadstore4
