#!/usr/bin/env bash
# On the GPU machine: where one K block's time goes at the given shapes. Runs gemm_bench
# and its timing probes (kernels:gemm_bench_probe{1..5}: half of B from L2, no WGMMAs, no
# loads, no loads and no promotion, no output stores; their checks fail by design), then,
# if Nsight Compute can read the counters here, its speed-of-light table and L2/tensor-pipe
# metrics for our kernel. GEMMD_VARIANTS picks the probes, GEMMD_NO_NCU=1 skips ncu.
#   tools/bench/kernel_probe.sh [--only SUBSTRING]   (default: "dense 4096x7168x")
set -u -o pipefail
cd "$(dirname "$0")/../.."
source .gpu/gpu_env.sh
only="${2:-dense 4096x7168x}"
for b in gemm_bench ${GEMMD_VARIANTS:-gemm_bench_probe1 gemm_bench_probe2 gemm_bench_probe3 gemm_bench_probe4}; do
  echo "## $b --only '$only'"
  timeout -s KILL 120 ".gpu/bin/$b" --only "$only" --reps 10 | grep -v '^#'
done
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[ -n "${GEMMD_NO_NCU:-}" ] && exit 0
echo "## ncu ($ncu, --clock-control none), our kernel, first case"
metrics=lts__t_bytes.sum.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,dram__bytes_read.sum.per_second,sm__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
timeout -s KILL 120 "$ncu" --clock-control none --kernel-name regex:wgmma --launch-skip 1 --launch-count 1 \
  --metrics "$metrics" .gpu/bin/gemm_bench --only "$only" --reps 2 2>&1 | grep -v '^#' | tail -30
timeout -s KILL 120 "$ncu" --clock-control none --kernel-name regex:wgmma --launch-skip 1 --launch-count 1 \
  --section SpeedOfLight .gpu/bin/gemm_bench --only "$only" --reps 2 2>&1 | grep -v '^#' | tail -30
