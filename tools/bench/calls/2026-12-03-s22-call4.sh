#!/usr/bin/env bash
# Session 22's fourth device call (docs/bench/kernels.md, 2026-12-03), on a bundle made with
#   deploy/gpu_bundle.sh
# (v27, gemmd's build).
#   1. The rule's small-M choices against every 128-row kind, width and K split on M in
#      {64, 128} (the issue's six N x K): is any configuration faster than the rule's since
#      sessions 8-9 last swept them (v14; the kernels have changed since: scale chunks,
#      early, prologue)?
#   2. ncu on four M = 64/128 cases (the rule's own configuration): is the L2 -> SM traffic
#      (A's rows read again by every column tile: 4-8x B's bytes at M = 128 with 32-64
#      columns) near L2's bandwidth while the weights stream?
#   3. The sweep's second pass.
# Output: $OUT/s22-call4.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup s22-call4
sweep=(--only "dense 64x,dense 128x" --tile-n 16,32,64,96,128,192 --kinds rows128,tma_store,wide --splits 1,2,4,8)
bench_passes smallm-sweep 1 150 gemm_bench "${sweep[@]}"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
metrics="gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
metrics+=",lts__t_bytes.sum,lts__t_bytes.sum.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed"
metrics+=",lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed"
metrics+=",l1tex__m_xbar2l1tex_read_bytes.sum,l1tex__m_xbar2l1tex_read_bytes.sum.per_second"
for c in "dense 128x2112x7168" "dense 128x7168x16384" "dense 64x2112x7168" "dense 128x32768x512"; do
  f="$o/ncu-${c#dense }.log"
  timeout -s KILL 60 "$ncu" --clock-control none --kernel-name regex:wgmma_gemm --launch-skip 1 --launch-count 1 \
    --metrics "$metrics" .gpu/bin/gemm_bench --kernel wgmma --only "$c" --reps 2 >"$f" 2>&1
  echo "## ncu $c: rc=$?"
  grep -E "^    [a-z]" "$f" | head -20
  pack
done
bench_passes smallm-sweep2 1 150 gemm_bench "${sweep[@]}"
