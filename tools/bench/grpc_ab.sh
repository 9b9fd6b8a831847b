#!/usr/bin/env bash
# One A/B arm for issue 3's gRPC latency (CPU backend, loopback): starts an optimized gemmd
# with the given flags and environment, then prints one line: gemmctl ping p50, and a tiny
# GEMM (M=1, N=K=128) at concurrency 1 (p50, p99, req/s) and 32 (p50, req/s).
#   tools/bench/grpc_ab.sh LABEL 'SERVER_ENV' 'CLIENT_ENV' [gemmd flags...]
# e.g. tools/bench/grpc_ab.sh spin0 X=1 X=1 --loop-spin-us 0
#      tools/bench/grpc_ab.sh epoll1 X=1 GRPC_POLL_STRATEGY=epoll1 --grpc-poller epoll1
# Run arms interleaved, several times: this machine is noisy (docs/bench/grpc_cpu.md).
# GEMMD_AB_BIN=path runs that gemmd binary instead of the tree's (an A/B of two builds).
set -u
cd "$(dirname "$0")/../.."
bazel build -c opt //daemon:gemmd //client:gemmctl >/dev/null 2>&1 || exit 1
bin=bazel-bin
log=$(mktemp /tmp/gemmd-ab.XXXXXX)
env $2 "${GEMMD_AB_BIN:-$bin/daemon/gemmd}" --grpc-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 "${@:4}" >"$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 100); do grep -q 'msg="listening"' "$log" && break; sleep 0.1; done
addr="127.0.0.1:$(grep -o 'grpc_port=[0-9]*' "$log" | cut -d= -f2)"
p=$(env $3 "$bin/client/gemmctl/gemmctl" --addr "$addr" ping --count 3000 2>&1 | grep -o 'p50 [0-9.]* us')
b=$(env $3 "$bin/client/gemmctl/gemmctl" --addr "$addr" bench --concurrency 1 --shape 1x128x128 --duration 4 \
  --warmup 1 --quiet 2>&1 | tail -1 | awk '{print "p50", $7, "p99", $9, "rps", $5}')
b32=$(env $3 "$bin/client/gemmctl/gemmctl" --addr "$addr" bench --concurrency 32 --shape 1x128x128 --duration 4 \
  --warmup 1 --quiet 2>&1 | tail -1 | awk '{print "c32 p50", $7, "rps", $5}')
echo "$1: ping $p | gemm $b | $b32"
