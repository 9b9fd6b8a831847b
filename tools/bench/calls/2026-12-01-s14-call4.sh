#!/usr/bin/env bash
# Session 14's fourth device call (docs/bench/kernels.md, 2026-12-01), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_early //kernels:gpu_gemm_early_test //kernels:gemm_bench_stamps
# Call 3's `early` (maps acquired and prefetched in the prologue, the tile count a plain
# select) was 1.06-1.28x the time everywhere. Its second form here: the tile count through an
# asm (no specialization on it), the maps prefetched by the TMA thread after the CTA's
# barrier, no acquire in the prologue.
# 1. every gpu_gemm test of the bundle;
# 2. v20 against `early` on small-M, decode and 4096x32768x512 cases, both orders;
# 3. the stamps probe, now also stamping when each warpgroup begins to wait for a block's
#    full barrier: is the ~300 clk gap at each 256-row block's start waiting for data?
# Output: $OUT/kernel_ab.tar.gz, $OUT/call4.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=300 \
  GEMMD_AB_ONLY='dense 8x,dense 64x,dense 128x,decode,dense 4096x32768' \
  tools/bench/kernel_ab.sh gemm_bench_early
source tools/bench/calls/lib.sh && call_setup call4
timeout -s KILL 60 .gpu/bin/gemm_bench_stamps --kernel wgmma --reps 3 --stamps \
  --only 'dense 8x7168x2048,dense 4096x7168x16384,dense 4096x32768x512' >"$o/gemm_bench_stamps.log" 2>&1
echo "## gemm_bench_stamps: rc=$?"
grep -E "^(dense|decode)|stamps" "$o/gemm_bench_stamps.log" | cut -c1-330
grep "wgmma clk" "$o/gemm_bench_stamps.log" | cut -c1-900
pack
