#!/usr/bin/env bash
# Session 13's first device call (docs/bench/kernels.md, 2026-12-01), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_suspend //kernels:gpu_gemm_suspend_test
# 1. every gpu_gemm test: gpu_gemm_test's new paired 256-row-tile batch (session 12 built
#    it after its last call) and the candidate's;
# 2. v19 against `suspend` (every mbarrier try_wait with a 10 ms suspend-time hint: ptxas
#    emits NANOSLEEP.SYNCS instead of v19's TRYWAIT polling loop) on every case of issue 6,
#    then again in the other order.
# Output: $OUT/kernel_ab.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=470 tools/bench/kernel_ab.sh gemm_bench_suspend
