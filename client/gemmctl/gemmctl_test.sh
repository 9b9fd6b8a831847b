#!/bin/bash
# gemmctl without gemmd: help and usage errors (exit 0 / 2), every command against a
# closed port failing with exit 1 and one "gemmctl: UNAVAILABLE: ..." line, the
# shared-memory transport refused as not built yet; then every command against the fake
# gemmd (fake_gemmd.c): output, JSON, --check, bench and its temporary weights.
set -u
GEMMCTL="$1"
FAKE_GEMMD="$2"
fails=0
out="$TEST_TMPDIR/out" err="$TEST_TMPDIR/err"

# expect EXIT_CODE STDERR_PATTERN ARGS...: runs gemmctl, checks the code and that stderr
# matches (an empty pattern means stderr must be empty).
expect() {
  local want=$1 pattern=$2
  shift 2
  timeout 20 "$GEMMCTL" "$@" >"$out" 2>"$err"
  local got=$?
  if [[ $got != "$want" ]]; then
    echo "FAIL: gemmctl $*: exit $got, want $want; stderr: $(cat "$err")"
    fails=$((fails + 1))
  elif [[ -z $pattern && -s $err ]]; then
    echo "FAIL: gemmctl $*: unexpected stderr: $(cat "$err")"
    fails=$((fails + 1))
  elif [[ -n $pattern ]] && ! grep -Eq "$pattern" "$err"; then
    echo "FAIL: gemmctl $*: stderr does not match '$pattern': $(cat "$err")"
    fails=$((fails + 1))
  elif [[ -n $pattern && $(wc -l <"$err") != 1 && $want != 0 ]] && [[ $* != *bench* ]]; then
    echo "FAIL: gemmctl $*: want one line on stderr: $(cat "$err")"
    fails=$((fails + 1))
  fi
}

expect 0 "" --help
grep -q "^usage: gemmctl" "$out" || { echo "FAIL: --help prints no usage"; fails=$((fails + 1)); }
for cmd in info stats weights gemm bench; do
  expect 0 "" "$cmd" --help
  grep -q "usage: gemmctl" "$out" || { echo "FAIL: $cmd --help"; fails=$((fails + 1)); }
done
expect 2 "^gemmctl: INVALID_ARGUMENT: no command"
expect 2 "^gemmctl: INVALID_ARGUMENT: weights: add, ls or rm" weights
expect 2 "^gemmctl: INVALID_ARGUMENT: unknown command 'frob'" frob
expect 2 "^gemmctl: INVALID_ARGUMENT: .*unknown flag '--bogus'" --bogus info
expect 2 "^gemmctl: INVALID_ARGUMENT: --timeout-ms" --timeout-ms soon info
expect 2 "^gemmctl: INVALID_ARGUMENT: gemm: name B once" gemm --m 1 --k 1
expect 2 "^gemmctl: INVALID_ARGUMENT: gemm: --check needs" gemm --m 1 --k 1 --weight w --check
expect 2 "^gemmctl: INVALID_ARGUMENT: gemm: --m" gemm --m 0 --k 1 --n 1
expect 2 "^gemmctl: INVALID_ARGUMENT: gemm: --out" gemm --m 1 --k 1 --n 1 --out e4m3
expect 2 "^gemmctl: INVALID_ARGUMENT: weights add: --shape" weights add w --file f --shape 3 --dtype e4m3
expect 2 "^gemmctl: INVALID_ARGUMENT: weights add: --scales" weights add w --file f --shape 3x4 --dtype e4m3 --layout row
expect 2 "^gemmctl: INVALID_ARGUMENT: weights rm" weights rm
expect 2 "^gemmctl: INVALID_ARGUMENT: weights rm" weights rm w --id 3
expect 2 "^gemmctl: INVALID_ARGUMENT: bench: --shape" bench --shape 1x2
expect 2 "^gemmctl: INVALID_ARGUMENT: bench: --transport shm needs a unix" --addr 127.0.0.1:1 bench --transport shm
expect 2 "^gemmctl: INVALID_ARGUMENT: bench: --transport grpc needs" --addr unix:///tmp/g.sock bench

