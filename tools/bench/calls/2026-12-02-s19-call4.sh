#!/usr/bin/env bash
# Session 19's fourth device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_stamps //kernels:gemm_bench
# with "stamps": ["-DGEMMD_WGMMA_STAMPS=1"] (kernels/BUILD's comment under
# KERNEL_EXPERIMENTS) in KERNEL_VARIANTS.
# 1. v25's launch chain at small M (Next, session 18, item 2; session 14 measured v20's):
#    the stamps build on the M <= 128 and decode cases (--stamps: per CTA the header, the
#    first unit located, the first loads, the first stage landed);
# 2. gemmd's build (v25) on every case with --sol, the session's reference run.
# Output: $OUT/call4.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call4
bench_passes stamps-small 1 120 gemm_bench_stamps --stamps --only "dense 1x,dense 8x,dense 64x,dense 128x,decode"
bench_passes v25-all-sol 1 240 gemm_bench --sol
