#!/usr/bin/env bash
# Session 15's sixth device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_probe3_joint
# Next (session 15) item 1: split what stands between v22 (1325 TFLOPS at 4096x7168x16384)
# and probe 4 (no loads after the ring's first pass, no promotions: 1629) into the loads'
# share and the promotions': probe 3 (no loads, promotions kept) beside v22, same three
# long-K cases as calls 4 and 5, two passes. Output: $OUT/call6.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call6
for pass in 1 2; do
  for b in gemm_bench gemm_bench_probe3_joint; do
    timeout -s KILL 60 .gpu/bin/$b --kernel wgmma --reps 10 \
      --only 'dense 4096x7168x16384,dense 8192x8192x8192,stacked 4x8192 4096x7168' >"$o/pass$pass-$b.log" 2>&1
    echo "## pass $pass $b: rc=$?"
    grep -E "^(dense|stacked)" "$o/pass$pass-$b.log" | cut -c1-120
  done
  pack
done
