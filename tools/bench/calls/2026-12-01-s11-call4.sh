#!/usr/bin/env bash
# Session 11's fourth device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on a
# bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_tma256 //kernels:gpu_gemm_tma256_test
# v17 against `tma256` (256-row tiles leave by TMA tensor stores, so the warpgroups start
# their next tile while the last one is written out; call 3's probe 5 put the epilogue at
# 12-36% of the K <= 2048 cases):
#   1. every gpu_gemm test, then the M >= 4096 cases on each build (kernel_ab.sh);
#   2. the same cases again, the candidate first;
#   3. cuda_test, grpc_api_test, shm_test on v17 (the engine with v17's kernels).
# Output: $OUT/kernel_ab.tar.gz and $OUT/call4.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
only='dense 4096x,dense 8192x,stacked'
GEMMD_AB_ONLY="$only" GEMMD_AB_DEADLINE_S=300 tools/bench/kernel_ab.sh gemm_bench_tma256
source tools/bench/calls/lib.sh && call_setup call4
for b in gemm_bench_tma256 gemm_bench; do
  timeout 100 .gpu/bin/$b --kernel wgmma --reps 10 --only "$only" >"$o/again-$b.log" 2>&1
  echo "## again $b rc=$?"
  pack
done
for b in gemm_bench_tma256 gemm_bench; do grep -v "^#" "$o/again-$b.log" | cut -c1-60,120-300; done
OUT="$o" GEMMD_SUITES="cuda_test grpc_api_test shm_test" timeout 150 deploy/gpu_suite.sh suites 2>&1 | tail -n 8
pack
