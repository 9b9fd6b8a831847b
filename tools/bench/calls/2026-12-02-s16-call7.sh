#!/usr/bin/env bash
# Session 16's seventh device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_rounds //kernels:gpu_gemm_rounds_test
# Candidate `rounds` (GEMMD_WGMMA_RULE_ROUNDS=1, host only): for batches whose groups all
# have >= 256 rows and >= 512 columns, the kind and width whose rounds cost least, each
# priced per output and K block from call 6. By arithmetic it keeps every issue 6 choice
# and moves 3840x2112x7168 to ROWS128/128 (call 6: 111 us against 144).
# 1. gpu_gemm_rounds_test (the rule's choices against FP64);
# 2. v23 against rounds on the M >= 4096 cases and N = 2112 at M = 3840 / 4096 / 4608, one
#    pass each order.
# Output: $OUT/call7.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call7
timeout -s KILL 60 .gpu/bin/gpu_gemm_rounds_test >"$o/gpu_gemm_rounds_test.log" 2>&1
echo "## gpu_gemm_rounds_test: rc=$?"; tail -4 "$o/gpu_gemm_rounds_test.log"
pack
i=0
for b in gemm_bench gemm_bench_rounds gemm_bench; do
  i=$((i + 1))
  timeout -s KILL 60 .gpu/bin/$b --kernel wgmma --reps 10 --only 'dense 4096x,dense 8192x,stacked' >"$o/$i-$b-set.log" 2>&1
  timeout -s KILL 30 .gpu/bin/$b --kernel wgmma --reps 10 \
    --shape 3840x2112x7168,4096x2112x7168,4608x2112x7168 >"$o/$i-$b-shapes.log" 2>&1
  echo "## $i $b"
  grep -hE "^(dense|stacked)" "$o/$i-$b-set.log" "$o/$i-$b-shapes.log" | cut -c1-150
  pack
done
