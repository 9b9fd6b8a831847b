#!/usr/bin/env bash
# serving.py on the CPU backend, small and short: every C client kind (the arena, a memfd
# region, gRPC), the Python shm client and the gemmd package serve requests with no error;
# then the mixed mode (decode workers beside a prefill one) prints its summary; and --perf
# profiles a window where perf can.
set -euo pipefail
dir="${TEST_TMPDIR:-$(mktemp -d)}"
out="$dir/serving.json"
/usr/bin/python3 tools/bench/serving.py --backend cpu --workers 2 --weights 4 --seconds 0.5 \
  --clients c-shm,c-mem,c-grpc,c-stream,py-shm,pkg-shm --json "$out"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
kinds = {r["client"] for r in rows}
assert kinds == {"c-shm", "c-mem", "c-grpc", "c-stream", "py-shm", "pkg-shm"}, kinds
for r in rows:
    assert r["errors"] == 0 and r["req_s"] > 0, r
print("ok: %s" % ", ".join("%s %.0f req/s" % (r["client"], r["req_s"]) for r in rows))
PY
/usr/bin/python3 tools/bench/serving.py --backend cpu --clients , --workers 2 --weights 4 --seconds 0.3 \
  --mix c-shm:2:py-shm:1:64x256x256 | grep -E '^mixed: decode req/s [0-9.]+x alone'
# --perf, where this machine has a perf that may sample every CPU (linux-perf is not among
# what deploy/bootstrap.sh installs): the window's samples name gemmd's gRPC threads.
if command -v perf >/dev/null && perf record -a -e cpu-clock -o "$dir/probe.data" -- true >/dev/null 2>&1; then
  /usr/bin/python3 tools/bench/serving.py --backend cpu --clients c-grpc --workers 2 --weights 4 --seconds 0.5 \
    --perf >"$dir/perf.txt"
  grep -q '^# perf by comm,dso,sym' "$dir/perf.txt"
  grep -qE '^#   [0-9.]+%  gemmd-grpc-cq' "$dir/perf.txt"
  echo "ok: --perf"
else
  echo "--perf not checked: no perf here that may sample every CPU"
fi
