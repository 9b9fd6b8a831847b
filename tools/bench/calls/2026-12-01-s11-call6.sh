#!/usr/bin/env bash
# Session 11's sixth device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on a
# bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_stagger //kernels:gpu_gemm_stagger_test
# v17 against `stagger` (the odd CTAs of a 256-row batch start their first loads up to 4 us
# later, so the epilogues of the two halves of the grid alternate instead of coinciding):
# every gpu_gemm test, then four ROWS256 cases on each build (kernel_ab.sh), then the same
# again, the candidate first. Output: $OUT/kernel_ab.tar.gz and $OUT/call6.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
only='dense 4096x32768x512,dense 4096x24576x1536,dense 4096x7168x2048,dense 4096x7168x16384'
GEMMD_AB_ONLY="$only" GEMMD_AB_DEADLINE_S=150 tools/bench/kernel_ab.sh gemm_bench_stagger
source tools/bench/calls/lib.sh && call_setup call6
for b in gemm_bench_stagger gemm_bench; do
  timeout 40 .gpu/bin/$b --kernel wgmma --reps 10 --only "$only" >"$o/again-$b.log" 2>&1
  echo "## again $b rc=$?"
  pack
done
for b in gemm_bench_stagger gemm_bench; do grep -v "^#" "$o/again-$b.log" | cut -c1-60,120-300; done
