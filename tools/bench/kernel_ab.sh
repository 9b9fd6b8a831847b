#!/usr/bin/env bash
# On the GPU machine: the kernel gemmd runs against candidate builds, in one call.
#   1. every gpu_gemm*_test of the bundle (each build against the FP64 reference);
#   2. gemm_bench and each candidate (kernels/bench:gemm_bench_<name>) over issue 6's cases,
#      one build after the other, each table to <build>.log;
#   3. issue 6's summary of each table (kernel_summary.py) and, per case, the candidates'
#      time over gemm_bench's.
# Build the bundle with the candidates first (packed, every candidate fits the device tool's
# 64 MiB):
#   tools/gpu/gpu_bundle.sh //kernels/bench:gemm_bench_<name> //kernels/bench:gpu_gemm_<name>_test ...
#   tools/bench/kernel_ab.sh gemm_bench_<name> [...]
# GEMMD_AB_ONLY: gemm_bench --only (substrings, comma-separated); GEMMD_AB_ARGS: more
# gemm_bench arguments (say "--kinds rows128,tma_store,rows256 --tile-n 16,32,64,128",
# checked beforehand with gemm_bench --list here), replaced for one build by
# GEMMD_AB_ARGS_<build> (say GEMMD_AB_ARGS_gemm_bench_rows256s4="--kinds rows256
# --only 'dense 4096x,stacked'": shell words, quoted as on a command line; its --only wins
# over GEMMD_AB_ONLY's); GEMMD_AB_BUILD_TIMEOUT_S
# (default 240): one build's limit; GEMMD_AB_DEADLINE_S (default 540): a build whose run
# would likely end past this many seconds from the start is skipped, so the device call
# ends in time with the tables it has. GEMMD_AB_AGAIN=1: then every build once more in the
# other order, candidates first (again-<build>.log, again-summary.txt, again-ratios.txt):
# run order moves small cases a few percent. Every log leaves packed in $OUT/kernel_ab.tar.gz
# (the device tool returns at most 8 files).
# GEMMD_AB_DRY_RUN=1, on the build machine: no tests, no timing; each build's arguments go
# through its gemm_bench --list, which prints the cases they select (or refuses them), so
# a planned device call is checked before it costs device time.
set -u -o pipefail
cd "$(dirname "$0")/../.."
source .gpu/gpu_env.sh
# bench_args BUILD: the gemm_bench arguments of BUILD, into the array `args`.
bench_args() {
  local own="GEMMD_AB_ARGS_$1" extra
  eval "extra=(${!own-${GEMMD_AB_ARGS:-}})"  # shell words: quotes keep "dense 4096x,stacked" whole
  args=(--kernel wgmma --reps 10)
  [ -n "${GEMMD_AB_ONLY:-}" ] && args+=(--only "$GEMMD_AB_ONLY")
  args+=("${extra[@]}")
}
if [ "${GEMMD_AB_DRY_RUN:-0}" = 1 ]; then
  rc=0
  for b in gemm_bench "$@"; do
    [ -x ".gpu/bin/$b" ] || { echo "## $b: not in the bundle"; rc=1; continue; }
    bench_args "$b"
    if cases="$(".gpu/bin/$b" "${args[@]}" --list)"; then
      echo "## $b ${args[*]}: $(echo "$cases" | wc -l) cases: $(echo "$cases" | paste -sd ';')"
    else
      echo "## $b: its arguments were refused"
      rc=1
    fi
  done
  exit $rc
fi
final_out="${OUT:-/tmp}"
out="$(mktemp -d)"
chmod 755 "$out"  # the archive's root entry carries this mode (see calls/lib.sh)
# Packed after every step too: a call killed at its time limit (SIGKILL, no trap) still
# returns what it had.
pack() { tar -C "$out" -czf "$out.tgz" . && mv -f "$out.tgz" "$final_out/kernel_ab.tar.gz"; }
trap pack EXIT
t_start=$(date +%s)
deadline="${GEMMD_AB_DEADLINE_S:-540}"
builds=(gemm_bench "$@")
OUT="$out" GEMMD_TEST_TIMEOUT="${GEMMD_TEST_TIMEOUT:-120}" .gpu/gpu_run.sh gpu_gemm 2>&1 | tail -n 40
pack
# run_pass PREFIX BUILD...: each build's table to $out/PREFIX<build>.log, in this order.
run_pass() {
  local prefix="$1" b t0 rc
  shift
  for b in "$@"; do
    [ -x ".gpu/bin/$b" ] || { echo "## $b: not in the bundle"; continue; }
    bench_args "$b"
    t0=$(date +%s)
    if [ $((t0 - t_start + last)) -gt "$deadline" ]; then
      echo "## $prefix$b: skipped, $((t0 - t_start)) s gone and the last build took $last s (deadline $deadline s)"
      continue
    fi
    timeout -s KILL "${GEMMD_AB_BUILD_TIMEOUT_S:-240}" ".gpu/bin/$b" "${args[@]}" >"$out/$prefix$b.log" 2>&1
    rc=$?
    last=$(($(date +%s) - t0))
    echo "## $prefix$b: rc=$rc in $last s"
    pack
  done
}
# report PREFIX: issue 6's summary of each of the pass's tables (PREFIXsummary.txt) and,
# per case, each candidate's time over gemm_bench's (PREFIXratios.txt).
report() {
  local prefix="$1" b logs=()
  for b in "${builds[@]}"; do [ -s "$out/$prefix$b.log" ] && logs+=("$out/$prefix$b.log"); done
  [ ${#logs[@]} -gt 0 ] || return 0
  python3 tools/bench/kernel_summary.py "${logs[@]}" | tee "$out/${prefix}summary.txt"
  python3 - "${logs[@]}" <<'PY' | tee "$out/${prefix}ratios.txt"
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
}
last=0
run_pass "" "${builds[@]}"
report ""
if [ "${GEMMD_AB_AGAIN:-0}" = 1 ]; then
  # The same builds again, candidates first (last one first) and gemm_bench last: run order
  # moves the small cases a few percent (docs/bench/kernels.md).
  reversed=()
  for ((i = ${#builds[@]} - 1; i >= 0; i--)); do reversed+=("${builds[$i]}"); done
  run_pass "again-" "${reversed[@]}"
  report "again-"
fi
