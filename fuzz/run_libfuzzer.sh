#!/usr/bin/env bash
# Runs one fuzz target built by fuzz/build_libfuzzer.sh: RUNS executions in all (default
# 10^7), split over JOBS processes (default: the number of CPUs) at nice 10, each with a
# seed of its own. They share a working corpus, OUT/work/TARGET, started from
# fuzz/corpus/TARGET and fuzz/regressions/TARGET (the repository's copies are only read).
# Crashes land in OUT/artifacts/TARGET/; libFuzzer's logs in OUT/logs/TARGET-N.log.
#
#   fuzz/run_libfuzzer.sh TARGET [RUNS] [JOBS] [OUT]     # OUT: default /tmp/gemmd-fuzz
#
# Prints one line: target, executions, exec/s (all jobs together), crashes, seconds.
# A crash: minimize it (OUT/TARGET -minimize_crash=1 -runs=100000 FILE), fix the daemon,
# add the input to fuzz/regressions/TARGET/ (bazel test //fuzz/... then replays it).
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=${1:?usage: run_libfuzzer.sh TARGET [RUNS] [JOBS] [OUT]}
RUNS=${2:-10000000}
JOBS=${3:-$(nproc)}
OUT=${4:-/tmp/gemmd-fuzz}
BIN="$OUT/$TARGET"
[ -x "$BIN" ] || { echo "no $BIN: run fuzz/build_libfuzzer.sh $OUT first" >&2; exit 2; }

WORK="$OUT/work/$TARGET"
ART="$OUT/artifacts/$TARGET"
LOGS="$OUT/logs"
mkdir -p "$WORK" "$ART" "$LOGS"
SEEDS=(fuzz/corpus/"$TARGET")
[ -d fuzz/regressions/"$TARGET" ] && SEEDS+=(fuzz/regressions/"$TARGET")

start=$(date +%s)
pids=()
for ((j = 0; j < JOBS; j++)); do
  runs=$((RUNS / JOBS + (j < RUNS % JOBS ? 1 : 0)))
  nice -n 10 "$BIN" -runs="$runs" -seed=$((j + 1)) -timeout=25 -print_final_stats=1 \
    -artifact_prefix="$ART/" "$WORK" "${SEEDS[@]}" >"$LOGS/$TARGET-$j.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
secs=$(($(date +%s) - start))

execs=0
rate=0
for ((j = 0; j < JOBS; j++)); do
  log="$LOGS/$TARGET-$j.log"
  e=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  r=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  execs=$((execs + ${e:-0}))
  rate=$((rate + ${r:-0}))
done
crashes=$(find "$ART" -type f | wc -l)
echo "$TARGET executions=$execs exec/s=$rate crashes=$crashes seconds=$secs"
[ "$status" = 0 ] || echo "a job failed: see $LOGS/$TARGET-*.log" >&2
exit "$status"
