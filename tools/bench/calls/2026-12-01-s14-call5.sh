#!/usr/bin/env bash
# Session 14's fifth device call (docs/bench/kernels.md, 2026-12-01), on a bundle made with
#   deploy/gpu_bundle.sh
# gemmd's build is v21 here: call 4's `early` (its kernel SASS byte for byte: the same QGMMA
# runs as v20, the prologue and the TMA thread's first steps changed). Every GPU test
# (gpu_gemm_test, gpu_quantize_test, ...) and the engine suites cuda_test, grpc_api_test,
# shm_test against --backend cuda (deploy/gpu_suite.sh), within the session's last device
# minutes. Output: $OUT/call5.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup call5
OUT="$o" timeout -s KILL 185 deploy/gpu_suite.sh tests suites 2>&1 | tail -n 20
pack
