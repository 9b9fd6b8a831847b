#!/usr/bin/env bash
# Session 18's second device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_probe11_joint //kernels:gemm_bench_probe5_joint
# (probe 11 left the kernel after this call: git apply docs/bench/raw/2026-12-02-s18-epionce-probe11.patch
# on commit eb2b269 restores it and its probe11_joint variant, with epionce besides).
# Where the short-K epilogue's cost lies: gemmd's build (v25) beside probe 5 (no output
# stores) and probe 11 (the stores kept, each CTA writing every tile into its own window
# of D: no traffic to memory), on the M >= 4096 cases; then v25 and probe 11 again in the
# other order on the short-K ones. Probes' results are wrong by design (their check
# column says so).
# Output: $OUT/call2.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call2
big="dense 4096x,stacked,8192x8192"
bench_passes v25 1 120 gemm_bench --only "$big"
bench_passes probe11 1 120 gemm_bench_probe11_joint --only "$big"
bench_passes probe5 1 120 gemm_bench_probe5_joint --only "$big"
short="dense 4096x32768x512,dense 4096x24576x1536,dense 4096x7168x2048,stacked 4x8192 7168x2048"
bench_passes probe11-again 1 90 gemm_bench_probe11_joint --only "$short"
bench_passes v25-again 1 90 gemm_bench --only "$short"
