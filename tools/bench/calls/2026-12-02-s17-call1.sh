#!/usr/bin/env bash
# Session 17's first device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_l2hint1 //kernels:gpu_gemm_l2hint1_test \
#     //kernels:gemm_bench_l2hint2 //kernels:gpu_gemm_l2hint2_test
# Candidates `l2hint1` (B's TMA loads evict_first in groups whose rows fit one tile) and
# `l2hint2` (also A's evict_last there) against v24 (gemmd's build):
# 1. every gpu_gemm test of the bundle;
# 2. the M <= 128 and decode cases, both orders (kernel_ab.sh);
# 3. the same with --flush clean (L2 full of clean lines), one pass per build: whether a
#    gain is the flush's written lines.
# Output: $OUT/kernel_ab.tar.gz, $OUT/call1.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
small='dense 1x,dense 8x,dense 16x,dense 64x,dense 128x,decode'
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=330 GEMMD_AB_ONLY="$small" \
  tools/bench/kernel_ab.sh gemm_bench_l2hint1 gemm_bench_l2hint2
source tools/bench/calls/lib.sh && call_setup call1
for b in gemm_bench gemm_bench_l2hint1 gemm_bench_l2hint2; do
  bench_passes "$b-clean" 1 90 "$b" --only "$small" --flush clean
done
