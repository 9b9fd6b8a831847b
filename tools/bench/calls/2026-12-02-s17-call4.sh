#!/usr/bin/env bash
# Session 17's fourth device call (docs/bench/kernels.md, 2026-12-02), on call 3's bundle
# (deploy/gpu_bundle.sh: gemmd's build, v25).
# Call 2's per-M limit cut its last shapes: 4096x7168 and 7168x2048 at M >= 2048 (2048x7168x2048
# too). Here they are, the rule's choice beside cuBLASLt and every kind and width forced.
# Output: $OUT/call4.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call4
bench_passes cut 1 "${GEMMD_CALL_LIMIT_S:-150}" gemm_bench \
  --shape 2048x7168x2048,3072x4096x7168,3072x7168x2048,6144x4096x7168,6144x7168x2048,8192x4096x7168,8192x7168x2048 \
  --kinds rows128,tma_store,rows256,wide --tile-n 64,96,128,192
