#!/usr/bin/env bash
# Session 9's seventh device call (docs/bench/kernels.md, 2026-12-01), kept as it ran, on a
# bundle made with
#   deploy/gpu_bundle.sh //kernels:gemm_bench_tmapahead //kernels:gpu_gemm_tmapahead_test
# v14 against `tmapahead` (the TMA thread acquires and prefetches the next unit's tensor
# maps while the current unit's first stage loads, where every group has as many tiles):
# both builds' gpu_gemm tests, then the decode, M = 128 and M >= 4096 cases on each.
# Output: $OUT/kernel_ab.tar.gz.
set -u
cd "$(dirname "$0")/../../.."
export GEMMD_AB_ONLY='decode,dense 128x,dense 4096x,8192x8192,stacked' GEMMD_AB_DEADLINE_S=230
tools/bench/kernel_ab.sh gemm_bench_tmapahead
