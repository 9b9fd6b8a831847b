#!/usr/bin/env bash
# Session 20's fifth device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_pingpong1 //kernels:gemm_bench_pingpong5 \
#     //kernels:gpu_gemm_pingpong5_test
# from the tree of docs/bench/raw/2026-12-02-s20-pingpong5.patch (applied to the commit that
# adds this script), which has "pingpong1": ["-DGEMMD_WGMMA_PINGPONG=1"] and "pingpong5":
# ["-DGEMMD_WGMMA_PINGPONG=1", "-DGEMMD_WGMMA_PINGPONG_HALFSTAGE=1"] in KERNEL_EXPERIMENTS.
# pingpong5's gpu_gemm test, then on the dense M = 4096 cases each build with its ping-pong
# tiles forced at 128 columns (--kinds tma_store): 4 ring stages (pingpong1: each
# warpgroup stages its 128 rows) against 5 (pingpong5: 64 rows at a time), in the order
# pingpong1, pingpong5, pingpong5, pingpong1.
# Output: $OUT/s20-call5.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup s20-call5
OUT="$o" GEMMD_TEST_TIMEOUT=120 .gpu/gpu_run.sh gpu_gemm_pingpong5 2>&1 | tail -n 6
pack
args=(--kinds tma_store --tile-n 128 --only "dense 4096x")
bench_passes pp1-a 1 100 gemm_bench_pingpong1 "${args[@]}"
bench_passes pp5-a 1 100 gemm_bench_pingpong5 "${args[@]}"
bench_passes pp5-b 1 100 gemm_bench_pingpong5 "${args[@]}"
bench_passes pp1-b 1 100 gemm_bench_pingpong1 "${args[@]}"
