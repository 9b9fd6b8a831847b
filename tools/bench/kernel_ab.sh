#!/usr/bin/env bash
# On the GPU machine: the kernel gemmd runs against candidate builds, in one call.
#   1. every gpu_gemm*_test of the bundle (each build against the FP64 reference);
#   2. gemm_bench and each candidate (kernels:gemm_bench_<name>) over issue 6's cases,
#      one build after the other, each table to $OUT/<build>.log;
#   3. issue 6's summary of each table (kernel_summary.py) and, per case, the candidates'
#      time over gemm_bench's.
# Build the bundle with the candidates first (at most three fit the device tool's 64 MiB):
#   deploy/gpu_bundle.sh //kernels:gemm_bench_<name> //kernels:gpu_gemm_<name>_test ...
#   tools/bench/kernel_ab.sh gemm_bench_<name> [...]     (GEMMD_AB_ONLY: gemm_bench --only)
set -u -o pipefail
cd "$(dirname "$0")/../.."
source .gpu/gpu_env.sh
out="${OUT:-/tmp}"
builds=(gemm_bench "$@")
.gpu/gpu_run.sh gpu_gemm 2>&1 | tail -n 20
only=()
[ -n "${GEMMD_AB_ONLY:-}" ] && only=(--only "$GEMMD_AB_ONLY")
for b in "${builds[@]}"; do
  [ -x ".gpu/bin/$b" ] || { echo "## $b: not in the bundle"; continue; }
  echo "## $b"
  timeout -s KILL 240 ".gpu/bin/$b" --kernel wgmma --reps 10 "${only[@]}" >"$out/$b.log" 2>&1
  echo "rc=$?"
done
logs=()
for b in "${builds[@]}"; do [ -s "$out/$b.log" ] && logs+=("$out/$b.log"); done
python3 tools/bench/kernel_summary.py "${logs[@]}"
python3 - "${logs[@]}" <<'PY'
import re, sys
def table(path):
    t = {}
    for line in open(path):
        m = re.match(r"^((?:dense|stacked|decode) .+?)\s{2,}(?:\d+\s+)?([\d.]+)\s", line)
        if m:
            t[m.group(1)] = float(m.group(2))
    return t
base, others = table(sys.argv[1]), [table(p) for p in sys.argv[2:]]
names = [p.rsplit("/", 1)[-1][:-4] for p in sys.argv[1:]]
print("%-40s %10s" % ("case (us)", names[0]) + "".join(" %22s" % n[-22:] for n in names[1:]))
for case, us in base.items():
    print("%-40s %10.1f" % (case, us) +
          "".join(" %14.1f (%4.2fx)" % (o[case], o[case] / us) if case in o else " %22s" % "-" for o in others))
PY
