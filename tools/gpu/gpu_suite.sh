#!/usr/bin/env bash
# On the GPU machine: the checks a change to the CUDA path needs, in one call.
#   tests     the GPU test binaries of the bundle (kernels against FP64);
#   suites    the integration suites against --backend cuda, with a Python gRPC client whose
#             message classes are generated there (grpcio-tools carried as a wheel in .whl/);
#   measured  cuda_test again with --gemm-kernel measured (cuBLASLt and gemmd's kernel mixed);
#   dispatch  the GEMM kernels' device time per batch at prefill shapes under each
#             --gemm-kernel (gemmctl bench), the counts by kernel and the choices file;
#   python    the Python package's pytest suite against --backend cuda (torch tensors);
#   nvml      the gemmd_gpu_* gauges of a running gemmd;
#   weights   tools/bench/weights_io.py on the CUDA backend;
#   serving   issues 33's and 40's tables (tools/bench/serving.py: C shm and C device-resident
#             workers at 1-64 with both torch baselines, the 0.9 MB-result shape, C gRPC
#             (a call per request, and GEMM sessions),
#             decode beside prefill); with GEMMD_BASE_DIR (a folder holding another build's
#             gemmd, e.g. the previous commit's, carried beside the bundle) the host-arena
#             rows again against it, in the same call; then gRPC's floor (gemmctl ping)
#             and the Python device workers (py-dev, pkg-dev) with the first one's
#             profile (serving.py --profile);
#   engine    tools/bench/engine_bench.c: decode batches of 1-64 groups (8 rows, their own
#             4096×4096 weights) through the engine alone, GEMM time per batch and weight TB/s;
#   bench     the engine's numbers (tools/bench/gpu_engine.sh).
# Logs land in $OUT. Usage: tools/gpu/gpu_suite.sh [parts...] (default: tests suites bench)
set -u
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  >/dev/null 2>&1 && export PYTHONPATH=/tmp/site
source .gpu/gpu_env.sh
export GEMMD_BIN_DIR="$PWD/.gpu/bin" GEMMD_TEST_ARGS="--backend cuda" GEMMD_TEST_BACKEND=cuda \
  GEMMD_TEST_NO_PROMTOOL=1 PYTHONUNBUFFERED=1
parts="${*:-tests suites bench}"
fail=0
if [[ " $parts " == *" tests "* ]]; then
  .gpu/gpu_run.sh 2>&1 | tee "$out/gpu_tests.log" | tail -n 12 || fail=1
fi
if [[ " $parts " == *" suites "* ]]; then
  for t in ${GEMMD_SUITES:-cuda_test cuda_regions_test grpc_api_test shm_test}; do
    if timeout 300 python3 "tests/$t.py" >"$out/$t.log" 2>&1; then r=PASSED; else r=FAILED; fail=1; fi
    echo "$t $r: $(grep -E '^Ran |^OK|^FAILED' "$out/$t.log" | tr '\n' ' ')"
    grep -E '^(FAIL|ERROR):' "$out/$t.log" | head -n 5
  done
fi
cuda_env=(GEMMD_BIN_DIR="$PWD/.gpu/bin" GEMMD_TEST_BACKEND=cuda GEMMD_TEST_NO_PROMTOOL=1)
if [[ " $parts " == *" measured "* ]]; then
  if env "${cuda_env[@]}" GEMMD_TEST_ARGS="--backend cuda --gemm-kernel measured --kernel-choice-samples 1" \
      timeout 300 python3 tests/cuda_test.py >"$out/cuda_test_measured.log" 2>&1; then r=PASSED; else r=FAILED; fail=1; fi
  echo "cuda_test --gemm-kernel measured $r: $(grep -E '^Ran |^OK|^FAILED' "$out/cuda_test_measured.log" | tr '\n' ' ')"
fi
if [[ " $parts " == *" dispatch "* ]]; then
  # Per prefill shape and --gemm-kernel: the GEMM kernels' device time per batch
  # (gemmd_batch_gemm_seconds_total over gemmd_batches_total, the difference across the
  # shape's own gemmctl bench), then the batches by kernel and the choices file.
  scrape() { curl -s 127.0.0.1:9499/metrics | awk '$1 == "gemmd_batch_gemm_seconds_total" {g = $2}
    $1 == "gemmd_batches_total" {n = $2} END {print g + 0, n + 0}'; }
  for k in wgmma cublaslt measured; do
    wd=$(mktemp -d)
    .gpu/bin/gemmd --backend cuda --gemm-kernel "$k" --split-flops 1000000000000000 --weight-dir "$wd" \
      --grpc-listen 127.0.0.1:50199 --metrics-listen 127.0.0.1:9499 --shm-socket "$wd/s.sock" >"$out/dispatch-$k.log" 2>&1 &
    pid=$!
    for _ in $(seq 50); do grep -q '"listening"' "$out/dispatch-$k.log" && break; sleep 0.2; done
    for shape in ${GEMMD_DISPATCH_SHAPES:-4096x2112x7168 4096x7168x2048 4096x4096x4096 128x32768x512}; do
      read -r g0 n0 < <(scrape)
      timeout 60 .gpu/bin/gemmctl --addr 127.0.0.1:50199 bench --concurrency 1 --duration 2 --warmup 1 --quiet \
        --shape "$shape" >/dev/null 2>&1
      read -r g1 n1 < <(scrape)
      awk -v k="$k" -v s="$shape" -v g0="$g0" -v g1="$g1" -v n0="$n0" -v n1="$n1" \
        'BEGIN {n = n1 - n0; printf "dispatch %-9s %-15s batches %5d  GEMM us/batch %9.1f\n", k, s, n, (n > 0 ? (g1 - g0) / n * 1e6 : 0)}'
    done
    curl -s 127.0.0.1:9499/metrics | grep '^gemmd_batch_kernel_total'
    grep 'no plan' "$out/dispatch-$k.log" | head -n 3
    kill "$pid"; wait "$pid"
    [ -f "$wd/kernel-choices" ] && cat "$wd/kernel-choices"
    rm -rf "$wd"
  done
fi
if [[ " $parts " == *" python "* ]]; then
  if env "${cuda_env[@]}" GEMMD_TEST_ARGS="--backend cuda" timeout 300 python3 -m pytest -q -p no:cacheprovider \
      --rootdir=client/python client/python/tests >"$out/python_pytest.log" 2>&1; then r=PASSED; else r=FAILED; fail=1; fi
  echo "python package pytest $r: $(tail -n 1 "$out/python_pytest.log")"
fi
if [[ " $parts " == *" nvml "* ]]; then
  env "${cuda_env[@]}" timeout 60 python3 - <<'PY'
import sys, time, urllib.request
sys.path.insert(0, "tests")
import harness as H
with H.Gemmd("--backend", "cuda") as g:
    time.sleep(2.5)  # a sampling period of the NVML thread
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % g.metrics_port).read().decode()
    print("\n".join(l for l in body.splitlines() if l.startswith("gemmd_gpu_")))
