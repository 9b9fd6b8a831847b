#!/usr/bin/env bash
# Session 16's sixth device call (docs/bench/kernels.md, 2026-12-02), on call 3's bundle
# (deploy/gpu_bundle.sh: gemmd's build, v23).
# Call 5 put N = 2112's loss on wave quantization. Which kind and width fills the rounds
# best at M = 3840, 4096 and 4608 (N x K 2112 x 7168)? Every kind at every width it has,
# forced (ROWS128, its TMA-store form, ROWS256, ROWS128_WIDE), two passes.
# Output: $OUT/call6.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call6
for pass in 1 2; do
  timeout -s KILL 200 .gpu/bin/gemm_bench --kernel wgmma --reps 10 \
    --shape 3840x2112x7168,4096x2112x7168,4608x2112x7168 \
    --kinds rows128,tma_store,rows256,wide --tile-n 16,32,64,96,128,192 >"$o/sweep-pass$pass.log" 2>&1
  echo "## pass $pass: rc=$?"
  grep -E "^dense" "$o/sweep-pass$pass.log" | cut -c100-600
  pack
done
