#!/usr/bin/env bash
# Session 20's first device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench //kernels:gemm_bench_pingpong1 \
#     //kernels:gemm_bench_pingpong2 //kernels:gemm_bench_pingpong3 \
#     //kernels:gpu_gemm_pingpong1_test //kernels:gpu_gemm_pingpong2_test //kernels:gpu_gemm_pingpong3_test
# with "pingpong<v>": ["-DGEMMD_WGMMA_PINGPONG=<v>"] in kernels/BUILD's KERNEL_EXPERIMENTS
# (at the commit that adds this script).
# Every gpu_gemm test of the bundle (each candidate's forces the TMA-store kind, which runs
# ping-pong tiles there, at every width), then each candidate build with its ping-pong
# tiles forced beside the rule's own kind in the same binary (--kinds tma_store: each case
# times the rule's choice and the forced kind) on M = 64, 128 and 4096 and the stacked
# batches: turns after the K loop (1), before its last block (2), none (3).
# Output: $OUT/s20-call1.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup s20-call1
OUT="$o" GEMMD_TEST_TIMEOUT=150 .gpu/gpu_run.sh gpu_gemm 2>&1 | tail -n 30
pack
for v in 1 2 3; do
  bench_passes pingpong$v 1 170 gemm_bench_pingpong$v --kinds tma_store --only "dense 64x,dense 128x,dense 4096x,stacked"
done
