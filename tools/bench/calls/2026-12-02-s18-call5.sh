#!/usr/bin/env bash
# Session 18's fifth device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_stamps //kernels:gemm_bench_stamps_wgskew
# with "stamps" and "stamps_wgskew" (kernels/BUILD's comment under KERNEL_EXPERIMENTS) in
# KERNEL_VARIANTS, on commit 8e79523 (GEMMD_WGMMA_WG_SKEW_NS left the kernel in session 19,
# which ran this call as tools/bench/calls/2026-12-02-s19-call1.sh).
# Does `wgskew`'s lag hold (Next, session 18, item 1)? The stamps build (gemmd's kernel plus
# timer stamps) with and without the second consumer warpgroup starting 2 us late, on two
# short-K M = 4096 cases, each with --stamps (per CTA the last K blocks' WGMMA timeline of
# both warpgroups: "warpgroups' same batch done N apart"). (Cut to these two runs after two
# refused device starts left 313 s of the session's device time.)
# Output: $OUT/call5.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call5
only="dense 4096x32768x512,dense 4096x7168x2048"
bench_passes stamps 1 60 gemm_bench_stamps --stamps --only "$only"
bench_passes stamps_wgskew 1 60 gemm_bench_stamps_wgskew --stamps --only "$only"
