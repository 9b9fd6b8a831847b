#!/usr/bin/env bash
# Session 16's fifth device call (docs/bench/kernels.md, 2026-12-02), on call 3's bundle
# (deploy/gpu_bundle.sh: gemmd's build, v23).
# Is 4096x2112x7168 held by its third wave (kernels.md Next, session 16, item 1)? N x K
# 2112 x 7168 at M = 1536, 3072, 3840, 4096, 4608: 66, 132, 165, 176 and 198 pair units of
# 256 x 96 tiles on 66 clusters (1, 2, 2.5, 2.67, 3 rounds); also forced to ROWS128_WIDE's
# 128 x 192 (the same units as single tiles on 132 SMs). Two passes.
# Output: $OUT/call5.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call5
for pass in 1 2; do
  timeout -s KILL 120 .gpu/bin/gemm_bench --kernel wgmma --reps 10 \
    --shape 1536x2112x7168,3072x2112x7168,3840x2112x7168,4096x2112x7168,4608x2112x7168 \
    --kinds wide --tile-n 192 >"$o/waves-pass$pass.log" 2>&1
  echo "## pass $pass: rc=$?"
  grep -E "^dense" "$o/waves-pass$pass.log" | cut -c1-220
  pack
done
