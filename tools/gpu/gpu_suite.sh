#!/usr/bin/env bash
# On the GPU machine: everything issue 5 asks the H200 to show, in one call.
#   1. the GPU test binaries of the bundle (kernels against FP64);
#   2. the integration suites against --backend cuda, with a Python gRPC client whose
#      message classes are generated there (grpcio-tools carried as a wheel in .whl/);
#   3. the engine's numbers (tools/bench/gpu_engine.sh).
# Logs land in $OUT. Usage: tools/gpu/gpu_suite.sh [suites...] (default: all three parts)
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
  for t in ${GEMMD_SUITES:-cuda_test grpc_api_test shm_test}; do
    if timeout 300 python3 "tests/$t.py" >"$out/$t.log" 2>&1; then r=PASSED; else r=FAILED; fail=1; fi
    echo "$t $r: $(grep -E '^Ran |^OK|^FAILED' "$out/$t.log" | tr '\n' ' ')"
    grep -E '^(FAIL|ERROR):' "$out/$t.log" | head -n 5
  done
fi
if [[ " $parts " == *" bench "* ]]; then
  tools/bench/gpu_engine.sh 5 2>&1 | tee "$out/gpu_engine.log"
fi
exit $fail
