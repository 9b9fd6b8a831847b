#!/usr/bin/env bash
# On the GPU machine: where one K block's time goes at the given shapes. Runs gemm_bench
# and the builds named in GEMMD_VARIANTS (gemm_bench_<name> of kernels/bench/BUILD), then,
# if Nsight Compute can read the counters here, per build: SM clock, L2 bytes, the
# speed-of-light and compute sections and the average stall reasons (what
# docs/bench/kernels.md's probe tables were made with). GEMMD_NO_NCU=1 skips ncu.
# The timing probes those tables name (half of B from L2, no WGMMAs, no loads, ...) are no
# longer in the kernel's code: `git show 9186caf:kernels/sm90_gemm_wgmma.cu` has them
# (GEMMD_WGMMA_PROBE); one brought back is a candidate build (kernels/bench/BUILD).
#   tools/gpu/gpu_bundle.sh //kernels/bench:gemm_bench_<name> ...
#   GEMMD_VARIANTS="gemm_bench_<name> ..." tools/bench/kernel_probe.sh [--only SUBSTRING]
#   (default: "dense 4096x7168x")
set -u -o pipefail
cd "$(dirname "$0")/../.."
source .gpu/gpu_env.sh
only="${2:-dense 4096x7168x}"
variants="${GEMMD_VARIANTS:-}"
for b in gemm_bench $variants; do
  [ -x ".gpu/bin/$b" ] || { echo "## $b: not in the bundle"; continue; }
  echo "## $b --only '$only'"
  timeout -s KILL 120 ".gpu/bin/$b" --only "$only" --reps 10 | grep -v '^#'
done
[ -n "${GEMMD_NO_NCU:-}" ] && exit 0
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
metrics="sm__cycles_elapsed.avg.per_second,gpu__time_duration.sum,lts__t_bytes.sum.per_second"
metrics+=",regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
for b in gemm_bench $variants; do
  [ -x ".gpu/bin/$b" ] || continue
  echo "## ncu ($ncu, --clock-control none): $b, our kernel, first case"
  timeout -s KILL 120 "$ncu" --clock-control none --kernel-name regex:wgmma --launch-skip 1 --launch-count 1 \
    --metrics "$metrics" --section SpeedOfLight --section ComputeWorkloadAnalysis \
    ".gpu/bin/$b" --only "$only" --reps 2 2>&1 | grep -E "^    [a-zA-Z]" | awk '!/stalled/ || $NF + 0 > 0.05'
done
