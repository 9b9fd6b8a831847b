#!/usr/bin/env bash
# Session 20's second device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_entryfields //kernels:gemm_bench_tmapsys \
#     //kernels:gemm_bench_stamps //kernels:gpu_gemm_entryfields_test //kernels:gpu_gemm_tmapsys_test
# with "entryfields": ["-DGEMMD_WGMMA_ENTRY_FIELDS=1"], "tmapsys": ["-DGEMMD_WGMMA_TMAP_SYS=1"]
# and "stamps": ["-DGEMMD_WGMMA_STAMPS=1"] in kernels/BUILD's KERNEL_EXPERIMENTS (at the
# commit that adds this script).
# Every gpu_gemm test of the bundle, then candidates `entryfields` (a one-group batch's
# table row loaded into L1 right after the header) and `tmapsys` (the maps' acquire fence
# at .sys scope) against v25 on M <= 128 and the decode batches, both orders
# (kernel_ab.sh); then the stamps build (new point `synced`: the TMA thread past the CTA's
# setup) on the same cases.
# Output: $OUT/kernel_ab.tar.gz, $OUT/s20-call2.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=440 GEMMD_AB_ONLY="dense 1x,dense 8x,dense 16x,dense 64x,dense 128x,decode" \
  tools/bench/kernel_ab.sh gemm_bench_entryfields gemm_bench_tmapsys
source tools/bench/calls/lib.sh && call_setup s20-call2
bench_passes stamps 1 120 gemm_bench_stamps --stamps --only "dense 1x,dense 64x,dense 128x,decode"
