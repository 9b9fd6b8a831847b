#!/usr/bin/env bash
# Session 9's second device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on
# the default bundle (deploy/gpu_bundle.sh) with stream-K (ROWS128_SPLIT with
# GEMMD_GPU_K_SPLITS_STREAM, forced only: the rule does not pick it yet):
#   1. every GPU test (gpu_gemm_test runs stream-K at every width on two batches);
#   2. the M <= 128 and decode cases, stream-K timed at widths 32, 64, 128 and 2 K parts;
#   3. the M >= 4096 cases (the roles' unit loop is now shared with stream-K: same times?).
# Output: $OUT/call2.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call2  # its prologue, as it ran, now in lib.sh
OUT="$o" GEMMD_TEST_TIMEOUT=120 .gpu/gpu_run.sh gpu_ 2>&1 | tail -n 14
pack
timeout 250 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --stream 32,64,128 --splits 2 \
  --only 'dense 1x,dense 8x,dense 16x,dense 64x,dense 128x,decode' >"$o/small.log" 2>&1
echo "## small rc=$?"
pack
timeout 150 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --only 'dense 4096x,8192x8192,stacked' >"$o/large.log" 2>&1
echo "## large rc=$?"
pack
cat "$o/small.log" "$o/large.log" | grep -v "^#" | cut -c1-60,120-400 | head -n 60
python3 tools/bench/kernel_summary.py "$o/large.log" "$o/small.log" 2>&1 | head -n 12
