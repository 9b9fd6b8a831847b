"""Weights at the speed of memory and disk (issue 41, docs/bench/weights_io.md): on this
machine, in one run,
  1. registration of FP8 weights over shared memory (the gemmd package), timed from the
     call to its answer: without --weight-dir, then with it (each weight written and
     fsync'ed before the answer); and of BF16 weights, which gemmd quantizes (GB/s of
     the BF16 bytes sent);
  2. a plain read of the weight files (page cache warm), the floor to compare with;
  3. a restart: the restore as gemmd logs it ("weights restored ... ms=") and the time
     until it serves.

    python3 tools/bench/weights_io.py [--backend cpu] [--weights 4] [--mib 256] [--json F]

Binaries come from $GEMMD_BIN_DIR (the GPU bundle) or bazel-bin/ (build -c opt first)."""

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))

import harness as H  # noqa: E402


def read_all(paths, chunk=8 << 20):
    """Bytes read and seconds taken to read every file whole."""
    total, t = 0, time.perf_counter()
    buf = bytearray(chunk)
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while True:
                n = f.readinto(buf)
                if not n:
                    break
                total += n
    return total, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--weights", type=int, default=4)
    ap.add_argument("--mib", type=int, default=256, help="size of each weight (N = K = sqrt)")
    ap.add_argument("--json", default=None)
    o = ap.parse_args()
    import ml_dtypes
    import numpy as np

    import gemmd

    side = int((o.mib << 20) ** 0.5)
    rng = np.random.default_rng(5)
    wdir = tempfile.mkdtemp(prefix="gemmd-weights-")
    sock = "/tmp/gemmd-wio-%d.sock" % os.getpid()
    common = ["--backend", o.backend, "--weight-dir", wdir, "--shm-socket", sock,
              "--weight-memory-bytes", str((o.weights * o.mib + 1024) << 20)]
    out = {"weights": o.weights, "bytes_each": side * side, "backend": o.backend}
    weights = [(rng.integers(0, 0x70, (side, side), dtype=np.uint8)).view(ml_dtypes.float8_e4m3fn)
               for _ in range(o.weights)]

    def register(d, ws=weights):
        """Seconds each registration took, from the call to its answer."""
        took = []
        with gemmd.Client("unix://" + sock, arena_bytes=(max(w.nbytes for w in ws) + (64 << 20))) as c:
            for i, w in enumerate(ws):
                t = time.perf_counter()
                c.register_weight("w%d" % i, w)
                took.append(time.perf_counter() - t)
        assert d.stop() == 0
        return took
    try:
        nodir = register(H.Gemmd(*[a for a in common if a != wdir and a != "--weight-dir"]))
        bf16 = [rng.standard_normal((side, side), dtype=np.float32).astype(ml_dtypes.bfloat16) for _ in range(2)]
        reg_bf16 = register(H.Gemmd(*[a for a in common if a != wdir and a != "--weight-dir"]), bf16)
        del bf16
        d = H.Gemmd(*common)
        reg = register(d)
        files = sorted(os.path.join(wdir, f) for f in os.listdir(wdir) if f.endswith(".gemmdw"))
        read_all(files)  # warm the page cache
        nbytes, read_s = read_all(files)
        t = time.perf_counter()
        d = H.Gemmd(*common)
        serving_s = time.perf_counter() - t
        log = d.log_text()
        assert d.stop() == 0
        m = re.search(r'msg="weights restored" .*loaded=(\d+) .*ms=([0-9.]+)', log)
        restored, restore_ms = int(m.group(1)), float(m.group(2))
        each = side * side
        out.update({
            "register_no_dir_s": nodir, "register_no_dir_gb_s": [each / s / 1e9 for s in nodir],
            "register_s": reg, "register_gb_s": [each / s / 1e9 for s in reg],
            "register_bf16_s": reg_bf16, "register_bf16_gb_s": [2 * each / s / 1e9 for s in reg_bf16],
            "file_bytes": nbytes, "plain_read_gb_s": nbytes / read_s / 1e9,
            "restored": restored, "restore_ms": restore_ms, "restore_gb_s": nbytes / (restore_ms / 1e3) / 1e9,
            "start_to_serving_s": serving_s,
        })
    finally:
        shutil.rmtree(wdir, ignore_errors=True)
    print("| backend | weights | registration over shm | BF16 registration (BF16 bytes) | with --weight-dir (fsync) | plain read | restore | start to serving |")
    print("| %s | %d x %d MiB | %s GB/s | %s GB/s | %s GB/s | %.2f GB/s | %.2f GB/s (%d weights, %.0f ms) | %.2f s |" % (
        o.backend, o.weights, each >> 20, " ".join("%.2f" % g for g in out["register_no_dir_gb_s"]),
        " ".join("%.2f" % g for g in out["register_bf16_gb_s"]),
        " ".join("%.2f" % g for g in out["register_gb_s"]), out["plain_read_gb_s"], out["restore_gb_s"],
        restored, restore_ms, serving_s))
    if o.json:
        with open(o.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