PY
  nvidia-smi --query-gpu=name,temperature.gpu,power.draw,memory.used,clocks.sm --format=csv
fi
if [[ " $parts " == *" weights "* ]]; then
  env "${cuda_env[@]}" timeout 300 python3 tools/bench/weights_io.py --backend cuda --weights 4 --mib 256 2>&1 | tail -n 3
fi
if [[ " $parts " == *" serving "* ]]; then
  serving() { # label bindir serving.py-args...
    local label=$1 dir=$2
    shift 2
    echo "## [$label] serving.py $*"
    GEMMD_BIN_DIR=$dir timeout -s KILL 300 python3 tools/bench/serving.py "$@" \
      --json "$out/serving-$label-$RANDOM.json" >"$out/serving-$label.log" 2>&1 || fail=1
    grep -E '^\| |^mixed|^host' "$out/serving-$label.log" | grep -v '^| client\|^| ---\|^| torch baseline' | sort -u
    grep -A 30 '^## profile' "$out/serving-$label.log" | head -n 34
  }
  decode="--backend cuda --shape 8x4096x4096 --seconds 2"
  builds=("new:$PWD/.gpu/bin")
  if [ -n "${GEMMD_BASE_DIR:-}" ]; then
    ln -sf "$PWD/.gpu/bin/serving_worker" "$GEMMD_BASE_DIR/serving_worker"
    builds+=("base:$GEMMD_BASE_DIR")
  fi
  # This build: C workers with host arenas (issue 33) and C workers whose A and D sit in
  # their own cudaMalloc block (c-dev, issue 40) in one run with both torch baselines (the
  # requests on the host, and already on the GPU); a base build: the host-arena rows alone.
  for b in "${builds[@]}"; do
    label=${b%%:*} dir=${b#*:}
    clients=c-shm torch=""
    [ "$label" = new ] && clients=c-shm,c-dev torch="--torch --torch-device"
    serving "$label" "$dir" $decode --workers 1,8,32,64 --clients $clients $torch
    serving "$label-0.9MB" "$dir" --backend cuda --shape 64x7168x2048 --seconds 2 --workers 32 --clients $clients $torch
    serving "$label-grpc" "$dir" $decode --weights 16 --workers 1,32 --clients c-grpc,c-stream
    serving "$label-mix" "$dir" $decode --workers 16 --clients , --mix c-shm:16:py-shm:2:4096x7168x16384
  done
  # gRPC's floor on this machine: a health check round trip without payload (gemmctl ping),
  # beside the shared-memory GEMM of the rows above (docs/bench/serving.md).
  .gpu/bin/gemmd --backend cuda --grpc-listen 127.0.0.1:50198 --metrics-listen 127.0.0.1:9498 \
    --shm-socket /tmp/gemmd-ping.sock >"$out/ping-gemmd.log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do grep -q '"listening"' "$out/ping-gemmd.log" && break; sleep 0.2; done
  timeout 60 .gpu/bin/gemmctl --addr 127.0.0.1:50198 ping --count 5000
  kill "$pid"; wait "$pid"
  # The Python device workers (py-dev: gemmd_shm with torch CUDA tensors; pkg-dev: the
  # package), the first one's profile printed.
  serving "new-dev-py" "$PWD/.gpu/bin" $decode --workers 1,32 --clients py-dev,pkg-dev --profile
fi
if [[ " $parts " == *" engine "* ]]; then
  for kk in wgmma cublaslt; do
    timeout 120 .gpu/bin/engine_bench --backend cuda --kernel $kk --groups 1,8,32,64 --reps 50 2>&1 |
      tee "$out/engine_bench-$kk.log" || fail=1
  done
fi
if [[ " $parts " == *" bench "* ]]; then
  tools/bench/gpu_engine.sh 5 2>&1 | tee "$out/gpu_engine.log"
fi
exit $fail
