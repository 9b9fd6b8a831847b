#!/usr/bin/env bash
# Session 17's third device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh
# gemmd's build is v25 here: the rounds rule also weighs ROWS128 at 64 columns (host only;
# call 2 timed those tiles forced: 256x2112x7168 23.9 us against v24's choice's 29.6).
# 1. gpu_gemm_test (every kind and width against FP64; the rule's choices);
# 2. the rule's choice beside cuBLASLt on the DeepGEMM N x K at M = 256 ... 2048 (call 2's
#    shapes where v25 moves four; no forced kinds);
# 3. gemm_bench on every case of issue 6 (v25 chooses as v24 there), one pass.
# Output: $OUT/call3.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call3
timeout -s KILL 90 .gpu/bin/gpu_gemm_test >"$o/gpu_gemm_test.log" 2>&1
echo "## gpu_gemm_test: rc=$?"; tail -n 4 "$o/gpu_gemm_test.log"
pack
shapes=""
for m in 256 512 1024 2048; do
  shapes="$shapes${shapes:+,}${m}x2112x7168,${m}x24576x1536,${m}x32768x512,${m}x7168x16384,${m}x4096x7168,${m}x7168x2048"
done
bench_passes shapes 1 90 gemm_bench --shape "$shapes"
bench_passes all 1 220 gemm_bench
python3 tools/bench/kernel_summary.py "$o/all-pass1.log"
