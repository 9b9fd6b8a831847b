#!/usr/bin/env bash
# Session 22's third device call (docs/bench/kernels.md, 2026-12-03), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_pingpong96 //kernels:gpu_gemm_pingpong96_test
# with "pingpong96": ["-DGEMMD_WGMMA_PINGPONG=1", "-DGEMMD_WGMMA_PINGPONG_TWOACC=1",
# "-DGEMMD_WGMMA_PINGPONG_96=1"] in kernels/BUILD's KERNEL_EXPERIMENTS (at the commit that
# adds this script; the code is session 20's ping-pong patch plus 96 columns).
# gpu_gemm_test and gpu_gemm_pingpong96_test (ping-pong tiles of 96 columns forced on every
# batch), then on the short-K M = 4096 cases (dense and stacked) in one binary: the rule's
# own, ping-pong tiles of 96 columns with two block accumulators (tma_store/96) and of 128
# with one (tma_store/128: session 20's pingpong1), ROWS256 at 96 and 128 (the joint
# kernel, unchanged), ROWS128_WIDE at 96; two passes.
# Output: $OUT/s22-call3.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup s22-call3
for t in gpu_gemm_test gpu_gemm_pingpong96_test; do
  timeout -s KILL 100 ".gpu/bin/$t" >"$o/$t.log" 2>&1
  echo "## $t: rc=$?"
  tail -n 4 "$o/$t.log"
done
pack
bench_passes pingpong96 2 200 gemm_bench_pingpong96 --kinds tma_store,rows256,wide --tile-n 96,128 \
  --only "dense 4096x32768x512,dense 4096x24576x1536,dense 4096x7168x2048,stacked 4x8192 7168x2048,stacked 8x4096 7168x2048"
