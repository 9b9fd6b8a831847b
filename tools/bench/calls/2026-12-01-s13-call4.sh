#!/usr/bin/env bash
# Session 13's fourth device call (docs/bench/kernels.md, 2026-12-01), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_v19 //kernels:gemm_bench_chunkmin8 \
#     //kernels:gpu_gemm_chunkmin8_test
# (As it ran: chunkstream's code is now docs/bench/raw/2026-12-01-s13-chunkstream.patch;
# the v19 and chunkmin8 builds are gone from kernels/BUILD, whose comment says how to add
# v19 back.)
# gemmd's build here was `chunkstream` (v20 while it ran; v20 is now call 5's build): the
# scale warp copies the scales in chunks of four K blocks and keeps two chunks in flight
# across its units (call 3's `scalechunk` copied each unit's first chunk only when the unit
# began: 3% slower at K = 512).
#   1. every gpu_gemm test (gemmd's build, chunkmin8);
#   2. v20 against v19 (the per-block copies, as gemmd ran before) and chunkmin8 (chunks only
#      where a tile has at least 8 K blocks) on the M >= 4096 cases, both orders (the
#      other kinds' kernels are v19's SASS byte for byte);
#   3. v20 on every case of issue 6 (the table of record).
# Output: $OUT/kernel_ab.tar.gz, $OUT/call4.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=330 GEMMD_AB_ONLY='dense 4096x,dense 8192x,stacked' \
  tools/bench/kernel_ab.sh gemm_bench_v19 gemm_bench_chunkmin8
source tools/bench/calls/lib.sh && call_setup call4
timeout -s KILL 150 .gpu/bin/gemm_bench --kernel wgmma --reps 10 >"$o/gemm_bench-all.log" 2>&1
echo "## gemm_bench (every case): rc=$?"
python3 tools/bench/kernel_summary.py "$o/gemm_bench-all.log"
pack
