#!/usr/bin/env bash
# Session 9's fifth device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on a
# bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_rows256s4 //kernels:gpu_gemm_rows256s4_test
# gemmd's build against `rows256s4` (ROWS256's epilogue staged 32 rows per warpgroup at a
# time, so its ring holds 4 stages at width 128, not 3): both builds' gpu_gemm tests, then
# the M >= 4096 cases (those that run ROWS256) on each. Output: $OUT/kernel_ab.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
export GEMMD_AB_ONLY='dense 4096x,8192x8192,stacked' GEMMD_AB_DEADLINE_S=300
tools/bench/kernel_ab.sh gemm_bench_rows256s4
