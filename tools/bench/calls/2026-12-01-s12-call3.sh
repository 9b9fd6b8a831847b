#!/usr/bin/env bash
# Session 12's third device call (docs/bench/kernels.md, 2026-12-01), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_mcast //kernels:gpu_gemm_mcast_test
# As call 2, with the peer arrive made without .release.cluster (that compiled to
# MEMBAR.ALL.GPU before every remote arrive: call 2 ran 1.30-1.43x the time). v18 against
# `mcast`: ROWS256 tiles in 2-CTA clusters, the two CTAs on adjacent column tiles of the
# same 256 rows, each loading half of A's rows multicast into both (call 1's probe1_joint, a
# third fewer L2 -> SM bytes, ran 5-10% faster at M >= 4096).
# Every gpu_gemm test, then the M >= 4096 cases on each build, then again in the other order.
# Output: $OUT/kernel_ab.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=480 GEMMD_AB_ONLY='dense 4096x,dense 8192x,stacked' \
  tools/bench/kernel_ab.sh gemm_bench_mcast
