#!/usr/bin/env bash
# Session 17's second device call (docs/bench/kernels.md, 2026-12-02), on call 1's bundle
# (its gemm_bench: gemmd's build, v24's rule; the l2hint candidates unused here).
# Issue 6 asks for every shape from decode to prefill, and its cases stop at M in {64, 128,
# 4096}: the six DeepGEMM N x K at M = 256 ... 8192, the rule's choice beside cuBLASLt, and
# every kind at every width forced (each checked against FP64), so the rule's prices (v24,
# fitted on 2112 x 7168 alone) can be read at other N x K and M.
# Output: $OUT/call2.tar.gz (one log per M).
set -u
source "$(dirname "$0")/lib.sh" && call_setup call2
for m in ${GEMMD_CALL_MS:-256 512 1024 2048 3072 6144 8192}; do
  shapes="${m}x2112x7168,${m}x24576x1536,${m}x32768x512,${m}x7168x16384,${m}x4096x7168,${m}x7168x2048"
  bench_passes "m$m" 1 "${GEMMD_CALL_LIMIT_S:-75}" gemm_bench --shape "$shapes" \
    --kinds rows128,tma_store,rows256,wide --tile-n 64,96,128,192 ${GEMMD_CALL_LIST:+--list}
done
