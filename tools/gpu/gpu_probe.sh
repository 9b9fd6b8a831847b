#!/usr/bin/env bash
# On the GPU machine: what is there (GPU, CUDA libraries, CPU), whether the bundle's
# binaries start, and the GPU tests. Output for docs/bench/.
set -u
cd "$(dirname "$0")/../.."
source .gpu/gpu_env.sh
echo "== machine"; nproc; grep -m1 'model name' /proc/cpuinfo; uname -r
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
echo "== CUDA libraries"; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
ls /usr/local/cuda/lib64/libcublasLt.so* 2>&1 | head -3; nvcc --version 2>&1 | tail -2
echo "== bundle libraries missing"; for b in .gpu/bin/*; do ldd "$b" | grep "not found"; done; echo "(end)"
echo "== sm_90a in the test binary"; cuobjdump --list-elf .gpu/bin/gpu_quantize_test 2>&1 | head -3
echo "== gemmd smoke (CPU backend)"
gemmd --backend cpu --grpc-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 >/tmp/gemmd.log 2>&1 &
pid=$!; sleep 1
port=$(grep -o 'grpc_port=[0-9]*' /tmp/gemmd.log | cut -d= -f2)
gemmctl --addr 127.0.0.1:$port gemm --m 8 --n 256 --k 512 --check | tail -3
kill -TERM $pid; wait $pid; echo "gemmd exit $?"
echo "== GPU tests"; .gpu/gpu_run.sh
