#!/usr/bin/env bash
# Session 10's third device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on a
# bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_oddn //kernels:gpu_gemm_oddn_test
# v14 against `oddn` (ROWS128 also has tiles of 56 and 96 columns, chosen by the same cost
# model): both builds' gpu_gemm tests (oddn's forces 56 and 96 on every batch), then the
# M <= 128 and decode cases and 4096x2112x7168 on each; oddn also times widths
# 56/64/96/128 on each case. Output: $OUT/kernel_ab.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
export GEMMD_AB_ONLY='decode,dense 1x,dense 8x,dense 16x,dense 64x,dense 128x,dense 4096x2112' GEMMD_AB_DEADLINE_S=450
export GEMMD_AB_ARGS_gemm_bench_oddn='--tile-n 56,64,96,128'
tools/bench/kernel_ab.sh gemm_bench_oddn
