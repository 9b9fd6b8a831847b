#!/usr/bin/env bash
# Session 21's third device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_prologue //kernels:gemm_bench_prologue3 \
#     //kernels:gemm_bench_stamps_prologue3 //kernels:gpu_gemm_prologue_test //kernels:gpu_gemm_prologue3_test
# with "prologue": ["-DGEMMD_WGMMA_PROLOGUE=1"], "prologue3": ["-DGEMMD_WGMMA_PROLOGUE=3"]
# and "stamps_prologue3": ["-DGEMMD_WGMMA_STAMPS=1", "-DGEMMD_WGMMA_PROLOGUE=3"] in
# kernels/BUILD's KERNEL_EXPERIMENTS (at the commit that adds this script).
# Every gpu_gemm test of the bundle, then `prologue` and `prologue3` (also the first group's
# m and k read at entry; the TMA thread locates a one-group batch's units without the
# table) against v26 on M in {1, 64, 128} and the decode batches, both orders
# (kernel_ab.sh); then the stamps build with prologue3 on the same cases.
# Output: $OUT/kernel_ab.tar.gz, $OUT/s21-call3.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=300 GEMMD_AB_ONLY="dense 1x,dense 64x,dense 128x,decode" \
  tools/bench/kernel_ab.sh gemm_bench_prologue gemm_bench_prologue3
source tools/bench/calls/lib.sh && call_setup s21-call3
bench_passes stamps-prologue3 1 70 gemm_bench_stamps_prologue3 --stamps --only "dense 1x,dense 64x,dense 128x,decode"
