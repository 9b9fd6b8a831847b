"""Per-batch cost on the CUDA engine, graph replay vs eager launch, for batches of 1, 16
and 128 groups (each group its own 1024×1024 E4M3 weight, M=8), over shared memory.
Prints, per mode and group count, the median device time of a batch (compute_ns: upload,
quantize, GEMM, download) and the median wall time from submitting the batch to its last
completion. Run against a gemmd started with --backend cuda [--cuda-graphs off]:

    python3 tools/bench/gpu_graphs.py SOCKET LABEL [iterations] [groups,groups,...]

A batch that has not completed within 15 s is reported (with how many of its requests
did complete) and the script exits 2, so that a stuck engine shows up instead of hanging.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client", "python"))
import gemmd_shm as S  # noqa: E402


def main():
    sock, label = sys.argv[1], sys.argv[2]
    iters = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    group_counts = [int(x) for x in sys.argv[4].split(",")] if len(sys.argv) > 4 else [1, 16, 128]
    n = k = 1024
    m = 8
    c = S.Client(sock, arena_bytes=1 << 30, entries=256)
    rnd = os.urandom
    ids = []
    for i in range(max(group_counts)):
        data = bytes(b & 0x77 for b in rnd(n * k))  # finite E4M3 codes
        ids.append(c.register_weight("g%d-%d" % (os.getpid(), i), n, k, data, S.DTYPE_E4M3))
    top = max(group_counts)
    a = c.alloc(top * m * k)
    c.write(a, bytes(x & 0x77 for x in rnd(top * m * k)))
    d = c.alloc(top * m * n * 2)
    for groups in group_counts:
        dev, wall, seen_groups = [], [], []
        for it in range(iters + 3):
            entries, rids = [], []
            for g in range(groups):
                rid, raw = c.gemm_entry(m=m, k=k, a=(a + g * m * k, S.DTYPE_E4M3, 0, 0), weight_id=ids[g],
                                        d=d + g * m * n * 2, d_capacity=m * n * 2)
                entries.append(raw)
                rids.append(rid)
            t0 = time.perf_counter()
            c.submit_many(entries)
            comps = []
            try:
                for r in rids:
                    comps.append(c.wait(r, timeout=15.0))
            except Exception as exc:  # noqa: BLE001 - report and stop
                print("%-7s groups=%3d  STUCK at iteration %d: %d of %d requests completed (%s)" % (
                    label, groups, it, len(comps), groups, exc))
                sys.exit(2)
            t1 = time.perf_counter()
            assert all(x.status == 0 for x in comps), [x.message for x in comps if x.status]
            if it >= 3:  # warm-up excluded
                batch_ids = {x.batch_id for x in comps}
                dev.append(statistics.median(x.compute_ns for x in comps) / 1e3)
                wall.append((t1 - t0) * 1e6)
                seen_groups.append(max(x.batch_groups for x in comps) if len(batch_ids) == 1 else -len(batch_ids))
        print("%-7s groups=%3d  device %8.1f us  wall %8.1f us  (batches per submit: %s)" % (
            label, groups, statistics.median(dev), statistics.median(wall),
            "1" if min(seen_groups) > 0 else "several"))
        sys.stdout.flush()
    for wid in ids:
        c.unregister_weight(wid)
    c.close()


if __name__ == "__main__":
    main()
