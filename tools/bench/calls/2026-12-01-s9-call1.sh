#!/usr/bin/env bash
# Session 9's first device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on a
# bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_lookahead //kernels:gpu_gemm_lookahead_test \
#     //kernels:gemm_bench_pairk //kernels:gpu_gemm_pairk_test \
#     //kernels:gemm_bench_pairk_lookahead //kernels:gpu_gemm_pairk_lookahead_test
#   1. every gpu_gemm test (gemmd's build and the three candidates, against FP64);
#   2. gemmd's build and `lookahead` on every case; `pairk` and `pairk_lookahead` on the
#      M <= 128 and decode cases (they change only tiles of <= 64 rows);
#   3. the decode batches' tiles as one dense group each (4 x 262144 x 2048, 8 x 262144 x
#      4096 at width 128: the same tiles and bytes, no group search, one tensor map).
# Output: $OUT/kernel_ab.tar.gz, $OUT/shape.log.
set -u
cd "$(dirname "$0")/../../.."
small="--only 'dense 1x,dense 8x,dense 16x,dense 64x,dense 128x,decode'"
export GEMMD_AB_ARGS_gemm_bench_pairk="$small" GEMMD_AB_ARGS_gemm_bench_pairk_lookahead="$small" \
  GEMMD_AB_DEADLINE_S=470
tools/bench/kernel_ab.sh gemm_bench_lookahead gemm_bench_pairk gemm_bench_pairk_lookahead
source .gpu/gpu_env.sh
for b in gemm_bench gemm_bench_pairk; do
  timeout 45 .gpu/bin/$b --kernel wgmma --reps 10 --shape 4x262144x2048,8x262144x4096 --tile-n 128 \
    >"${OUT:-/tmp}/shape-$b.log" 2>&1
  echo "## shape $b rc=$?"
done
