#!/usr/bin/env bash
# engine_bench on the CPU engine, small shapes: a row per group count, each batch timed.
set -euo pipefail
bin="$(dirname "$0")/engine_bench"
[ -x "$bin" ] || bin="tools/bench/engine_bench"
out=$("$bin" --backend cpu --groups 1,4 --m 2 --n 64 --k 256 --reps 5)
echo "$out"
for g in 1 4; do
  row=$(echo "$out" | grep "^| $g | 2 |") || { echo "no row for $g groups"; exit 1; }
  dev=$(echo "$row" | awk -F'|' '{print $7}' | tr -d ' ')
  awk -v d="$dev" 'BEGIN { exit !(d > 0) }' || { echo "no device time for $g groups: $row"; exit 1; }
done
if "$bin" --backend cpu --groups 0 2>/dev/null; then echo "a bad --groups was taken"; exit 1; fi
echo ok
