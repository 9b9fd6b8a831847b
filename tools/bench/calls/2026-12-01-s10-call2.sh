#!/usr/bin/env bash
# Session 10's second device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on
# call 1's bundle (v14's gemm_bench). What limits small M: dense shapes of the same 117 MB
# of weight with K from 16384 down to 2048 (row stride of B) at M = 1 and 64, every width;
# then ncu's memory view of v14 on 1x7168x16384 (width 64, 112 tiles) and on the decode
# batch 64x8 (4.1 TB/s). Output: $OUT/call2.tar.gz.
source "$(dirname "$0")/lib.sh" && call_setup call2
shapes=1x7168x16384,1x14336x8192,1x28672x4096,1x57344x2048,64x7168x16384,64x28672x4096
timeout -s KILL 200 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --shape "$shapes" --tile-n 32,64,128 \
  >"$o/strides.log" 2>&1
grep -v '^#' "$o/strides.log" | cut -c1-60,120-
pack
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
metrics="sm__cycles_elapsed.avg.per_second,gpu__time_duration.sum,dram__bytes_read.sum.per_second"
metrics+=",dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct"
metrics+=",lts__t_bytes.sum.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed"
metrics+=",regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
for sel in "--shape 1x7168x16384" "--only decode_64x8"; do
  args=($sel)
  [ "${args[0]}" = --only ] && args=(--only "decode 64x8")
  echo "## ncu ($ncu, --clock-control none): ${args[*]}"
  timeout -s KILL 150 "$ncu" --clock-control none --kernel-name regex:wgmma --launch-skip 1 --launch-count 1 \
    --metrics "$metrics" --section SpeedOfLight --section MemoryWorkloadAnalysis \
    .gpu/bin/gemm_bench --kernel wgmma "${args[@]}" --reps 2 >"$o/ncu-${args[1]// /_}.log" 2>&1
  grep -E "^    [a-zA-Z]" "$o/ncu-${args[1]// /_}.log" | awk '!/stalled/ || $NF + 0 > 0.05'
  pack
done
