#!/usr/bin/env bash
# Session 8's fifth device call (docs/bench/kernels.md, 2026-12-01), kept as it ran: is
# ROWS256 compiled into one kernel with the other kinds (session 5's kinds3 build, commit
# 2b29e24, carried as .gpu_k3/gemm_bench_kinds3) still faster than ROWS256 as its own kernel
# (gemmd's build) when both run in one call? Both time every kind on the M ≥ 4096 cases.
# Built beforehand here:
#   git worktree add --detach /tmp/wt3 2b29e24 && (cd /tmp/wt3 && bazel build -c opt //kernels:gemm_bench_kinds3)
#   mkdir -p .gpu_k3 && cp /tmp/wt3/bazel-bin/kernels/gemm_bench_kinds3 .gpu_k3/
set -u
cd "$(dirname "$0")/../../.."
source .gpu/gpu_env.sh
final="${OUT:-/tmp}"
only='dense 4096x,8192x8192,stacked'
for b in .gpu/bin/gemm_bench .gpu_k3/gemm_bench_kinds3; do
  timeout 200 "$b" --kernel wgmma --reps 10 --kinds rows128,rows256 --only "$only" >"$final/$(basename "$b").log" 2>&1
  echo "## $b rc=$?"
  python3 tools/bench/kernel_summary.py "$final/$(basename "$b").log" 2>&1 | head -n 2
done
