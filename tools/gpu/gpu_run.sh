#!/usr/bin/env bash
# On the GPU machine: runs every test binary of the bundle (.gpu/bin/*_test), each with a
# timeout ($GEMMD_TEST_TIMEOUT seconds, default 300), logs to $OUT (when set), and ends
# with "N passed, N failed".
#   .gpu/gpu_run.sh [name-filter]
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/gpu_env.sh"
out="${OUT:-/tmp}"
filter="${1:-}"
pass=0 fail=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
for t in "$here"/bin/*_test; do
  name=$(basename "$t")
  [ -n "$filter" ] && [[ "$name" != *"$filter"* ]] && continue
  start=$(date +%s%N)
  if timeout -s KILL "${GEMMD_TEST_TIMEOUT:-300}" "$t" >"$out/$name.log" 2>&1; then
    pass=$((pass + 1)); verdict=PASSED
  else
    fail=$((fail + 1)); verdict="FAILED (exit $?)"
  fi
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  printf '%-40s %s in %d ms\n' "$name" "$verdict" "$ms"
  tail -n 3 "$out/$name.log" | sed 's/^/    /'
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
