#!/usr/bin/env bash
# Session 23's second device call (docs/bench/kernels.md, 2026-12-03), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:mainloop_probe
# Call 1 found the forms' shared-memory bytes cost nothing and the promotion ~13% of the
# tensor peak. Here: rows_ss's promotion cut to 0/16/32 of its 64 FFMAs per half, as 64
# FADDs, and with the warpgroups' WGMMA groups in strict turns (passed on when a group is
# done, or when it is issued), after --check (FP64) of every config that gives the sums;
# long K (4096x7168x16384), 8192^3 and 4096x2304x7168.
# Output: $OUT/s23-call2.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup s23-call2
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv >"$o/smi.log" 2>&1
cat "$o/smi.log"
timeout -s KILL 120 .gpu/bin/mainloop_probe --check >"$o/probe-7168x16384.log" 2>&1
echo "## probe 4096x7168x16384: rc=$?"; cat "$o/probe-7168x16384.log"; pack
timeout -s KILL 90 .gpu/bin/mainloop_probe --m 8192 --n 8192 --k 8192 >"$o/probe-8192.log" 2>&1
echo "## probe 8192^3: rc=$?"; cat "$o/probe-8192.log"; pack
timeout -s KILL 90 .gpu/bin/mainloop_probe --n 2304 --k 7168 >"$o/probe-2304x7168.log" 2>&1
echo "## probe 4096x2304x7168: rc=$?"; cat "$o/probe-2304x7168.log"; pack
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv >>"$o/smi.log" 2>&1
tail -1 "$o/smi.log"; pack
