#!/usr/bin/env bash
# Session 24's first device call (docs/bench/kernels.md, 2026-12-04), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:mainloop_probe
# Session 23 found the promotion costs ~12 points of the tensor peak at long K, and more than
# its FFMA count says: it overflows the window the other warpgroup's WGMMA group gives it.
# Here: the probe's new form rows3_ss (three consumer warpgroups of 64 rows, so two groups
# are queued while one warpgroup promotes) beside rows_ss, promoted (FFMA, FADD, 32 of 64
# FFMAs) and not; after --check (FP64, the bound now 2^-11 of sum |a b| per output). Shapes
# whose units divide the 66 clusters for both forms (4608x8448: 9 and 12 rounds), long and
# medium K; then 4096x7168x16384 for rows_ss alone (session 23's yardstick).
# Output: $OUT/s24-call1.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup s24-call1
smi() { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv >>"$o/smi.log" 2>&1; tail -1 "$o/smi.log"; }
smi
timeout -s KILL 150 .gpu/bin/mainloop_probe --check --m 4608 --n 8448 --k 16384 >"$o/probe-4608x8448x16384.log" 2>&1
echo "## probe 4608x8448x16384: rc=$?"; cat "$o/probe-4608x8448x16384.log"; smi; pack
timeout -s KILL 90 .gpu/bin/mainloop_probe --m 4608 --n 8448 --k 4096 >"$o/probe-4608x8448x4096.log" 2>&1
echo "## probe 4608x8448x4096: rc=$?"; cat "$o/probe-4608x8448x4096.log"; smi; pack
timeout -s KILL 90 .gpu/bin/mainloop_probe --m 4608 --n 8448 --k 16384 >"$o/probe-4608x8448x16384-again.log" 2>&1
echo "## probe 4608x8448x16384 again: rc=$?"; cat "$o/probe-4608x8448x16384-again.log"; smi; pack
