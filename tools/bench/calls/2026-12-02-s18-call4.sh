#!/usr/bin/env bash
# Session 18's fourth device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_stsm //kernels:gpu_gemm_stsm_test
# (stsm left the kernel after this call: git apply docs/bench/raw/2026-12-02-s18-stsm.patch on
# this session's last commit and add "stsm": ["-DGEMMD_WGMMA_STSM=1"] to KERNEL_EXPERIMENTS).
# Candidate `stsm` (the staged epilogue writes the rounded accumulators with stmatrix.x4)
# against v25: every gpu_gemm test of the bundle, then the M >= 4096, M in {64,128} and
# decode cases, both orders (kernel_ab.sh).
# Output: $OUT/kernel_ab.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=480 GEMMD_AB_ONLY="dense 4096x,stacked,8192x8192,dense 64x,dense 128x,decode" \
  tools/bench/kernel_ab.sh gemm_bench_stsm
