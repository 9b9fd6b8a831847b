#!/usr/bin/env bash
# Shared memory vs gRPC on the CPU backend (issue 4's numbers): M=1, N=K=16 against a
# registered weight, gemmctl bench at concurrency 1 and 8 over both transports in one run,
# then the waiting strategies of the C client (GEMMD_SHM_WAIT, GEMMD_SHM_SPIN_US).
# Usage: tools/bench/shm_cpu.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-5}"
out="${OUT_DIR:-/tmp/gemmd-bench}"
mkdir -p "$out"
bazel build -c opt //daemon:gemmd //client:gemmctl >/dev/null 2>&1
sock="/tmp/gemmd-bench-$$.sock"
log="$out/gemmd-shm.log"
bazel-bin/daemon/gemmd --grpc-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --shm-socket "$sock" >"$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q 'msg="listening"' "$log" && break; sleep 0.1; done
grpc="127.0.0.1:$(grep -o 'grpc_port=[0-9]*' "$log" | cut -d= -f2)"
ctl=bazel-bin/client/gemmctl/gemmctl
echo "# $(date -u +%FT%TZ) $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
for c in 1 8; do
  echo "## concurrency $c"
  $ctl --addr "unix://$sock" bench --transport shm --concurrency "$c" --shape 1x16x16 \
    --duration "$secs" --warmup 1 --quiet --json "$out/shm_c$c.json" | sed 's/^/shm  /'
  $ctl --addr "$grpc" bench --concurrency "$c" --shape 1x16x16 --duration "$secs" --warmup 1 \
    --quiet --json "$out/grpc_c$c.json" | tail -n 1 | sed 's/^/grpc /'
done
echo "## waiting strategies (shm, concurrency 1)"
for wait in futex eventfd; do
  for spin in 0 50 200 1000; do
    GEMMD_SHM_WAIT=$wait GEMMD_SHM_SPIN_US=$spin $ctl --addr "unix://$sock" bench --transport shm \
      --concurrency 1 --shape 1x16x16 --duration "$secs" --warmup 1 --quiet | tail -n 1 |
      sed "s/^/wait=$wait spin=${spin}us /"
  done
done
