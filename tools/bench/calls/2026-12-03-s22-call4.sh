#!/usr/bin/env bash
# Session 22's fourth device call (docs/bench/kernels.md, 2026-12-03), on a bundle made with
#   deploy/gpu_bundle.sh
# (v27, gemmd's build). The rule's small-M choices against every 128-row kind, width and K
# split on M in {64, 128} (the issue's six N x K): is any configuration faster than the
# rule's since sessions 8-9 last swept them (v14; the kernels have changed since: scale
# chunks, early, prologue)? Two passes.
# Output: $OUT/s22-call4.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup s22-call4
bench_passes smallm-sweep 2 200 gemm_bench --only "dense 64x,dense 128x" --tile-n 16,32,64,96,128,192 \
  --kinds rows128,tma_store,wide --splits 1,2,4,8
