#!/usr/bin/env bash
# On the GPU machine: the serving benchmark (tools/bench/serving.py) against the bundle's
# gemmd (.gpu, from tools/gpu/gpu_bundle.sh //tools/bench:serving_worker), with the torch
# baselines in the same run. Output lands in $OUT.
#   tools/bench/gpu_serving.sh [serving.py runs, ';'-separated argument lists]
set -u -o pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  >/dev/null 2>&1 && export PYTHONPATH=/tmp/site
source .gpu/gpu_env.sh
# GEMMD_BIN_DIR may name another build's binaries (gemmd and serving_worker) for an A/B.
export GEMMD_BIN_DIR="${GEMMD_BIN_DIR:-$PWD/.gpu/bin}" PYTHONUNBUFFERED=1
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader)"
python3 -c 'import torch, google.protobuf, grpc; print("# torch", torch.__version__, "protobuf", google.protobuf.__version__, "grpcio", grpc.__version__)'
runs="${1:---backend cuda --torch}"
i=0
IFS=';' read -ra list <<<"$runs"
for args in "${list[@]}"; do
  i=$((i + 1))
  echo "## serving.py $args"
  # shellcheck disable=SC2086
  timeout -s KILL 400 python3 tools/bench/serving.py $args --json "$out/serving-$i.json" 2>&1 | tee "$out/serving-$i.log"
done
