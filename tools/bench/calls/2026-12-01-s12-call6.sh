#!/usr/bin/env bash
# Session 12's sixth device call (docs/bench/kernels.md, 2026-12-01), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_probe1_joint
# v19 against probe1_joint, now paired as v19 (B loaded only in a tile's first K block, in
# both CTAs of a pair: a third fewer bytes into each SM on top of the pairing; results wrong
# by design), on the M >= 4096 cases, both orders: does what each SM receives still cost,
# now that L2 reads a quarter fewer bytes? (Call 1 ran it unpaired against v17.)
# Output: $OUT/kernel_ab.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=230 GEMMD_AB_ONLY='dense 4096x,dense 8192x,stacked' \
  tools/bench/kernel_ab.sh gemm_bench_probe1_joint
