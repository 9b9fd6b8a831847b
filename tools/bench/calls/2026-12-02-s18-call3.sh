#!/usr/bin/env bash
# Session 18's third device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_epionce //kernels:gpu_gemm_epionce_test \
#     //kernels:gemm_bench_probe12_joint //kernels:gemm_bench_probe5_joint
# (epionce left the kernel after this call: docs/bench/raw/2026-12-02-s18-epionce-probe11.patch,
# on commit eb2b269; probe12_joint is commented out in kernels/BUILD's KERNEL_VARIANTS).
# 1. every gpu_gemm test of the bundle, then candidate `epionce` (a 256-row tile's
#    warpgroup stages both halves, meets once and stores its 128 rows at once) against v25
#    on the M >= 4096 cases, both orders (kernel_ab.sh);
# 2. probe 12 (the tile staged and read back, nothing stored) beside probe 5 (no epilogue)
#    and v25 on the short-K M = 4096 cases: the global stores' share of the epilogue.
# Output: $OUT/kernel_ab.tar.gz, $OUT/call3.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=420 GEMMD_AB_ONLY="dense 4096x,stacked,8192x8192" \
  tools/bench/kernel_ab.sh gemm_bench_epionce
source tools/bench/calls/lib.sh && call_setup call3
short="dense 4096x32768x512,dense 4096x24576x1536,dense 4096x7168x2048,stacked 4x8192 7168x2048"
for b in gemm_bench_probe12_joint gemm_bench_probe5_joint gemm_bench; do
  bench_passes "$b" 1 90 "$b" --only "$short"
done
