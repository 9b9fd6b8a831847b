#!/usr/bin/env bash
# Session 23's first device call (docs/bench/kernels.md, 2026-12-03), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:mainloop_probe
# 1. The main-loop probe (kernels/sm90_mainloop_probe.cu): is long-K M=4096 bound by
#    shared-memory bandwidth? rows_ss (ROWS256's data flow: A and B both from shared memory,
#    96 KB of WGMMA reads per K block) against cols_rs (A once into registers by ldmatrix,
#    80 KB), cols_ss and n256_ss, with and without loads, after an FP64 check of the sums;
#    at 4096x7168x16384 and 4096x2112x7168.
# 2. gemm_bench on the same two shapes, for the production kernel and cuBLASLt side by side.
# Output: $OUT/s23-call1.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup s23-call1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >"$o/smi.log" 2>&1
timeout -s KILL 120 .gpu/bin/mainloop_probe --check >"$o/probe-7168x16384.log" 2>&1
echo "## probe 4096x7168x16384: rc=$?"; cat "$o/probe-7168x16384.log"; pack
timeout -s KILL 90 .gpu/bin/mainloop_probe --n 2304 --k 7168 >"$o/probe-2304x7168.log" 2>&1
echo "## probe 4096x2304x7168: rc=$?"; cat "$o/probe-2304x7168.log"; pack
timeout -s KILL 90 .gpu/bin/mainloop_probe --m 8192 --n 8192 --k 8192 >"$o/probe-8192.log" 2>&1
echo "## probe 8192^3: rc=$?"; cat "$o/probe-8192.log"; pack
bench_passes ref 1 120 gemm_bench --only "dense 4096x7168x16384,dense 4096x2112x7168,dense 8192x8192x8192"
