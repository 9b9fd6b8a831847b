#!/usr/bin/env bash
# Session 21's second device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_prologue //kernels:gemm_bench_prologue2 \
#     //kernels:gemm_bench_r256w88 //kernels:gemm_bench_stamps_prologue2 //kernels:gpu_gemm_prologue2_test
# with "prologue": ["-DGEMMD_WGMMA_PROLOGUE=1"], "prologue2": ["-DGEMMD_WGMMA_PROLOGUE=2"],
# "r256w88": ["-DGEMMD_WGMMA_ROWS256_88=1"] and "stamps_prologue2":
# ["-DGEMMD_WGMMA_STAMPS=1", "-DGEMMD_WGMMA_PROLOGUE=2"] in kernels/BUILD's
# KERNEL_EXPERIMENTS (at the commit that adds this script).
# Every gpu_gemm test of the bundle, then `prologue` and `prologue2` (also the first group's
# table row prefetched into L1 at entry) against v26 on M in {1, 64, 128} and the decode
# batches, both orders (kernel_ab.sh); the stamps build with prologue2 (new point `scales`:
# the scale warp's first copies issued) on the same cases; then, while the call has time,
# `r256w88` against v26 on the dense M >= 4096 cases, in the order v26, r256w88, r256w88, v26.
# Output: $OUT/kernel_ab.tar.gz, $OUT/s21-call2.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
t0=$(date +%s)
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=330 GEMMD_AB_ONLY="dense 1x,dense 64x,dense 128x,decode" \
  tools/bench/kernel_ab.sh gemm_bench_prologue gemm_bench_prologue2
source tools/bench/calls/lib.sh && call_setup s21-call2
bench_passes stamps-prologue2 1 80 gemm_bench_stamps_prologue2 --stamps --only "dense 1x,dense 64x,dense 128x,decode"
i=0
for b in gemm_bench gemm_bench_r256w88 gemm_bench_r256w88 gemm_bench; do
  i=$((i + 1))
  [ $(($(date +%s) - t0)) -gt 500 ] && { echo "## m4096-$i-$b: skipped (time)"; continue; }
  bench_passes "m4096-$i-$b" 1 70 "$b" --only "dense 4096x,dense 8192x"
done
