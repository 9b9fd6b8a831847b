#!/usr/bin/env bash
# Session 19's third device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_probe3_joint //kernels:gemm_bench_probe4_joint \
#     //kernels:gemm_bench_colsplit_probe3 //kernels:gemm_bench_colsplit_probe4
# with docs/bench/raw/2026-12-02-s19-colsplit.patch applied to 8e79523 and its KERNEL_EXPERIMENTS
# entry replaced by
#   "colsplit_probe3": ["-DGEMMD_WGMMA_PROBE=3", "-DGEMMD_WGMMA_KINDS=15", "-DGEMMD_WGMMA_COLSPLIT=1"],
#   "colsplit_probe4": ["-DGEMMD_WGMMA_PROBE=4", "-DGEMMD_WGMMA_KINDS=15", "-DGEMMD_WGMMA_COLSPLIT=1"],
# Why colsplit (call 2) lost 14-16% at long K: probes 3 (nothing loaded after the ring's
# first pass, promotions kept) and 4 (no loads, no promotions), each with 128-column
# groups (as gemmd) and with colsplit's 64-column ones, on the long-K M >= 4096 cases, two
# passes in alternating order. If 64-column groups cost only with the loads (shared-memory
# bandwidth: their operand reads plus the TMA writes), colsplit_probe3 <= probe3; if the
# groups themselves cost, colsplit_probe3 > probe3 by about as much as call 2.
# (colsplit_probe4 is bundled but not run: ptxas serialized its WGMMAs, C7511, "insufficient
# register resources"; probe 4 runs for the WGMMA chain's rate.)
# Output: $OUT/call3.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call3
only="dense 4096x7168x16384,dense 4096x4096x7168,dense 8192x8192x8192,stacked 4x8192 4096x7168"
for pass in 1 2; do
  order="gemm_bench_probe3_joint gemm_bench_colsplit_probe3 gemm_bench_probe4_joint"
  [ "$pass" = 2 ] && order="gemm_bench_probe4_joint gemm_bench_colsplit_probe3 gemm_bench_probe3_joint"
  for b in $order; do
    bench_passes "$b-p$pass" 1 90 "$b" --only "$only"
  done
done
