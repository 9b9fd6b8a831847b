#!/usr/bin/env bash
# Session 12's first device call (docs/bench/kernels.md, 2026-12-01), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_copyout //kernels:gpu_gemm_copyout_test \
#     //kernels:gemm_bench_probe1_joint
# 1. v17 against `copyout` (the staged epilogue reads all of a thread's 16-byte pieces before
#    it stores any: no store waits behind its own read and a branch), every case;
# 2. probe1_joint (B loaded only in a tile's first K block: a third fewer L2 -> SM bytes at
#    256 rows, what A multicast across 2-CTA clusters would save; its results are wrong by
#    design) on the M >= 4096 cases: is multicast worth building?
# Both passes, then again in the other order (GEMMD_AB_AGAIN). Output: $OUT/kernel_ab.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=540 \
  GEMMD_AB_ARGS_gemm_bench_probe1_joint="--only 'dense 4096x,dense 8192x,stacked'" \
  tools/bench/kernel_ab.sh gemm_bench_copyout gemm_bench_probe1_joint
