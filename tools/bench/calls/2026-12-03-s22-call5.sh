#!/usr/bin/env bash
# Session 22's fifth device call (docs/bench/kernels.md, 2026-12-03; not run: the session's
# device time ran out), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_stamps2
# with "stamps2": ["-DGEMMD_WGMMA_STAMPS=2"] in kernels/BUILD's KERNEL_EXPERIMENTS (moved
# there from the list of probes kept out of the build): the stamps probe with the WGMMA timeline of each
# warpgroup's first 2 x 16 K blocks (a split unit of 128x2112x7168 has 28: all of them), on
# four small-M cases; where a unit's ~760 clk per block (session 21's stamps) go.
# Output: $OUT/s22-call5.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup s22-call5
bench_passes stamps2 1 90 gemm_bench_stamps2 --stamps \
  --only "dense 128x2112x7168,dense 64x2112x7168,dense 128x4096x7168,dense 64x4096x7168"
