#!/usr/bin/env bash
# Session 16's first device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_defer2 //kernels:gpu_gemm_defer2_test \
#     //kernels:gemm_bench_defer2a //kernels:gpu_gemm_defer2a_test
# Candidate `defer` (GEMMD_WGMMA_DEFER = P): a 256-row tile's rows are staged as before and
# written out during the next tile's K blocks, P pieces per thread and 64-row half, instead
# of while both warpgroups wait (probe 5: the stores are a third of 4096x32768x512):
# defer2 writes them while each half's WGMMAs run, defer2a after each half's promotion.
# 1. every gpu_gemm test of the bundle (defer2's and defer2a's against FP64);
# 2. v22 against defer2 and defer2a on the M >= 4096 cases, both orders.
# Output: $OUT/kernel_ab.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=500 \
  GEMMD_AB_ONLY='dense 4096x,dense 8192x,stacked' \
  tools/bench/kernel_ab.sh gemm_bench_defer2 gemm_bench_defer2a
