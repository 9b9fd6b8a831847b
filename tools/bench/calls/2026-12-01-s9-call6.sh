#!/usr/bin/env bash
# Session 9's sixth device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on
# call 5's bundle (gemmd's build is v14): the decode batches and the M in {64, 128} cases
# again, 20 runs each, on another machine than call 3's, to see whether decode 128x4's
# 3.82 TB/s (goal 3.8) holds. Output: $OUT/call6.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call6
timeout 150 .gpu/bin/gemm_bench --kernel wgmma --reps 20 --only 'decode,dense 64x,dense 128x' >"$o/gemm_bench.log" 2>&1
echo "## gemm_bench rc=$?"
pack
grep -v "^#" "$o/gemm_bench.log" | cut -c1-60,120-200
python3 tools/bench/kernel_summary.py "$o/gemm_bench.log" 2>&1 | tail -n 4
