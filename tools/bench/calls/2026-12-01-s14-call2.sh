#!/usr/bin/env bash
# Session 14's second device call (docs/bench/kernels.md, 2026-12-01), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_scaletma //kernels:gemm_bench_chunkdirect \
#     //kernels:gpu_gemm_chunkdirect_test //kernels:gemm_bench_stamps
# 1. every gpu_gemm test of the bundle (chunkdirect's against FP64);
# 2. v20 against `scaletma` (call 1: 0.98x at long K) and `chunkdirect` (scaletma, and the
#    consumers read the chunk itself: the scale warp no longer copies scales into each
#    stage) on the M >= 4096 cases, both orders;
# 3. the `stamps` probe (gemmd's build plus per-CTA timer stamps at eight points of a
#    launch) on the small-M and decode cases and two M = 4096 ones: where a short launch's
#    fixed cost goes (header, table, first loads, first tile, tail).
# Output: $OUT/kernel_ab.tar.gz, $OUT/call2.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=330 GEMMD_AB_ONLY='dense 4096x,dense 8192x,stacked' \
  tools/bench/kernel_ab.sh gemm_bench_scaletma gemm_bench_chunkdirect
source tools/bench/calls/lib.sh && call_setup call2
timeout -s KILL 150 .gpu/bin/gemm_bench_stamps --kernel wgmma --reps 10 --stamps \
  --only 'dense 1x,dense 8x,dense 64x,dense 128x,decode,dense 4096x32768,dense 4096x7168x2048' \
  >"$o/gemm_bench_stamps.log" 2>&1
echo "## gemm_bench_stamps: rc=$?"
grep -E "^(dense|decode)|stamps" "$o/gemm_bench_stamps.log" | cut -c1-400
pack
