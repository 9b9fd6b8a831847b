#!/usr/bin/env bash
# Session 24's second device call (docs/bench/kernels.md, 2026-12-04), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:mainloop_probe
# 1. What holds the SM clock at 1.3-1.6 GHz under the long-K loads (max 1.98): nvidia-smi
#    sampled every 100 ms (clock, power, the clock-event reasons) while the probe and then
#    gemmd's kernel and cuBLASLt run 4096x7168x16384 back to back.
# 2. The promotion as FMUL + FADD (probe, rows_ss and rows3_ss) beside FFMA and FADD.
# 3. The last wave of 4096x2112x7168: its columns as 2048 + 64 (what two launches would
#    take) beside 2112 itself, every kind and width.
# Output: $OUT/s24-call2.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup s24-call2
nvidia-smi --help-query-gpu >"$o/smi-fields.txt" 2>&1
fields="timestamp,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active,clocks_event_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown,clocks_event_reasons.sw_thermal_slowdown,clocks_event_reasons.hw_power_brake_slowdown"
nvidia-smi --query-gpu="$fields" --format=csv >"$o/smi-once.log" 2>&1 || fields="timestamp,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active"
cat "$o/smi-once.log"
nvidia-smi --query-gpu="$fields" --format=csv -lms 100 >"$o/smi-trace.csv" 2>&1 &
smi_pid=$!
sleep 1
date +%T.%N >"$o/marks.txt"
timeout -s KILL 150 .gpu/bin/mainloop_probe --check >"$o/probe-4096x7168x16384.log" 2>&1
echo "## probe 4096x7168x16384: rc=$?"; cat "$o/probe-4096x7168x16384.log"; pack
echo "probe done $(date +%T.%N)" >>"$o/marks.txt"
timeout -s KILL 120 .gpu/bin/gemm_bench --kernel wgmma --reps 30 --only "dense 4096x7168x16384" >"$o/bench-long.log" 2>&1
echo "## gemm_bench 4096x7168x16384 x30: rc=$?"; grep -E "^(dense|#)" "$o/bench-long.log"; pack
echo "bench done $(date +%T.%N)" >>"$o/marks.txt"
sleep 1
kill $smi_pid
pack
timeout -s KILL 150 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --shape 4096x2048x7168,4096x64x7168,4096x2112x7168 \
  --tile-n 32,64,96,128 --kinds rows128,rows256,split,wide --splits 1,2,4 >"$o/bench-2112.log" 2>&1
echo "## gemm_bench 2112 = 2048 + 64: rc=$?"; cat "$o/bench-2112.log" | cut -c1-400; pack
