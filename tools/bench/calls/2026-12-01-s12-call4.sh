#!/usr/bin/env bash
# Session 12's fourth device call (docs/bench/kernels.md, 2026-12-01), on gemmd's bundle
# (deploy/gpu_bundle.sh): v19 (copyout, paired ROWS256 tiles) as gemmd builds it:
#   1. gpu_gemm_test, then every case of issue 6, then every case again (kernel_ab.sh);
#   2. every GPU test binary and the engine suites cuda_test, grpc_api_test, shm_test
#      against --backend cuda (deploy/gpu_suite.sh).
# Output: $OUT/kernel_ab.tar.gz and $OUT/call4.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
GEMMD_AB_AGAIN=1 GEMMD_AB_DEADLINE_S=300 tools/bench/kernel_ab.sh
source tools/bench/calls/lib.sh && call_setup call4
OUT="$o" timeout 240 deploy/gpu_suite.sh tests suites 2>&1 | tail -n 20
pack
