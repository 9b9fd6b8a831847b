#!/usr/bin/env bash
# Session 16's fourth device call (docs/bench/kernels.md, 2026-12-02), on call 3's bundle
# (deploy/gpu_bundle.sh: gemmd's build, v23).
# Before building ping-pong tiles for short K (kernels.md Next, session 16, item 2): where
# do the 128-row kinds stand against 256-row tiles at K <= 2048 now? Every kind forced
# (128-row, 128-row with TMA stores, 256-row) at 128 columns on the short-K M >= 4096
# cases, two passes.
# Output: $OUT/call4.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call4
for pass in 1 2; do
  timeout -s KILL 120 .gpu/bin/gemm_bench --kernel wgmma --reps 10 \
    --only 'dense 4096x32768x512,dense 4096x24576x1536,dense 4096x7168x2048,stacked 4x8192 7168x2048' \
    --kinds rows128,tma_store,rows256 --tile-n 128 >"$o/kinds-pass$pass.log" 2>&1
  echo "## pass $pass: rc=$?"
  grep -E "^(dense|stacked)" "$o/kinds-pass$pass.log" | cut -c1-250
  pack
done
