#!/usr/bin/env bash
# Session 11's fifth device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on a
# bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_storewarps //kernels:gpu_gemm_storewarps_test
# v17 against `storewarps` (256-row tiles: the consumers only stage the tile in shared
# memory, the producer warpgroup's idle warps 2 and 3 copy it out to D, so the consumers go
# on while the stores drain; tma256, which hands the copy to the TMA unit, did not gain):
#   1. every gpu_gemm test, then the M >= 4096 cases on each build (kernel_ab.sh);
#   2. the same cases again, the candidate first.
# Output: $OUT/kernel_ab.tar.gz and $OUT/call5.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
only='dense 4096x,dense 8192x,stacked'
GEMMD_AB_ONLY="$only" GEMMD_AB_DEADLINE_S=240 tools/bench/kernel_ab.sh gemm_bench_storewarps
source tools/bench/calls/lib.sh && call_setup call5
for b in gemm_bench_storewarps gemm_bench; do
  timeout 80 .gpu/bin/$b --kernel wgmma --reps 10 --only "$only" >"$o/again-$b.log" 2>&1
  echo "## again $b rc=$?"
  pack
done
for b in gemm_bench_storewarps gemm_bench; do grep -v "^#" "$o/again-$b.log" | cut -c1-60,120-300; done
