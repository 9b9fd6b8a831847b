# Sourced by the device-call scripts of this folder that pack their own logs (session 8 on):
#   source "$(dirname "$0")/lib.sh" && call_setup NAME
# moves to the repository root, loads the bundle's environment (.gpu/gpu_env.sh), makes a
# fresh folder $o for the call's logs and defines pack, which leaves them packed as
# $OUT/NAME.tar.gz (run it after every step: a call killed at its time limit still returns
# what it had).
call_setup() {
  call_name="$1"
  cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1
  source .gpu/gpu_env.sh
  call_final="${OUT:-/tmp}"
  o="$(mktemp -d)"
  # The archive's root entry carries this folder's mode: mktemp's 0700, unpacked over an
  # existing folder (say -C /tmp), would take that folder's sticky world-writable mode away.
  chmod 755 "$o"
}
pack() { tar -C "$o" -czf "$o.tgz" . && mv -f "$o.tgz" "$call_final/$call_name.tar.gz"; }
# bench_passes LOG PASSES TIMEOUT_S BUILD [gemm_bench arguments...]: .gpu/bin/BUILD --kernel
# wgmma --reps 10 ARGS, PASSES times, each table to $o/LOG-pass<i>.log, its rows echoed and
# the logs packed after every pass.
bench_passes() {
  local log="$1" passes="$2" limit="$3" build="$4" pass
  shift 4
  for pass in $(seq "$passes"); do
    timeout -s KILL "$limit" ".gpu/bin/$build" --kernel wgmma --reps 10 "$@" >"$o/$log-pass$pass.log" 2>&1
    echo "## $log pass $pass ($build $*): rc=$?"
    grep -E "^(dense|stacked|decode|  )" "$o/$log-pass$pass.log" | cut -c1-220
    pack
  done
}
