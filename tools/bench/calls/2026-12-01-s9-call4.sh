#!/usr/bin/env bash
# Session 9's fourth device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on a
# bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_probe3_joint //kernels:gemm_bench_probe4_joint
#   1. the M >= 4096 cases with ROWS128 and ROWS256 each at widths 64 and 128 (how the
#      kind and width go with wave quantization: 4096x2112x7168 has 4.12 waves of 128x128
#      tiles, 2.06 of 256x128, 4.00 of 256x64);
#   2. the ROWS256 probes on the joint kernel (no loads; no loads and no promotion) beside
#      gemmd's build, on 4096x7168x16384.
# Output: $OUT/call4.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call4  # its prologue, as it ran, now in lib.sh
timeout 280 .gpu/bin/gemm_bench --kernel wgmma --reps 10 --kinds rows128,rows256 --tile-n 64,128 \
  --only 'dense 4096x,8192x8192,stacked' >"$o/kinds.log" 2>&1
echo "## kinds rc=$?"
pack
for b in gemm_bench gemm_bench_probe3_joint gemm_bench_probe4_joint; do
  timeout 60 .gpu/bin/$b --kernel wgmma --reps 10 --only 'dense 4096x7168x16384' >"$o/$b.log" 2>&1
  echo "## $b rc=$?"
done
pack
grep -v "^#" "$o/kinds.log" | cut -c1-50,120-400
for b in gemm_bench gemm_bench_probe3_joint gemm_bench_probe4_joint; do grep "^dense" "$o/$b.log" | cut -c1-70 | sed "s/^/$b: /"; done
