#!/usr/bin/env bash
# Session 18's first device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh
# gemmd's build (v25's kernels; gemm_bench gained --sol, the memory floor of each case:
# one plain launch moving the bytes the GEMM must read and write, same flush).
# 1. every case of issue 6 with --sol, default (dirty) flush;
# 2. the small-M, decode and K = 512 cases with --sol and the clean flush;
# 3. the six DeepGEMM N x K at M = 256 with --sol (dirty).
# Output: $OUT/call1.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call1
bench_passes all-sol 1 300 gemm_bench --sol
python3 tools/bench/kernel_summary.py "$o/all-sol-pass1.log"
bench_passes small-sol-clean 1 150 gemm_bench --sol --flush clean \
  --only "dense 1x,dense 8x,dense 16x,dense 64x,dense 128x,decode,dense 4096x32768"
python3 tools/bench/kernel_summary.py "$o/small-sol-clean-pass1.log"
bench_passes m256-sol 1 90 gemm_bench --sol \
  --shape 256x2112x7168,256x24576x1536,256x32768x512,256x7168x16384,256x4096x7168,256x7168x2048
