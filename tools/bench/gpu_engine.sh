#!/usr/bin/env bash
# Issue 5's numbers on the GPU machine, from the bundle (.gpu): per-batch graph replay vs
# eager launch (1, 16, 128 groups), then one m=8 request against a registered 7168×2048
# weight over shared memory and gRPC, with gemmd's kernel and with cuBLASLt: end-to-end
# p50/p99, the device time of its batch, and the difference = gemmd's overhead.
#   tools/bench/gpu_engine.sh [seconds] [groups,groups,...] [parts]
# parts: any of "graphs latency stages" (default: all). "stages": the m=8 request over
# shm with the default kernel at --engine-spin-us 0 and 200, and where each batch's time
# went (gemmd_batch_stage_seconds_total / batches, from /metrics).
# Every step has a time limit; a step that fails prints the tail of gemmd's log.
set -u -o pipefail
cd "$(dirname "$0")/../.."
source .gpu/gpu_env.sh
secs="${1:-5}"
groups="${2:-1,16,128}"
parts="${3:-graphs latency stages}"
start() { # args: extra gemmd flags; sets pid, grpc, sock
  sock="/tmp/gemmd-bench-$$-$RANDOM.sock"
  log="/tmp/gemmd-bench-$$.log"
  gemmd --backend cuda --grpc-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --shm-socket "$sock" "$@" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do grep -q 'msg="listening"' "$log" && break; sleep 0.1; done
  grpc="127.0.0.1:$(grep -o 'grpc_port=[0-9]*' "$log" | cut -d= -f2)"
  metrics="127.0.0.1:$(grep -o 'metrics_port=[0-9]*' "$log" | cut -d= -f2)"
}
stop() {
  kill -TERM "$pid"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid"
}
check() { # the last step's status; on failure, what gemmd said
  local rc=$?
  if [ "$rc" != 0 ]; then echo "(step failed, rc=$rc; gemmd log tail:)"; tail -n 15 "$log" | sed 's/^/    /'
    timeout -s KILL 5 gemmctl --addr "$grpc" stats 2>&1 | grep -iE 'queue|inflight|batches|fail' | sed 's/^/    /'
  fi
}
stage_report() { # arg: label. Where the batches' time went (means per batch, from /metrics)
  timeout -s KILL 10 python3 - "$metrics" "$1" <<'PY'
import re, sys, urllib.request
body = urllib.request.urlopen("http://%s/metrics" % sys.argv[1], timeout=5).read().decode()
n = float(re.search(r"^gemmd_batch_stage_batches_total (\S+)", body, re.M).group(1))
st = re.findall(r'^gemmd_batch_stage_seconds_total\{stage="([a-z_]+)"\} (\S+)', body, re.M)
gemm = float(re.search(r"^gemmd_batch_gemm_seconds_total (\S+)", body, re.M).group(1))
print("%s stages over %d batches: " % (sys.argv[2], n) +
      "  ".join("%s %.1f" % (k, float(v) / n * 1e6) for k, v in st) +
      "  | sum %.1f" % (sum(float(v) for _, v in st) / n * 1e6) +
      "  | of device, GEMM kernels %.1f" % (gemm / n * 1e6))
PY
}
if [[ " $parts " == *" graphs "* ]]; then
echo "## graph replay vs eager, per batch"
for mode in on off; do
  start --cuda-graphs "$mode"
  timeout -s KILL 90 python3 tools/bench/gpu_graphs.py "$sock" "graphs=$mode" 30 "$groups"; check
  stop
done
fi
if [[ " $parts " == *" latency "* ]]; then
echo "## m=8 x 7168x2048 (registered), concurrency 1"
for kernel in gemmd wgmma cublaslt; do
  start --gemm-kernel "$kernel"
  echo "### kernel $kernel"
  timeout -s KILL $((secs + 15)) gemmctl --addr "unix://$sock" bench --transport shm --shape 8x7168x2048 \
    --concurrency 1 --duration "$secs" --warmup 1 --quiet | sed 's/^/shm  /'; check
  stage_report "shm $kernel"; check
  timeout -s KILL $((secs + 15)) gemmctl --addr "$grpc" bench --shape 8x7168x2048 --concurrency 1 \
    --duration "$secs" --warmup 1 --quiet | tail -n 1 | sed 's/^/grpc /'; check
  stop
done
fi
if [[ " $parts " == *" stages "* ]]; then
echo "## where the time goes: m=8 x 7168x2048 over shm, default kernel, mean per batch (us)"
for spin in 0 200; do
  start --engine-spin-us "$spin"
  timeout -s KILL $((secs + 15)) gemmctl --addr "unix://$sock" bench --transport shm --shape 8x7168x2048 \
    --concurrency 1 --duration "$secs" --warmup 1 --quiet | sed "s/^/spin=$spin shm  /"; check
  stage_report "spin=$spin"
  check
  stop
done
fi
