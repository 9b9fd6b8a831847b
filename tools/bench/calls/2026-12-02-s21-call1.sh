#!/usr/bin/env bash
# Session 21's first device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_prologue //kernels:gemm_bench_r256w88 \
#     //kernels:gemm_bench_stamps_prologue //kernels:gpu_gemm_prologue_test //kernels:gpu_gemm_r256w88_test
# with "prologue": ["-DGEMMD_WGMMA_PROLOGUE=1"], "r256w88": ["-DGEMMD_WGMMA_ROWS256_88=1"]
# and "stamps_prologue": ["-DGEMMD_WGMMA_STAMPS=1", "-DGEMMD_WGMMA_PROLOGUE=1"] in
# kernels/BUILD's KERNEL_EXPERIMENTS (at the commit that adds this script).
# Every gpu_gemm test of the bundle, then candidate `prologue` (the header's read under the
# CTA's setup, a one-group batch's maps prefetched into L2 at entry) against v26 on
# M in {1, 64, 128} and the decode batches, both orders (kernel_ab.sh); then `r256w88`'s
# 256-row tiles of 88, 96 and 128 columns forced beside its rule's choice on N x K
# 2112 x 7168 at M = 3840, 4096, 4608 and 8192; then the stamps build with prologue on the
# small-M cases (beside session 20 call 3's stamps of v26).
# Output: $OUT/kernel_ab.tar.gz, $OUT/s21-call1.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=360 GEMMD_AB_ONLY="dense 1x,dense 64x,dense 128x,decode" \
  tools/bench/kernel_ab.sh gemm_bench_prologue
source tools/bench/calls/lib.sh && call_setup s21-call1
bench_passes r256w88 1 100 gemm_bench_r256w88 --kinds rows256 --tile-n 88,96,128 \
  --shape 3840x2112x7168,4096x2112x7168,4608x2112x7168,8192x2112x7168
bench_passes stamps-prologue 1 90 gemm_bench_stamps_prologue --stamps --only "dense 1x,dense 64x,dense 128x,decode"
