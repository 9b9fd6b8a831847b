#!/usr/bin/env bash
# Session 19's sixth device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_stamps
# with "stamps": ["-DGEMMD_WGMMA_STAMPS=1"] (kernels/BUILD's comment under
# KERNEL_EXPERIMENTS) in KERNEL_VARIANTS.
# Small M's chain taken apart (Next, session 19, item 2): the stamps build, now with the TMA
# thread's first unit stamped when its group and tile are known ("unit"), after its two
# maps' acquire fences ("acquired") and after the group's fields ("located"), on the
# M <= 128 and decode cases, then on two M = 4096 cases.
# Output: $OUT/call6.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call6
bench_passes stamps-small 1 120 gemm_bench_stamps --stamps --only "dense 1x,dense 64x,dense 128x,decode"
bench_passes stamps-4096 1 60 gemm_bench_stamps --stamps --only "dense 4096x7168x2048,dense 4096x32768x512"
