#!/usr/bin/env bash
# Session 10's fourth device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on a
# bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_oddn //kernels:gpu_gemm_oddn_test
# Call 3 again with call 3's rule bug mended (the default build priced width 96, which it
# lacks): both builds' gpu_gemm tests, v14 against `oddn` on the M <= 128 and decode cases
# and 4096x2112x7168; then v14 on the same cases with --flush clean (L2 left holding clean
# lines instead of the memset's written ones). Output: $OUT/kernel_ab.tar.gz, $OUT/call4.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
only='decode,dense 1x,dense 8x,dense 16x,dense 64x,dense 128x,dense 4096x2112'
GEMMD_AB_ONLY="$only" GEMMD_AB_DEADLINE_S=300 tools/bench/kernel_ab.sh gemm_bench_oddn
source tools/bench/calls/lib.sh && call_setup call4
timeout -s KILL 150 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --only "$only" --flush clean >"$o/gemm_bench-clean.log" 2>&1
python3 tools/bench/kernel_summary.py "$o/gemm_bench-clean.log"
grep -v '^#' "$o/gemm_bench-clean.log" | cut -c1-150
pack
