#!/usr/bin/env bash
# gemmd's OCI image, built from Debian packages without a container registry or daemon.
#
# mmdebstrap makes a Debian 12 root filesystem with what gemmd needs at run time (gRPC C
# core, protobuf-c, libuv; Python 3 with grpcio, protobuf and numpy for the client), and
# adds /opt/gemmd: gemmd and gemmctl (built here, -c opt), cuBLASLt from the CUDA toolkit
# (gemmd links the CUDA runtime statically; the driver, libcuda, comes from the host at run
# time, as the NVIDIA container toolkit mounts it), the Python client package with
# ml_dtypes, /etc/gemmd/gemmd.conf (deploy/gemmd.conf.example) and a non-root user gemmd
# (uid 998). oci_archive.py then writes it as an OCI archive that podman, skopeo or any
# registry client takes.
#
#   deploy/image/build.sh [OUT]      # OUT (default /tmp/gemmd-image): rootfs.tar, gemmd-oci.tar
#   podman load -i OUT/gemmd-oci.tar # or: skopeo copy oci-archive:OUT/gemmd-oci.tar docker://REGISTRY/gemmd:TAG
#
# Needs: apt-get install mmdebstrap, the Debian mirror, and for the GPU engine the CUDA
# toolkit at $CUDA_PATH (default /usr/local/cuda). Without it the image has the CPU backend only.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(realpath -m "${1:-/tmp/gemmd-image}")
version=$(sed -n 's/^#define GEMMD_VERSION "\(.*\)"/\1/p' daemon/version.h)
mkdir -p "$out"

echo "image: building gemmd $version (-c opt)"
bazel build -c opt //daemon:gemmd //client:gemmctl >/dev/null 2>&1 || bazel build -c opt //daemon:gemmd //client:gemmctl

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -D -m 0755 bazel-bin/daemon/gemmd "$stage/opt/gemmd/bin/gemmd"
install -D -m 0755 bazel-bin/client/gemmctl/gemmctl "$stage/opt/gemmd/bin/gemmctl"
strip --strip-debug "$stage/opt/gemmd/bin/gemmd" "$stage/opt/gemmd/bin/gemmctl"
mkdir -p "$stage/opt/gemmd/lib" "$stage/opt/gemmd/python"
# cuBLASLt: whatever of CUDA's libraries gemmd links (ldd), copied with their soname.
ldd bazel-bin/daemon/gemmd | awk '/=>/ {print $1, $3}' | while read -r name path; do
  case "$name" in libcublas*|libcudart*) cp -L "$path" "$stage/opt/gemmd/lib/$name" ;; esac
done
cp -r client/python/gemmd "$stage/opt/gemmd/python/gemmd"
find "$stage/opt/gemmd/python" -name __pycache__ -prune -exec rm -rf {} +
mlpath=$(/usr/bin/python3 -c 'import ml_dtypes, os; print(os.path.dirname(ml_dtypes.__file__))')
cp -r "$mlpath" "$stage/opt/gemmd/python/ml_dtypes"
install -D -m 0644 deploy/gemmd.conf.example "$stage/etc/gemmd/gemmd.conf"
echo /opt/gemmd/lib >"$stage/gemmd-ld.conf"

echo "image: root filesystem (mmdebstrap, Debian 12)"
mirror=${GEMMD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# --skip=cleanup/run keeps /run/gemmd, the shared-memory socket's directory, which gemmd
# (not root) cannot make itself.
mmdebstrap --variant=apt --quiet --skip=cleanup/run \
  --include=libgrpc29,libprotobuf-c1,libuv1,python3-minimal,python3-grpcio,python3-protobuf,python3-numpy,ca-certificates \
  --customize-hook="copy-in $stage/opt /" \
  --customize-hook="copy-in $stage/etc/gemmd /etc" \
  --customize-hook="upload $stage/gemmd-ld.conf /etc/ld.so.conf.d/gemmd.conf" \
  --customize-hook='chroot "$1" ldconfig' \
  --customize-hook='echo /opt/gemmd/python > "$1/usr/lib/python3/dist-packages/gemmd-client.pth"' \
  --customize-hook='chroot "$1" useradd --system --uid 998 --user-group --home-dir /var/lib/gemmd --shell /usr/sbin/nologin gemmd' \
  --customize-hook='mkdir -p "$1/var/lib/gemmd" "$1/run/gemmd" && chown 998:998 "$1/var/lib/gemmd" "$1/run/gemmd"' \
  --customize-hook='ln -s /opt/gemmd/bin/gemmd /opt/gemmd/bin/gemmctl "$1/usr/local/bin/"' \
  --customize-hook='rm -rf "$1/var/cache/apt/archives"/*.deb "$1/var/lib/apt/lists"/*' \
  bookworm "$out/rootfs.tar" "$mirror"

echo "image: OCI archive"
/usr/bin/python3 deploy/image/oci_archive.py "$out/rootfs.tar" "$out/gemmd-oci.tar" --tag "gemmd:$version"
ls -la "$out"
