#!/usr/bin/env bash
# Builds every fuzz target with clang's libFuzzer, AddressSanitizer and UBSan, straight from
# the sources (no Bazel): the daemon's pure parts, the kernels they use, and gemm.proto's
# protobuf-c code, generated here.
#
#   fuzz/build_libfuzzer.sh [OUT]          # OUT: default /tmp/gemmd-fuzz
#
# Needs (Debian 12): apt-get install -y clang libclang-rt-14-dev protobuf-c-compiler
# libprotobuf-c-dev. Then fuzz/run_libfuzzer.sh runs a target (see docs/security.md, Fuzzing).
# CC picks another clang; EXTRA_CFLAGS adds flags (e.g. -O2).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/gemmd-fuzz}
CC=${CC:-clang}
TARGETS="shm_hello shm_control shm_entry gemm_request register_weight http_request safetensors config"

mkdir -p "$OUT/gen" "$OUT/obj"
protoc-c --proto_path=proto --c_out="$OUT/gen" proto/gemmd/v1/gemm.proto

CFLAGS=(-std=c11 -D_GNU_SOURCE -O1 -g -fno-omit-frame-pointer -Wall -Wno-unused-parameter
        -I. -Iproto -I"$OUT/gen" -fno-sanitize-recover=all)
# shellcheck disable=SC2206  # EXTRA_CFLAGS: flags separated by spaces
CFLAGS+=(${EXTRA_CFLAGS:-})
# Instrumented for coverage and the sanitizers; the fuzzer's main comes in at the link.
LIB_SAN=-fsanitize=fuzzer-no-link,address,undefined
BIN_SAN=-fsanitize=fuzzer,address,undefined

LIB_SRCS=(
  kernels/errors.c kernels/operand.c kernels/quantize.c
  daemon/config.c daemon/hashmap.c daemon/http_parse.c daemon/json.c daemon/log.c
  daemon/register_wire.c daemon/request.c daemon/request_build.c daemon/rpc_decode.c daemon/safetensors.c
  daemon/shm_check.c daemon/validate.c daemon/weight.c daemon/weights.c
  "$OUT/gen/gemmd/v1/gemm.pb-c.c"
)
objs=()
for src in "${LIB_SRCS[@]}"; do
  obj="$OUT/obj/$(basename "${src%.c}").o"
  extra=()
  [ "$src" = kernels/operand.c ] && extra=(-include fuzz/cpu_supports.h)
  "$CC" "${CFLAGS[@]}" $LIB_SAN "${extra[@]}" -c "$src" -o "$obj"
  objs+=("$obj")
done
rm -f "$OUT/libgemmd_fuzz.a"
ar rcs "$OUT/libgemmd_fuzz.a" "${objs[@]}"

for t in $TARGETS; do
  "$CC" "${CFLAGS[@]}" $BIN_SAN "fuzz/${t}_fuzz.c" "$OUT/libgemmd_fuzz.a" \
    -lprotobuf-c -lm -lpthread -o "$OUT/$t"
  echo "built $OUT/$t"
done
