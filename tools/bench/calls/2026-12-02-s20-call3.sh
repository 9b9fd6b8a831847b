#!/usr/bin/env bash
# Session 20's third device call (docs/bench/kernels.md, 2026-12-02), on a bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_stamps
# with "stamps": ["-DGEMMD_WGMMA_STAMPS=1"] in kernels/BUILD's KERNEL_EXPERIMENTS, and
# grpcio, grpcio-tools and protobuf wheels for Python 3.12 in .whl/ (both carried):
#   python3 -m pip download grpcio grpcio-tools protobuf --python-version 3.12 \
#     --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --only-binary=:all: --no-deps -d .whl
# v26 (the maps' acquire fence at .sys scope): the GPU tests, the session's reference run
# of every case with --sol, the stamps build on the small-M and decode cases (new point
# `prefetched`: the TMA thread past a one-group batch's map prefetches), then the
# integration suites against --backend cuda (gpu_suite.sh) in the time left.
# Output: $OUT/s20-call3.tar.gz.
set -u
source "$(dirname "$0")/lib.sh" && call_setup s20-call3
OUT="$o" GEMMD_TEST_TIMEOUT=150 .gpu/gpu_run.sh 2>&1 | tail -n 12
pack
bench_passes v26-all-sol 1 200 gemm_bench --sol
bench_passes stamps 1 90 gemm_bench_stamps --stamps --only "dense 1x,dense 64x,dense 128x,decode"
OUT="$o" GEMMD_SUITES="cuda_test grpc_api_test shm_test" timeout -s KILL 200 bash deploy/gpu_suite.sh suites 2>&1 | tail -n 20
pack
