#!/usr/bin/env bash
# Session 21's fourth device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh
# and grpcio, grpcio-tools and protobuf wheels for Python 3.12 in .whl/ (both carried):
#   python3 -m pip download grpcio grpcio-tools protobuf --python-version 3.12 \
#     --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --only-binary=:all: --no-deps -d .whl
# v27 (prologue: the header's read under the CTA's setup, the first group's maps prefetched
# into L2 at entry): the GPU tests, the integration suites against --backend cuda
# (gpu_suite.sh), then the reference run of every case with --sol in the time left (its
# one-kind kernels are the prologue candidate's SASS measured in calls 1-3, the joint
# kernel v26's: sass_diff.py).
# Output: $OUT/s21-call4.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup s21-call4
OUT="$o" GEMMD_TEST_TIMEOUT=100 .gpu/gpu_run.sh 2>&1 | tail -n 12
pack
OUT="$o" GEMMD_SUITES="cuda_test grpc_api_test shm_test" timeout -s KILL 170 bash deploy/gpu_suite.sh suites 2>&1 | tail -n 20
pack
bench_passes v27-all-sol 1 200 gemm_bench --sol
