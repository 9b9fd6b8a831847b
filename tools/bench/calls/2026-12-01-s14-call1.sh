#!/usr/bin/env bash
# Session 14's first device call (docs/bench/kernels.md, 2026-12-01), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_scaletma //kernels:gpu_gemm_scaletma_test
# 1. every gpu_gemm test: gpu_gemm_test's paired batch has three K >= 4096 groups since
#    session 13 (chunks with ragged and short row tiles), not yet run on a GPU;
# 2. v20 (gemmd's build) against `scaletma` (a chunk's A scales by one TMA load instead of
#    8 cp.asyncs per lane, raw/2026-12-01-s13-scaletma.patch) on the M >= 4096 cases, both
#    orders (session 13: the per-block scale copies cost 7% at long K, v20 took ~4).
# Output: $OUT/kernel_ab.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=400 GEMMD_AB_ONLY='dense 4096x,dense 8192x,stacked' \
  tools/bench/kernel_ab.sh gemm_bench_scaletma