down="^gemmctl: UNAVAILABLE: ."
expect 1 "$down" --addr 127.0.0.1:1 --timeout-ms 5000 info
expect 1 "$down" --addr 127.0.0.1:1 stats
expect 1 "$down" --addr 127.0.0.1:1 stats --json
expect 1 "$down" --addr 127.0.0.1:1 weights ls
expect 1 "$down" --addr 127.0.0.1:1 weights rm w
expect 1 "$down" --addr 127.0.0.1:1 gemm --m 2 --k 300 --n 5 --check
printf 'abcdef' >"$TEST_TMPDIR/w.bin"
expect 1 "$down" --addr 127.0.0.1:1 weights add w --file "$TEST_TMPDIR/w.bin" --shape 2x3 --dtype e4m3
expect 1 "^gemmctl: INVALID_ARGUMENT: .*6 bytes" --addr 127.0.0.1:1 weights add w --file "$TEST_TMPDIR/w.bin" --shape 2x4 --dtype e4m3
expect 1 "^gemmctl: NOT_FOUND: .*nope" --addr 127.0.0.1:1 weights add w --file "$TEST_TMPDIR/nope" --shape 2x3 --dtype e4m3
GEMMD_ADDR=127.0.0.1:1 expect 1 "$down" info
expect 1 "$down" --addr 127.0.0.1:1 bench --duration 0.2 --warmup 0 --quiet --shape 1x128x128
expect 1 "^gemmctl: UNAVAILABLE: cannot connect to /nonexistent/g.sock" --addr unix:///nonexistent/g.sock info
expect 1 "^gemmctl: UNAVAILABLE: cannot connect to /nonexistent/g.sock" --addr unix:///nonexistent/g.sock bench --transport shm
expect 1 "^gemmctl: NOT_FOUND: .*ca.pem" --tls-ca "$TEST_TMPDIR/ca.pem" --addr 127.0.0.1:1 info
expect 1 "^gemmctl: INVALID_ARGUMENT: .*w.bin: no PEM certificate" --tls-ca "$TEST_TMPDIR/w.bin" --addr 127.0.0.1:1 info

# ---- against the fake gemmd ----------------------------------------------------------
"$FAKE_GEMMD" >"$TEST_TMPDIR/fake.out" &
fake_pid=$!
trap 'kill $fake_pid 2>/dev/null' EXIT
for _ in $(seq 100); do
  grep -q listening "$TEST_TMPDIR/fake.out" && break
  sleep 0.1
done
addr=$(sed -n 's/^listening //p' "$TEST_TMPDIR/fake.out")
[[ -n $addr ]] || { echo "FAIL: fake_gemmd did not start"; exit 1; }
export GEMMD_ADDR=$addr

# expect_out PATTERN: the last command's stdout matches.
expect_out() {
  grep -Eq "$1" "$out" || { echo "FAIL: stdout lacks '$1': $(cat "$out")"; fails=$((fails + 1)); }
}

expect 0 "" info
expect_out "^health +SERVING"
expect_out "^version +fake"
expect_out "^uptime +1h 02m 03s"
expect 0 "" stats
expect_out "version fake, backend cpu"
expect 0 "" stats --json
expect_out '^\{"version":"fake","backend":"cpu",.*"device_memory_total_bytes":0,"loading":false,"startup_files":0,"startup_files_loaded":0,"startup_weights_loaded":0\}$'

# A 256×300 E4M3 weight with 2×3 block scales.
head -c $((256 * 300)) /dev/urandom | tr '\177\377' '\001\002' >"$TEST_TMPDIR/w.bin"
printf '\000\000\200\077%.0s' 1 2 3 4 5 6 >"$TEST_TMPDIR/s.bin"
expect 0 "" weights add w1 --file "$TEST_TMPDIR/w.bin" --shape 256x300 --dtype e4m3 \
  --layout 128x128 --scales "$TEST_TMPDIR/s.bin"
expect_out "^1 +w1 +256 +300 +e4m3 +128x128 +75.0 KiB"
expect 1 "^gemmctl: ALREADY_EXISTS: a weight named 'w1' exists$" weights add w1 \
  --file "$TEST_TMPDIR/w.bin" --shape 256x300 --dtype e4m3 --layout 128x128 --scales "$TEST_TMPDIR/s.bin"
expect 1 "^gemmctl: INVALID_ARGUMENT: .*s.bin: 24 bytes; the scale layout needs 1024" weights add w2 \
  --file "$TEST_TMPDIR/w.bin" --shape 256x300 --dtype e4m3 --layout row --scales "$TEST_TMPDIR/s.bin"
expect 0 "" weights ls
expect_out "^1 +w1 "
expect 0 "" weights ls --json
expect_out '^\[\{"weight_id":1,"name":"w1","n":256,"k":300,"dtype":"DTYPE_FP8_E4M3","scale_layout":"SCALE_LAYOUT_BLOCK_128X128","bytes":76800,"source":"registered"\}\]$'

expect 0 "" gemm --m 3 --k 300 --weight w1
expect_out "^d +3x256 DTYPE_BF16 \(1536 bytes\)"
expect_out "^server +queue 1.0 us, compute 2.0 us"
expect_out "^client +round trip [0-9.]+ us"
expect 0 "" gemm --m 3 --k 300 --weight-id 1 --out fp32 --seed 5
expect_out "^d +3x256 DTYPE_FP32"
expect 1 "^gemmctl: NOT_FOUND: no weight named 'nope'$" gemm --m 3 --k 300 --weight nope
expect 0 "" gemm --m 5 --k 300 --n 7 --check
expect_out "^check .*: ok$"
expect 0 "" gemm --m 5 --k 300 --n 7 --check --out fp32 --a-dtype bf16 --b-dtype e5m2 --b-layout row
expect_out "^check .*\(limit 1e-04\): ok$"
expect 0 "" gemm --m 2 --k 64 --n 3 --check --out fp16 --a-dtype fp32 --a-layout tensor

