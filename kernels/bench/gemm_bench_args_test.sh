#!/usr/bin/env bash
# gemm_bench's arguments, on the host (--list needs no GPU): the issue's 43 cases, --only
# with several substrings, --shape, and every bad argument refused with exit 2 before
# any CUDA call (a device call must not be spent on a typo).
set -u -o pipefail
bench="$1"
fail=0
check() {  # name, expected, actual
  if [ "$2" != "$3" ]; then
    echo "FAIL $1: expected [$2], got [$3]"
    fail=1
  else
    echo "ok   $1"
  fi
}
check "all cases" 43 "$("$bench" --list | wc -l)"
check "decode cases" "decode 64x8 own 4096x4096
decode 128x4 own 2048x2048" "$("$bench" --list --only decode)"
check "several substrings" 11 "$("$bench" --list --only 'dense 4096x,stacked,8192x8192' | wc -l)"
check "a substring twice counts once" 2 "$("$bench" --list --only 'decode,decode' | wc -l)"
check "shapes" "dense 1x128x128
dense 8x2048x2048" "$("$bench" --shape 1x128x128,8x2048x2048 --list)"
check "a split sweep" 1 "$("$bench" --splits 1,2,4,8 --only 'dense 64x2112x7168' --list | wc -l)"
check "shapes and --only" "dense 8x2048x2048" "$("$bench" --shape 1x128x128,8x2048x2048 --only 'dense 8x' --list)"
check "a clean flush" 2 "$("$bench" --flush clean --only decode --list | wc -l)"
check "the memory floor" 2 "$("$bench" --sol --only decode --list | wc -l)"
check "DeepGEMM's protocol" 2 "$("$bench" --protocol deepgemm --only decode --list | wc -l)"
for bad in "--only nothing-matches" "--bogus 1" "--reps" "--reps 0" "--reps 3x" "--tile-n 48" "--kinds rows512" \
           "--flush warm" "--protocol cutlass" \
           "--splits 0" "--splits 9" "--splits 2x" \
           "--shape 0x1x1" "--kernel fast" "--b-scales row" "--list extra"; do
  # shellcheck disable=SC2086 # the words are the arguments
  err="$("$bench" $bad --list 2>&1 >/dev/null)"
  rc=$?
  check "refused: $bad (exit 2, a message)" "2 yes" "$rc $([ -n "$err" ] && echo yes || echo no)"
done
exit $fail
