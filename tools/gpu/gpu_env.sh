#!/usr/bin/env bash
# Sourced on the GPU machine: library paths for the bundle in .gpu/ and the machine's own
# CUDA libraries (cuBLASLt from /usr/local/cuda or from PyTorch's wheels).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The bundle travels packed (gpu_bundle.sh); unpacked once, on first use.
if [ -f "$here/payload.tar.xz" ] && [ ! -d "$here/bin" ]; then
  tar -C "$here" -xJf "$here/payload.tar.xz" ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$here/payload.tar.xz" "$here"
fi
cuda_libs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, s, "lib") for p in nvidia.__path__ for s in ("cublas", "cuda_runtime")))' 2>/dev/null); do
  [ -d "$d" ] && cuda_libs="$cuda_libs:$d"
done
export LD_LIBRARY_PATH="$here/lib$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$here/bin:$PATH"
