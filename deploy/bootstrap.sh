#!/usr/bin/env bash
# Installs what gemmd needs to build, test and run, and only what is missing.
# Safe to run again: with everything present it changes nothing and prints one line.
#
# Needs Debian 12 (bookworm) packages; uses sudo when not root. The CUDA toolkit is not
# installed here: with nvcc at $CUDA_PATH or /usr/local/cuda the GPU engine is built,
# without it the build is CPU-only.
set -euo pipefail

packages=(
  bazel-bootstrap        # Bazel 4.2.3 (WORKSPACE era), works offline with our stubs
  gcc g++                # C11 / C++17
  libgrpc-dev            # gRPC C core 1.51 (grpc/grpc.h), libgpr
  libprotobuf-c-dev      # protobuf-c runtime
  protobuf-c-compiler    # protoc-c: C code from .proto, generated in the build
  protobuf-compiler      # protoc
  libuv1-dev             # the daemon's event loop
  zlib1g-dev             # crc32 for the weight files' checksums
  prometheus             # promtool, to check /metrics in tests
  python3                # Debian's /usr/bin/python3 for the test clients
  python3-grpcio         # an independent gRPC client for the integration tests
  python3-protobuf       # messages of the gemmd package (client/python), which the tests use
  python3-numpy          # the tests' independent FP64 reference
  python3-yaml           # reads the Kubernetes and Prometheus files in their tests
  python3-pytest         # runs the Python package's tests (client/python/tests)
  python3-pip            # installs the PyPI packages below
  openssl                # self-signed certificates for the TLS test
  curl                   # HTTP probes in tests and docs
  systemd                # systemd-analyze, -sysusers, -tmpfiles: the units' test (deploy/systemd)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all ${#packages[@]} packages present"
else
  echo "bootstrap: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "bootstrap: installed ${#missing[@]} packages"
fi

# Python packages Debian 12 lacks, from PyPI into Debian's python3, pinned. ml_dtypes gives
# numpy its FP8 and BF16 dtypes (the gemmd package, client/python, needs it); --no-deps
# keeps Debian's numpy (later ml_dtypes releases want numpy 2).
pypi=(ml_dtypes==0.5.4)
pypi_missing=()
for p in "${pypi[@]}"; do
  mod="${p%%==*}"
  if ! /usr/bin/python3 -c "import $mod, importlib.metadata as m, sys; sys.exit(m.version('$mod') != '${p##*==}')" 2>/dev/null; then
    pypi_missing+=("$p")
  fi
done
if [ ${#pypi_missing[@]} -eq 0 ]; then
  echo "bootstrap: all ${#pypi[@]} PyPI packages present"
else
  echo "bootstrap: installing ${pypi_missing[*]} from PyPI"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo /usr/bin/python3 -m pip install -q --no-deps --break-system-packages --root-user-action=ignore \
    "${pypi_missing[@]}"
fi

# The Kubernetes API schemas, for //tests:k8s_test (kubernetes-validate), in a directory of
# their own: they need a newer jsonschema than Debian's.
k8s_validate=/opt/gemmd-tools/k8s-validate
k8s_validate_version=1.37.0
if [ -f "$k8s_validate/.installed-$k8s_validate_version" ]; then
  echo "bootstrap: kubernetes-validate $k8s_validate_version present"
else
  echo "bootstrap: installing kubernetes-validate $k8s_validate_version into $k8s_validate"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo /usr/bin/python3 -m pip install -q --root-user-action=ignore --target "$k8s_validate" \
    "kubernetes-validate==$k8s_validate_version"
  $sudo touch "$k8s_validate/.installed-$k8s_validate_version"
fi

cuda="${CUDA_PATH:-/usr/local/cuda}"
if [ -x "$cuda/bin/nvcc" ]; then
  echo "bootstrap: CUDA at $cuda ($("$cuda/bin/nvcc" --version | grep -o 'release [0-9.]*')): GPU targets are built"
else
  echo "bootstrap: no nvcc at $cuda: CPU-only build (set CUDA_PATH to use a toolkit elsewhere)"
fi
