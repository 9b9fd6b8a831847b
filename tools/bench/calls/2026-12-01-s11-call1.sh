#!/usr/bin/env bash
# Session 11's first device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on a
# bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_udesc //kernels:gpu_gemm_udesc_test
# v16 against `udesc` (WGMMA descriptors from a stage's address field plus constants, the
# consumer warpgroup's index warp-uniform: ptxas keeps them in uniform registers; the
# joint kernel 53.9K -> 51.6K instructions, R2UR 716 -> 291):
#   1. every gpu_gemm test, then every case of issue 6 on each build (kernel_ab.sh);
#   2. a few cases again, the candidate first (run order moves small cases a few percent).
# Output: $OUT/kernel_ab.tar.gz and $OUT/call1.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_DEADLINE_S=420 tools/bench/kernel_ab.sh gemm_bench_udesc
source tools/bench/calls/lib.sh && call_setup call1
only='dense 4096x7168x16384,dense 4096x2112x7168,dense 4096x32768x512,dense 128x,decode'
for b in gemm_bench_udesc gemm_bench; do
  timeout 100 .gpu/bin/$b --kernel wgmma --reps 10 --only "$only" >"$o/again-$b.log" 2>&1
  echo "## again $b rc=$?"
  pack
done
for b in gemm_bench_udesc gemm_bench; do grep -v "^#" "$o/again-$b.log" | cut -c1-60,120-300; done
