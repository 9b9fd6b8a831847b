#!/usr/bin/env bash
# Session 11's third device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on a
# bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_probe3_joint //kernels:gemm_bench_probe4_joint \
#     //kernels:gemm_bench_probe5_joint
# Where v17's M >= 4096 time goes: v17 beside the joint-kernel probes (every kind built, as
# gemmd's; ROWS256 runs in the joint kernel): 3 no loads, 4 no loads and no promotion,
# 5 no output stores. Their results are wrong by design (no tests). Output:
# $OUT/kernel_ab.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_ONLY='dense 4096x,dense 8192x,stacked' GEMMD_AB_DEADLINE_S=300 \
  tools/bench/kernel_ab.sh gemm_bench_probe3_joint gemm_bench_probe4_joint gemm_bench_probe5_joint
