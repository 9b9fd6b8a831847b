#!/usr/bin/env bash
# Checks the image deploy/image/build.sh made, on the CPU backend:
#  1. with podman, where this machine can run containers: load the archive, run gemmd as
#     the image's user, and check it from the host (gemmctl gemm --check, /readyz);
#  2. always, the image's root filesystem under chroot, as the image's user (uid 998):
#     gemmd starts and serves, its own gemmctl checks a GEMM against FP64, its Python
#     client checks one against numpy, and /readyz answers.
# Where podman cannot run a container here, it says what failed and step 2 stands in.
#   deploy/image/test_image.sh [OUT]      # OUT as given to build.sh (default /tmp/gemmd-image)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=$(realpath -m "${1:-/tmp/gemmd-image}")
failed=0
say() { echo "test_image: $*"; }

wait_for() { # $1: log file; waits for gemmd's "serving" line, prints its ports
  for _ in $(seq 300); do
    if grep -q 'msg="serving"' "$1" 2>/dev/null; then
      sed -n 's/.*msg="listening" grpc_port=\([0-9]*\) metrics_port=\([0-9]*\).*/\1 \2/p' "$1"
      return 0
    fi
    sleep 0.1
  done
  return 1
}

# ---- 1. podman ------------------------------------------------------------------------
if command -v podman >/dev/null; then
  if podman load -q -i "$out/gemmd-oci.tar" >/tmp/gemmd-podman.log 2>&1 &&
     podman run --rm -d --name gemmd-image-test --network host --ulimit host localhost/gemmd:0.1.0 \
       --backend cpu --grpc-listen 127.0.0.1:50151 --metrics-listen 127.0.0.1:9564 --shm-socket "" \
       >>/tmp/gemmd-podman.log 2>&1; then
    sleep 3
    if bazel-bin/client/gemmctl/gemmctl --addr 127.0.0.1:50151 gemm --m 4 --n 64 --k 256 --check; then
      say "podman: gemmd in the container served a checked GEMM"
    else
      say "podman: the container started but did not serve"; failed=1
    fi
    podman stop -t 30 gemmd-image-test >/dev/null 2>&1
  else
    say "podman cannot run the image here: $(tail -n 3 /tmp/gemmd-podman.log | tr '\n' ' ')"
  fi
else
  say "podman is not installed: skipping the container run"
fi

# ---- 2. the root filesystem under chroot -----------------------------------------------
root=$(mktemp -d /tmp/gemmd-rootfs.XXXXXX)
trap 'umount "$root/proc" "$root/dev" 2>/dev/null; rm -rf "$root"' EXIT
tar -C "$root" -xf "$out/rootfs.tar"
mount -t proc proc "$root/proc" && mount --bind /dev "$root/dev" || { say "cannot mount /proc, /dev in the chroot"; exit 1; }
log="$root/var/lib/gemmd/gemmd.log"
chroot --userspec=998:998 "$root" /opt/gemmd/bin/gemmd --config /etc/gemmd/gemmd.conf --backend cpu \
  --grpc-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --shm-socket /run/gemmd/gemmd.sock \
  --weight-dir /var/lib/gemmd/weights 2>"$log" &
pid=$!
if ! ports=$(wait_for "$log"); then
  say "chroot: gemmd did not start:"; cat "$log"; exit 1
fi
read -r grpc metrics <<<"$ports"
say "chroot: gemmd serves as uid 998 (gRPC $grpc, metrics $metrics): $(grep -o 'msg="engine ready".*' "$log")"
inside() { chroot --userspec=998:998 "$root" env HOME=/var/lib/gemmd "$@"; }
inside /opt/gemmd/bin/gemmctl --addr "127.0.0.1:$grpc" gemm --m 4 --n 64 --k 256 --check || failed=1
inside /opt/gemmd/bin/gemmctl --addr unix:///run/gemmd/gemmd.sock gemm --m 4 --n 64 --k 256 --check || failed=1
inside python3 - "$grpc" <<'PY' || failed=1
import sys

import ml_dtypes
import numpy as np

import gemmd

rng = np.random.default_rng(1)
w = rng.standard_normal((64, 256)).astype(np.float32)
a = rng.standard_normal((4, 256)).astype(np.float32)
for addr in ("127.0.0.1:" + sys.argv[1], "unix:///run/gemmd/gemmd.sock"):
    with gemmd.Client(addr) as c:
        info = c.register_weight("w-" + c.transport, w)
        d = c.gemm(a, info, out_dtype="fp32")
        qa, qw = gemmd.quantize(a, "1x128"), gemmd.quantize(w, "128x128")
        ref = gemmd.dequantize(qa).astype(np.float64) @ gemmd.dequantize(qw).astype(np.float64).T
        err = np.linalg.norm(d - ref) / np.linalg.norm(ref)
        print("test_image: python client over %s: relative error %.2e" % (c.transport, err))
        assert err < 1e-4, err
print("test_image: ml_dtypes", ml_dtypes.__version__, "numpy", np.__version__)
PY
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$metrics/readyz")
[ "$code" = 200 ] || { say "chroot: /readyz answered $code"; failed=1; }
kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" = 0 ] || { say "chroot: gemmd exited $rc after SIGTERM"; failed=1; }
say "rootfs $(du -sh --exclude=./proc "$out/rootfs.tar" | cut -f1) as a tar, archive $(du -h "$out/gemmd-oci.tar" | cut -f1)"
if [ "$failed" = 0 ]; then say "ok"; else say "FAILED"; fi
exit "$failed"
