"""A root filesystem tar as a one-layer OCI image archive (image-spec 1.0 layout in a tar),
with gemmd's run-time configuration: the gemmd user, its entrypoint and ports. podman load,
skopeo copy oci-archive:... and registry clients take it.

    python3 oci_archive.py ROOTFS.tar OUT.tar --tag gemmd:0.1.0
"""

import argparse
import gzip
import hashlib
import json
import os
import shutil
import tarfile
import tempfile


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rootfs")
    ap.add_argument("out")
    ap.add_argument("--tag", default="gemmd:latest")
    o = ap.parse_args()
    _, _, tag = o.tag.partition(":")
    with tempfile.TemporaryDirectory() as tmp:
        blobs = os.path.join(tmp, "blobs", "sha256")
        os.makedirs(blobs)
        # The layer: the root filesystem, gzipped with no timestamp (same input, same digest).
        layer = os.path.join(tmp, "layer.tar.gz")
        with open(o.rootfs, "rb") as src, open(layer, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz:
                shutil.copyfileobj(src, gz, 1 << 20)
        diff_id, layer_digest = sha256_file(o.rootfs), sha256_file(layer)
        shutil.move(layer, os.path.join(blobs, layer_digest))

        def blob(obj):
            data = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
            digest = hashlib.sha256(data).hexdigest()
            with open(os.path.join(blobs, digest), "wb") as f:
                f.write(data)
            return digest, len(data)

        config = {
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "User": "998:998",
                "Entrypoint": ["/opt/gemmd/bin/gemmd"],
                "Cmd": ["--config", "/etc/gemmd/gemmd.conf"],
                "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        # The host's GPU driver, mounted by the NVIDIA container toolkit.
                        "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"],
                "ExposedPorts": {"50051/tcp": {}, "9464/tcp": {}},
                "WorkingDir": "/var/lib/gemmd",
                "StopSignal": "SIGTERM",
                "Labels": {"org.opencontainers.image.title": "gemmd",
                           "org.opencontainers.image.description": "FP8 GEMM service (gRPC, shared memory)",
                           "org.opencontainers.image.version": tag},
            },
            "rootfs": {"type": "layers", "diff_ids": ["sha256:" + diff_id]},
            "history": [{"created_by": "deploy/image/build.sh (mmdebstrap, Debian 12)"}],
        }
        cfg_digest, cfg_size = blob(config)
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": "sha256:" + cfg_digest, "size": cfg_size},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": "sha256:" + layer_digest,
                        "size": os.path.getsize(os.path.join(blobs, layer_digest))}],
        }
        man_digest, man_size = blob(manifest)
        index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                 "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                "digest": "sha256:" + man_digest, "size": man_size,
                                "annotations": {"org.opencontainers.image.ref.name": tag or "latest",
                                                "io.containerd.image.name": o.tag}}]}
        with open(os.path.join(tmp, "index.json"), "w") as f:
            json.dump(index, f)
        with open(os.path.join(tmp, "oci-layout"), "w") as f:
            json.dump({"imageLayoutVersion": "1.0.0"}, f)
        with tarfile.open(o.out, "w") as t:
            for entry in ("oci-layout", "index.json", "blobs"):
                t.add(os.path.join(tmp, entry), arcname=entry)
    print("%s: %s (manifest sha256:%s, layer %.0f MiB)" % (o.out, o.tag, man_digest,
                                                          manifest["layers"][0]["size"] / 2**20))


if __name__ == "__main__":
    main()
