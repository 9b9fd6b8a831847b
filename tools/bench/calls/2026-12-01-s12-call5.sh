#!/usr/bin/env bash
# Session 12's fifth device call (docs/bench/kernels.md, 2026-12-01), on call 4's bundle
# (gemmd's build, v19): ncu on 4096x7168x16384, the paired ROWS256 kernel, with session 10
# call 6's metrics (SM clock, L2 bytes, shared-memory banks, tensor pipe, stalls) plus the
# launch statistics (grid and cluster size: how many 2-CTA clusters fit at once).
# Output: $OUT/call5.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call5
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
metrics="sm__cycles_elapsed.avg.per_second,gpu__time_duration.sum"
metrics+=",sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"
metrics+=",l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed"
metrics+=",l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed"
metrics+=",l1tex__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum.per_second"
metrics+=",smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active"
metrics+=",regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
timeout -s KILL 200 "$ncu" --clock-control none --kernel-name regex:wgmma --launch-skip 1 --launch-count 1 \
  --metrics "$metrics" --section SpeedOfLight --section LaunchStats --section MemoryWorkloadAnalysis \
  --section MemoryWorkloadAnalysis_Tables \
  .gpu/bin/gemm_bench --kernel wgmma --only "dense 4096x7168x16384" --reps 2 >"$o/ncu-4096x7168x16384.log" 2>&1
echo "## ncu rc=$?"
grep -E "^    [a-zA-Z]|Shared" "$o/ncu-4096x7168x16384.log" | awk '!/stalled/ || $NF + 0 > 0.05' | head -90
pack
