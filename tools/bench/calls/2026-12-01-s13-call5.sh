#!/usr/bin/env bash
# Session 13's fifth device call (docs/bench/kernels.md, 2026-12-01), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_v19 //kernels:gemm_bench_chunkall
# (The v19 and chunkall builds are gone from kernels/BUILD since; its comment says how to
# add v19 back.)
# gemmd's build is v20 here: scales in chunks (call 3's `scalechunk`, each unit's chunks
# copied as it begins) only where K >= 4096 (32 K blocks); shorter K keeps v19's per-block
# copies (chunks were 1-3% slower there in calls 3 and 4).
#   1. every gpu_gemm test;
#   2. v20 against v19 on the M >= 4096 cases, both orders;
#   3. every GPU test binary and the engine suites cuda_test, grpc_api_test, shm_test
#      against --backend cuda (deploy/gpu_suite.sh);
#   4. v20 on every case of issue 6, if time is left.
# Output: $OUT/kernel_ab.tar.gz, $OUT/call5.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
t0=$(date +%s)
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=200 GEMMD_AB_ONLY='dense 4096x,dense 8192x,stacked' \
  tools/bench/kernel_ab.sh gemm_bench_v19
source tools/bench/calls/lib.sh && call_setup call5
OUT="$o" timeout 200 deploy/gpu_suite.sh tests suites 2>&1 | tail -n 20
pack
if [ $(($(date +%s) - t0)) -lt 280 ]; then
  timeout -s KILL 100 .gpu/bin/gemm_bench --kernel wgmma --reps 10 >"$o/gemm_bench-all.log" 2>&1
  echo "## gemm_bench (every case): rc=$?"
  python3 tools/bench/kernel_summary.py "$o/gemm_bench-all.log"
fi
pack
