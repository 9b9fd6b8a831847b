#!/usr/bin/env bash
# Session 13's third device call (docs/bench/kernels.md, 2026-12-01), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_scalechunk //kernels:gpu_gemm_scalechunk_test \
#     //kernels:gemm_bench_probe7_joint [//kernels:gemm_bench_wgskew //kernels:gpu_gemm_wgskew_test]
# (As it ran: the macros were GEMMD_WGMMA_SCALE_CHUNKS and GEMMD_WGMMA_WG_SKEW, the builds
# KERNEL_EXPERIMENTS / KERNEL_VARIANTS entries; wgskew's code is now
# docs/bench/raw/2026-12-01-s13-wgskew.patch, scalechunk is v20 with K >= 4096 only.)
# Call 2's source counters put a quarter of the LSU's shared wavefronts at
# 4096x7168x16384 on the scale warp's 4-byte cp.asyncs (one per row and K block). v19
# against:
#   probe7_joint: A's scales copied only in a tile's first K block (results wrong by design):
#     what those copies cost;
#   scalechunk: the scale warp copies four K blocks of scales at a time, 16 bytes per row,
#     and fills the stages from shared memory;
#   wgskew (if built): 256-row tiles' second consumer warpgroup starts its first tile late,
#     so the two warpgroups' epilogues need not fall together (short K: call 2 has the
#     epilogue at a third of the consumers' samples while the tensor pipe idles).
# Every gpu_gemm test, then the M >= 4096 cases on each build, then again in the other order.
# Output: $OUT/kernel_ab.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
# (kernel_ab.sh skips a build the bundle lacks.)
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=500 GEMMD_AB_ONLY='dense 4096x,dense 8192x,stacked' \
  tools/bench/kernel_ab.sh gemm_bench_scalechunk gemm_bench_probe7_joint gemm_bench_wgskew
