#!/usr/bin/env bash
# Session 24's fifth device call (docs/bench/kernels.md, 2026-12-04), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:mainloop_probe
# gemmd's kernels are v27's (unchanged since session 21): the GPU tests, then the session's
# reference run of every issue-6 case with --sol (the memory floor beside each), for the
# closing note's numbers.
# Output: $OUT/s24-call5.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup s24-call5
OUT="$o" GEMMD_TEST_TIMEOUT=100 .gpu/gpu_run.sh 2>&1 | tail -n 12
pack
bench_passes v27-all-sol 1 240 gemm_bench --sol