expect 0 "" bench --duration 0.5 --warmup 0.2 --concurrency 3 --shape 1x256x300,2x128x128 \
  --json "$TEST_TMPDIR/bench.json"
expect_out "^shape\(MxNxK\) +conc +requests +errors +req/s +GFLOP/s +p50_us +p90_us +p99_us +p99.9_us"
expect_out "^1x256x300 +3 +[1-9][0-9]* +0 "
expect_out "^2x128x128 +3 +[1-9][0-9]* +0 "
grep -Eq '^\[\{"shape":"1x256x300","m":1,"n":256,"k":300,"concurrency":3,"request_rate":0,"transport":"grpc","inline_b":false,.*\},\{"shape":"2x128x128",.*\}\]$' \
  "$TEST_TMPDIR/bench.json" || { echo "FAIL: bench JSON: $(cat "$TEST_TMPDIR/bench.json")"; fails=$((fails + 1)); }
expect 0 "" weights ls --json
expect_out '^\[\{"weight_id":1,"name":"w1",[^]]*\}\]$' # the bench weights are gone
expect 0 "bench 1x64x64 c=2: 1/1.5 s, [0-9]+ requests" bench --inline --duration 1.5 --warmup 0 --concurrency 2 \
  --shape 1x64x64 --json -
expect_out '^\[\{"shape":"1x64x64",.*"inline_b":true,.*\}\]$'
# A concurrency sweep: one row per C, the weight registered once.
expect 0 "" bench --duration 0.4 --warmup 0 --quiet --concurrency 1,2,4 --shape 2x64x64
expect_out "^2x64x64 +1 +[1-9][0-9]* +0 "
expect_out "^2x64x64 +2 +[1-9][0-9]* +0 "
expect_out "^2x64x64 +4 +[1-9][0-9]* +0 "
# Open loop: 100 req/s for 2 s is about 200 requests, whatever the server could do.
expect 0 "shape\\(MxNxK\\)" bench --duration 2 --warmup 0 --quiet --concurrency 2 --request-rate 100 --shape 2x64x64 --json -
n=$(grep -o '"requests":[0-9]*' "$out" | cut -d: -f2)
if ! grep -q '"request_rate":100' "$out" || [[ -z $n || $n -lt 180 || $n -gt 202 ]]; then
  echo "FAIL: open loop at 100 req/s for 2 s made ${n:-no} requests: $(cat "$out")"; fails=$((fails + 1))
fi
expect 2 "^gemmctl: INVALID_ARGUMENT: bench: --request-rate must be" bench --request-rate 0
expect 2 "^gemmctl: INVALID_ARGUMENT: bench: --concurrency must be" bench --concurrency 1,,2

# An FP8 checkpoint: tensor layer.w (4x256 E4M3) with its 128x128 scales in layer.w_scale_inv.
st="$TEST_TMPDIR/ckpt.safetensors"
python3 - "$st" <<'PY'
import json, struct, sys
hdr = {"layer.w": {"dtype": "F8_E4M3", "shape": [4, 256], "data_offsets": [0, 1024]},
       "layer.w_scale_inv": {"dtype": "F32", "shape": [1, 2], "data_offsets": [1024, 1032]},
       "other": {"dtype": "F32", "shape": [2], "data_offsets": [1032, 1040]}}
h = json.dumps(hdr).encode()
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + bytes([0x38] * 1024) + struct.pack("<4f", 0.5, 2.0, 1.0, 1.0))
PY
expect 0 "" weights add ckpt-w --safetensors "$st" --tensor layer.w
expect_out "^[0-9]+ +ckpt-w +4 +256 +e4m3 +128x128 "
expect 1 "^gemmctl: NOT_FOUND: weights add: .* has no 2-D FP8 tensor named 'nope'$" weights add x --safetensors "$st" --tensor nope
expect 2 "^gemmctl: INVALID_ARGUMENT: weights add: --safetensors takes the shape" weights add x --safetensors "$st" --shape 4x256
expect 0 "" weights rm ckpt-w

expect 0 "" weights rm w1
expect_out "^unregistered 'w1'$"
expect 1 "^gemmctl: NOT_FOUND: no such weight$" weights rm --id 1

if [[ $fails != 0 ]]; then
  echo "$fails failures"
  exit 1
fi
echo "gemmctl_test: ok"
