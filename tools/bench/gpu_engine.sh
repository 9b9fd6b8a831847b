#!/usr/bin/env bash
# Issue 5's numbers on the GPU machine, from the bundle (.gpu): per-batch graph replay vs
# eager launch (1, 16, 128 groups), then one m=8 request against a registered 7168×2048
# weight over shared memory and gRPC, with gemmd's kernel and with cuBLASLt: end-to-end
# p50/p99, the device time of its batch, and the difference = gemmd's overhead.
#   tools/bench/gpu_engine.sh [seconds]
set -u
cd "$(dirname "$0")/../.."
source .gpu/gpu_env.sh
secs="${1:-5}"
start() { # args: extra gemmd flags; sets pid, grpc, sock
  sock="/tmp/gemmd-bench-$$-$RANDOM.sock"
  log="/tmp/gemmd-bench-$$.log"
  gemmd --backend cuda --grpc-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --shm-socket "$sock" "$@" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do grep -q 'msg="listening"' "$log" && break; sleep 0.1; done
  grpc="127.0.0.1:$(grep -o 'grpc_port=[0-9]*' "$log" | cut -d= -f2)"
}
stop() { kill -TERM "$pid"; wait "$pid"; }
echo "## graph replay vs eager, per batch"
for mode in on off; do
  start --cuda-graphs "$mode"
  python3 tools/bench/gpu_graphs.py "$sock" "graphs=$mode" 30
  stop
done
echo "## m=8 x 7168x2048 (registered), concurrency 1"
for kernel in gemmd cublaslt; do
  start --gemm-kernel "$kernel"
  echo "### kernel $kernel"
  gemmctl --addr "unix://$sock" bench --transport shm --shape 8x7168x2048 --concurrency 1 \
    --duration "$secs" --warmup 1 --quiet | sed 's/^/shm  /'
  gemmctl --addr "$grpc" bench --shape 8x7168x2048 --concurrency 1 --duration "$secs" --warmup 1 \
    --quiet | tail -n 1 | sed 's/^/grpc /'
  stop
done
