#!/usr/bin/env bash
# Session 13's second device call (docs/bench/kernels.md, 2026-12-01), on call 1's bundle:
# ncu per SASS instruction (SourceCounters: warp-stall samples and the shared-memory
# wavefronts by instruction; InstructionStats; WarpStateStats; MemoryWorkloadAnalysis) on
#   4096x7168x16384 (long K: where do the LSU's shared wavefronts, 78% of peak in session 12
#     call 5, come from; do the consumers wait on the full barrier),
#   4096x32768x512 (short K: the epilogue, a third of the time; DRAM write throughput),
# for v19 (gemm_bench) and, if the bundle has it, the `suspend` candidate. Each profile is
# kept as an ncu report plus its per-instruction source page as CSV.
# Output: $OUT/call2.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call2
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
echo "## ncu: $ncu"
profile() {  # profile BUILD CASE TAG
  local b="$1" case="$2" tag="$3"
  [ -x ".gpu/bin/$b" ] || { echo "## $b: not in the bundle"; return; }
  timeout -s KILL 150 "$ncu" --clock-control none --kernel-name regex:wgmma --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section InstructionStats --section SourceCounters --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section LaunchStats --import-source no -f -o "$o/$b-$tag" \
    ".gpu/bin/$b" --kernel wgmma --only "$case" --reps 2 >"$o/$b-$tag.log" 2>&1
  echo "## $b $tag: ncu rc=$?"
  "$ncu" --import "$o/$b-$tag.ncu-rep" --print-details all >"$o/$b-$tag-details.txt" 2>&1
  "$ncu" --import "$o/$b-$tag.ncu-rep" --page source --print-source sass --csv >"$o/$b-$tag-sass.csv" 2>&1
  echo "## $b $tag: source page $(wc -l <"$o/$b-$tag-sass.csv") lines"
  grep -E "Duration|SM Frequency|DRAM Throughput|Memory Throughput|Stall|Warp Cycles|Executed Ipc|Shared" \
    "$o/$b-$tag-details.txt" | head -30
  pack
}
for b in gemm_bench gemm_bench_suspend; do
  profile "$b" "dense 4096x7168x16384" longk
  profile "$b" "dense 4096x32768x512" shortk
done
pack
