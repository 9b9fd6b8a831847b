#!/usr/bin/env bash
# Session 24's fourth device call (docs/bench/kernels.md, 2026-12-04), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:mainloop_probe
# Call 3: under a sustained long-K load the GPU sits at its 700 W cap (software power cap
# active) and the SMs run 1.45 GHz with loads, 1.74 without. Here: how the clock and the
# time follow L2 -> SM bytes (the probe's rows_ss with every load, with B only every other
# K block, with none; passes in the order 1, 2, 0, 1 to see drift), 2000 launches back to
# back each; then gemmd's kernel and cuBLASLt on 4096x7168x16384 with 1000 reps each (the
# flushes between them leave the GPU busy ~90% of the time). nvidia-smi every 50 ms.
# Output: $OUT/s24-call4.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup s24-call4
fields="timestamp,clocks.sm,clocks.max.sm,power.draw,power.draw.instant,power.limit,temperature.gpu,clocks_event_reasons.active,clocks_event_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown,clocks_event_reasons.sw_thermal_slowdown"
nvidia-smi --query-gpu="$fields" --format=csv -lms 50 >"$o/smi-trace.csv" 2>&1 &
smi_pid=$!
sleep 1
echo "probe start $(date +%T.%N)" >>"$o/marks.txt"
timeout -s KILL 120 .gpu/bin/mainloop_probe --reps 2000 --only rows_ss/ffma64/free --loads 1,2,0,1 >"$o/probe-loads.log" 2>&1
echo "## probe rows_ss/ffma64 loads 1,2,0,1 x2000: rc=$?"; cat "$o/probe-loads.log"; pack
echo "probe end $(date +%T.%N)" >>"$o/marks.txt"
sleep 2
echo "bench start $(date +%T.%N)" >>"$o/marks.txt"
timeout -s KILL 150 .gpu/bin/gemm_bench --kernel wgmma --reps 1000 --only "dense 4096x7168x16384" >"$o/bench-long-1000.log" 2>&1
echo "## gemm_bench 4096x7168x16384 x1000: rc=$?"; grep -E "^(dense|#)" "$o/bench-long-1000.log"; pack
echo "bench end $(date +%T.%N)" >>"$o/marks.txt"
sleep 1
kill $smi_pid
pack
