#!/usr/bin/env bash
# Session 8's first device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on a
# bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_splitk //kernels:gpu_gemm_splitk_test \
#     //kernels:gemm_bench_probe3_rows256 //kernels:gemm_bench_probe4_rows256
# every gpu_gemm test, then each tile kind as its own kernel timed on every case (gemmd's
# build), split-K's first rule with 2/4/8 parts forced on the small cases, and the ROWS256
# probes (no loads; no loads and no promotion) on 4096x7168x16384. Output:
# $OUT/kernel_ab.tar.gz. (gemm_bench ran past kernel_ab.sh's 240 s per build at the last
# case, decode 128x4; that case's time is in the split-K build's table.)
set -u
cd "$(dirname "$0")/../../.."
export GEMMD_AB_ARGS="--kinds rows128,tma_store,rows256" \
  GEMMD_AB_ARGS_gemm_bench_splitk="--splits 2,4,8 --only 'dense 1x,dense 8x,dense 16x,dense 64x,dense 128x,decode'" \
  GEMMD_AB_ARGS_gemm_bench_probe3_rows256="--only 'dense 4096x7168x16384'" \
  GEMMD_AB_ARGS_gemm_bench_probe4_rows256="--only 'dense 4096x7168x16384'" GEMMD_AB_DEADLINE_S=540
tools/bench/kernel_ab.sh gemm_bench_splitk gemm_bench_probe3_rows256 gemm_bench_probe4_rows256
