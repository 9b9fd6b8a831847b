#!/usr/bin/env bash
# Session 20's fourth device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_pingpong1 //kernels:gemm_bench_pingpong4 \
#     //kernels:gpu_gemm_pingpong1_test //kernels:gpu_gemm_pingpong4_test
# from the tree of docs/bench/raw/2026-12-02-s20-pingpong4.patch (applied to the commit that
# adds this script): "pingpong1": ["-DGEMMD_WGMMA_PINGPONG=1"] and "pingpong4":
# ["-DGEMMD_WGMMA_PINGPONG=1", "-DGEMMD_WGMMA_PINGPONG_TWOACC=1"] in KERNEL_EXPERIMENTS.
# The two builds' gpu_gemm tests, then on the dense M = 4096 cases, each build with its
# ping-pong tiles and ROWS128 forced at 64 columns (--kinds rows128,tma_store --tile-n 64):
# a lone warpgroup's K loop with one block accumulator (pingpong1) and with two
# (pingpong4), beside both warpgroups in the K loop on the same 128 x 64 tiles (ROWS128),
# in the order pingpong1, pingpong4, pingpong4, pingpong1.
# Output: $OUT/s20-call4.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup s20-call4
OUT="$o" GEMMD_TEST_TIMEOUT=120 .gpu/gpu_run.sh gpu_gemm_pingpong 2>&1 | tail -n 12
pack
args=(--kinds rows128,tma_store --tile-n 64 --only "dense 4096x")
bench_passes pp1-a 1 120 gemm_bench_pingpong1 "${args[@]}"
bench_passes pp4-a 1 120 gemm_bench_pingpong4 "${args[@]}"
bench_passes pp4-b 1 120 gemm_bench_pingpong4 "${args[@]}"
bench_passes pp1-b 1 120 gemm_bench_pingpong1 "${args[@]}"
