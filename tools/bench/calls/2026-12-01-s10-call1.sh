#!/usr/bin/env bash
# Session 10's first device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on a
# bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_l2pf1 //kernels:gpu_gemm_l2pf1_test \
#     //kernels:gemm_bench_l2pf2 //kernels:gpu_gemm_l2pf2_test
# v14 against `l2pf1` / `l2pf2` (the TMA thread also prefetches B's tile one / two rings of
# K blocks ahead into L2, for groups of at most BM rows): every gpu_gemm test, then the
# M <= 128 and decode cases on each build. Output: $OUT/kernel_ab.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
export GEMMD_AB_ONLY='decode,dense 1x,dense 8x,dense 64x,dense 128x' GEMMD_AB_DEADLINE_S=420
tools/bench/kernel_ab.sh gemm_bench_l2pf1 gemm_bench_l2pf2
