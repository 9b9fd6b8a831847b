#!/usr/bin/env bash
# Session 24's third device call (docs/bench/kernels.md, 2026-12-04), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:mainloop_probe
# Call 2's nvidia-smi trace averaged ~1 ms kernels with the idle gaps between them (power
# 120-200 W) and flagged the software power cap only now and then. Here the long-K loop runs
# for seconds on end (3000 launches back to back per config) while nvidia-smi samples every
# 50 ms: the power drawn and the clock-event reasons under a sustained tensor load, beside the
# SM clock the probe measures itself (clock64 over %globaltimer), promoted and not.
# Output: $OUT/s24-call3.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup s24-call3
fields="timestamp,clocks.sm,clocks.max.sm,power.draw,power.draw.instant,power.limit,temperature.gpu,clocks_event_reasons.active,clocks_event_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown,clocks_event_reasons.sw_thermal_slowdown"
nvidia-smi --query-gpu="$fields" --format=csv >"$o/smi-once.log" 2>&1 ||
  fields="timestamp,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active,clocks_event_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown,clocks_event_reasons.sw_thermal_slowdown"
cat "$o/smi-once.log"
nvidia-smi --query-gpu="$fields" --format=csv -lms 50 >"$o/smi-trace.csv" 2>&1 &
smi_pid=$!
sleep 1
for cfg in rows_ss/ffma64/free rows_ss/none/free; do
  echo "$cfg start $(date +%T.%N)" >>"$o/marks.txt"
  timeout -s KILL 100 .gpu/bin/mainloop_probe --reps 3000 --only "$cfg" >"$o/probe-${cfg//\//-}.log" 2>&1
  echo "## probe $cfg x3000: rc=$?"; cat "$o/probe-${cfg//\//-}.log"
  echo "$cfg end $(date +%T.%N)" >>"$o/marks.txt"
  sleep 2
  pack
done
kill $smi_pid
pack
