#!/usr/bin/env bash
# gRPC round trip of a tiny GEMM on the CPU backend (issue 3's numbers): starts an
# optimized gemmd on free ports, measures the transport floor (gemmctl ping), then
# gemmctl bench at concurrency 1 and 32 for M=1, N=K=128. Prints tables; JSON lands in
# $OUT_DIR (default /tmp/gemmd-bench). Usage: tools/bench/grpc_cpu.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-10}"
out="${OUT_DIR:-/tmp/gemmd-bench}"
mkdir -p "$out"
bazel build -c opt //daemon:gemmd //client:gemmctl >/dev/null 2>&1
bin=bazel-bin
log="$out/gemmd.log"
"$bin/daemon/gemmd" --grpc-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 >"$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q 'msg="listening"' "$log" && break; sleep 0.1; done
port=$(grep -o 'grpc_port=[0-9]*' "$log" | cut -d= -f2)
addr="127.0.0.1:$port"
echo "# $(date -u +%FT%TZ) $(uname -n) $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
"$bin/client/gemmctl/gemmctl" --addr "$addr" ping --count 5000
for c in 1 32; do
  "$bin/client/gemmctl/gemmctl" --addr "$addr" bench --concurrency "$c" --shape 1x128x128 \
    --duration "$secs" --warmup 2 --quiet --json "$out/grpc_c$c.json"
done
