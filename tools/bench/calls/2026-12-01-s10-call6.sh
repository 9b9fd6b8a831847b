#!/usr/bin/env bash
# Session 10's sixth device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on
# call 5's bundle (its gemm_bench: v15; the ROWS256 joint kernel's SASS is v14's).
#   1. ncu on 4096x7168x16384 (ROWS256): shared-memory and tensor-pipe utilization, SM
#      clock: is the long-K mainloop bound by shared-memory bandwidth (TMA writes plus
#      WGMMA operand reads)?
#   2. the M = 128 cases with each kind at widths 64 and 128, dirty and clean flush.
# Output: $OUT/call6.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call6
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
metrics="sm__cycles_elapsed.avg.per_second,gpu__time_duration.sum"
metrics+=",sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"
metrics+=",l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed"
metrics+=",l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed"
metrics+=",l1tex__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum.per_second"
metrics+=",smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active"
metrics+=",regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
timeout -s KILL 200 "$ncu" --clock-control none --kernel-name regex:wgmma --launch-skip 1 --launch-count 1 \
  --metrics "$metrics" --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
  .gpu/bin/gemm_bench --kernel wgmma --only "dense 4096x7168x16384" --reps 2 >"$o/ncu-4096x7168x16384.log" 2>&1
echo "## ncu rc=$?"
grep -E "^    [a-zA-Z]|Shared" "$o/ncu-4096x7168x16384.log" | awk '!/stalled/ || $NF + 0 > 0.05' | head -80
pack
for f in dirty clean; do
  timeout -s KILL 150 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --only "dense 128x" --flush $f \
    --kinds rows128,tma_store,split --tile-n 64,128 >"$o/m128-kinds-$f.log" 2>&1
  echo "## m128 $f rc=$?"
  grep -v '^#' "$o/m128-kinds-$f.log" | cut -c1-44,100-400
  pack
done
