"""The serving benchmark: many model workers, each its own process with its own weights,
against one gemmd, over shared memory and gRPC, with the C client (libgemmclient:
tools/bench/serving_worker.c) and the Python clients (client/python/gemmd_shm.py, grpcio).
Clients py-dev and c-dev keep A, its scales and D in their own GPU memory (torch CUDA
tensors; a cudaMalloc block) and name them as shared-memory regions (protocol version 2,
docs/shm-protocol.md §7): no byte of a request crosses PCIe. c-mem does the same with a
memfd region, which the CPU backend takes. c-stream is the C worker over gRPC in a GEMM
session (one GemmStream opened once, each answer taken on the worker's thread). pkg-shm and pkg-dev are Python workers on the
gemmd package (gemmd.Client over shm: a numpy Quantized A; an FP8 CUDA tensor A, named in
place, with D back as a CUDA tensor). Where torch with CUDA is present (the GPU machine), the
same work done two ways in the same run: one process sending one request at a time, and
one process that already holds every worker's requests (one grouped GEMM, the same host
copies); with --torch-device, the same two with the requests already on the GPU.

    python3 tools/bench/serving.py [--backend cpu|cuda] [--shape 8x4096x4096]
        [--weights 64] [--workers 1,8,16,32,64] [--clients c-shm,py-shm,c-grpc,py-grpc]
        [--seconds 3] [--torch] [--torch-device] [--gemmd-args "..."] [--churn C:W:N]
        [--mix DC:DW:PC:PW:MxNxK] [--profile] [--perf] [--json FILE]

Each row: req/s, weight GB/s (the weight bytes the requests name, per second), round-trip
p50/p99, HELLO/connect p50/p99, requests per batch, and per batch the stages of
gemmd_batch_stage_seconds_total (µs) and the GEMM kernels' share
(gemmd_batch_gemm_seconds_total), all taken from /metrics at the window's two ends.
Every worker connects and warms up before the window, which starts only when all of them
have said they are ready (a torch worker takes seconds to start); the window is the same for
all. Before each row's table line: the machine's busy cores and gemmd's threads, and the
workers' own CPU over the window (cores, and µs of CPU a request); with --perf, where every
CPU's time went over the window (perf's cpu-clock samples by thread name, library and
symbol: gRPC core in the clients, gemmd's completion-queue threads, the kernel...).
Binaries come from $GEMMD_BIN_DIR (the GPU bundle) or bazel-bin/.

    python3 tools/bench/serving.py worker ADDRESS M K IDS START_AT SECONDS

is the Python worker (the C one takes the same arguments); START_AT "-" means: print
"ready" once warm and read START_AT from stdin.
"""

import argparse
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))

STAGES = ("to_engine", "host_staging", "device", "completion_notice", "to_finisher", "to_loop", "answer")


def binary(name):
    d = os.environ.get("GEMMD_BIN_DIR")
    for p in ([os.path.join(d, name)] if d else []) + [
            os.path.join(ROOT, "bazel-bin", "tools", "bench", name),
            os.path.join(ROOT, "bazel-bin", "daemon", name),
            os.path.join(ROOT, "tools", "bench", name),  # Bazel's runfiles (serving_test)
            os.path.join(ROOT, "daemon", name)]:
        if os.path.exists(p):
            return p
    raise FileNotFoundError(name + " (build it: bazel build -c opt //tools/bench:serving_worker)")


# ---- Workers ---------------------------------------------------------------------------------


def e4m3_random(rng, n):
    """n random finite E4M3 codes."""
    import numpy as np

    return (rng.integers(0, 0x70, n, dtype=np.uint8) | (rng.integers(0, 2, n, dtype=np.uint8) << 7))


WARM_CALLS = 3  # answered requests before a worker says it is ready (D sized, regions open)


def py_worker(addr, m, k, ids, start_at, seconds):
    import numpy as np

    rng = np.random.default_rng()
    a_bytes = e4m3_random(rng, m * k).tobytes()
    kb = (k + 127) // 128
    scales = np.full(m * kb, 1.0 / 64, dtype=np.float32).tobytes()
    end_at = float("inf") if start_at is None else start_at + seconds
    lat, errors, first_error = [], 0, ""
    t = time.monotonic_ns()
    if addr.startswith(("pkg://", "pkgdev://")):
        # The gemmd package as a model worker would call it: a Quantized A (numpy), or an
        # FP8 CUDA tensor with its 1x128 scales on the GPU (named where it lies; D comes
        # back as a CUDA tensor).
        import gemmd

        c = gemmd.Client("unix://" + addr.split("://", 1)[1])
        connect_ns = time.monotonic_ns() - t
        import ml_dtypes

        q = gemmd.Quantized(np.frombuffer(a_bytes, dtype=ml_dtypes.float8_e4m3fn).reshape(m, k),
                            np.frombuffer(scales, dtype=np.float32).reshape(m, kb).copy(), gemmd.ScaleLayout.BLOCK_1X128)
        if addr.startswith("pkgdev://"):
            import torch

            q = gemmd.Quantized(torch.from_numpy(q.data.view(np.uint8).copy()).view(torch.float8_e4m3fn).cuda(),
                                torch.from_numpy(q.scales).cuda(), gemmd.ScaleLayout.BLOCK_1X128)

        def call(wid):
            return c.gemm(q, wid)
    elif addr.startswith("unixdev://"):
        import gemmd_shm as shm
        import torch

        c = shm.Client(addr[len("unixdev://"):], version=2)
        connect_ns = time.monotonic_ns() - t
        n = c.weight_info(ids[0])[1]

        from gemmd import _cuda

        def region(data):
            """bytes → a CUDA tensor, its allocation opened as a region (as the gemmd package
            does): (tensor, region id, offset in it)."""
            t = torch.frombuffer(bytearray(data), dtype=torch.uint8).cuda()
            alloc = _cuda.allocation(t.data_ptr())
            rid = c.open_region_ipc(_cuda.ipc_handle(alloc.base), alloc.size)
            return t, rid, t.data_ptr() - alloc.base
        ta, ra, oa = region(a_bytes)
        ts, rs, os_ = region(scales)
        td, rd, od = region(bytes(m * n * 2))
        torch.cuda.synchronize()

        def call(wid):
            torch.cuda.current_stream().synchronize()  # A complete before the entry (§7)
            r = c.wait(c.gemm_async(m=m, k=k, a=(oa, shm.DTYPE_E4M3, shm.LAYOUT_1X128, os_), weight_id=wid, d=od,
                                    d_capacity=m * n * 2, out_dtype=shm.DTYPE_BF16, regions=(ra, rs, rd)))
            if r.status != 0:
                raise RuntimeError("%d: %s" % (r.status, r.message))
            return td  # D stays on the GPU, where the worker's next layer reads it
    elif addr.startswith("unix://"):
        import gemmd_shm as shm

        c = shm.Client(addr[len("unix://"):])
        connect_ns = time.monotonic_ns() - t
        a_off = c.alloc(len(a_bytes))
        c.write(a_off, a_bytes)
        s_off = c.alloc(len(scales))
        c.write(s_off, scales)
        d_cap = 64 << 20
        d_off = c.alloc(d_cap)
        arena = memoryview(c.arena)

        def call(wid):
            r = c.wait(c.gemm_async(m=m, k=k, a=(a_off, shm.DTYPE_E4M3, shm.LAYOUT_1X128, s_off),
                                    weight_id=wid, d=d_off, d_capacity=d_cap, out_dtype=shm.DTYPE_BF16))
            if r.status != 0:
                raise RuntimeError("%d: %s" % (r.status, r.message))
            return arena[d_off:d_off + r.d_bytes]  # a view of D (no copy), as numpy.frombuffer gives
    else:
        import grpc
        import harness

        pb, pbg, _, _ = harness.stubs()
        ch = grpc.insecure_channel(addr, options=[("grpc.max_receive_message_length", 1 << 30),
                                                  ("grpc.max_send_message_length", 1 << 30)])
        grpc.channel_ready_future(ch).result(timeout=30)
        stub = pbg.GemmServiceStub(ch)
        connect_ns = time.monotonic_ns() - t
        a = pb.Matrix(rows=m, cols=k, dtype=pb.DTYPE_FP8_E4M3, data=a_bytes,
                      scale_layout=pb.SCALE_LAYOUT_BLOCK_1X128,
                      scales=np.frombuffer(scales, dtype=np.float32).tolist())

        def call(wid):
            return stub.Gemm(pb.GemmRequest(weight_id=wid, a=a, out_dtype=pb.DTYPE_BF16)).d.data
    i, answered, warm_until = 0, 0, time.time() + 120
    prof = None
    while True:
        now = time.time()
        if now >= end_at or (start_at is None and answered < WARM_CALLS and now >= warm_until):
            break
        t0 = time.monotonic_ns()
        try:
            call(ids[i % len(ids)])
        except Exception as e:  # noqa: BLE001 - counted and reported, the worker goes on
            errors += start_at is not None and now >= start_at
            first_error = first_error or str(e)[:300]
            continue
        finally:
            i += 1
        answered += 1
        if start_at is None and answered == WARM_CALLS:  # warm: the window's start comes on stdin
            print("ready", flush=True)
            start_at = float(sys.stdin.readline())
            end_at = start_at + seconds
        if start_at is not None and now >= start_at:
            lat.append(time.monotonic_ns() - t0)
            if prof is None and os.environ.get("GEMMD_BENCH_PROFILE"):  # the window's calls only
                import cProfile

                prof = cProfile.Profile()
                prof.enable()
    if prof is not None:
        import io
        import pstats

        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
        print("## profile (cProfile of this worker's window, %d calls; its overhead inflates the times)\n%s"
              % (len(lat), text.getvalue().strip()), file=sys.stderr)
    print(json.dumps({"connect_ns": connect_ns, "requests": len(lat), "errors": errors,
                      "first_error": first_error, "lat_ns": lat}))


# ---- The daemon and its numbers ---------------------------------------------------------------


def metrics(port):
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    out = {}
    for line in body.splitlines():
        mm = re.match(r'^(gemmd_[a-z_]+)(\{[^}]*\})? (\S+)$', line)
        if mm:
            out[mm.group(1) + (mm.group(2) or "")] = float(mm.group(3))
    return out


def register_weights(sock, n_weights, n, k, prefix="serving"):
    """n_weights random E4M3 N×K weights with 128×128 scales; their ids."""
    import numpy as np

    import gemmd_shm as shm

    rng = np.random.default_rng(7)
    ids = []
    per = n * k
    with shm.Client(sock, arena_bytes=max(256 << 20, (per * 5 // 4 + (1 << 20)) // 4096 * 4096 + 4096)) as c:
        for i in range(n_weights):
            data = e4m3_random(rng, per).tobytes()
            ns = ((n + 127) // 128) * ((k + 127) // 128)
            ids.append(c.register_weight("%s-%d" % (prefix, i), n, k, data, shm.DTYPE_E4M3,
                                         shm.LAYOUT_128X128, [1.0 / 32] * ns))
    return ids


def percentile(sorted_vals, q):
    if not sorted_vals:
        return float("nan")
    return sorted_vals[min(len(sorted_vals) - 1, int(q * len(sorted_vals)))]


def process_cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def processes_cpu_seconds(procs):
    """CPU seconds of the processes so far (0 for one that has already gone)."""
    total = 0.0
    for p in procs:
        try:
            total += process_cpu_seconds(p.pid)
        except OSError:  # it has gone
            pass
    return total


def thread_cpu_seconds(pid):
    """CPU seconds of each of gemmd's threads, summed by thread name."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                head, tail = f.read().rsplit(")", 1)
        except OSError:  # the thread ended
            continue
        name, fields = head.split("(", 1)[1], tail.split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def machine_cpu_seconds():
    """(busy, all) CPU seconds of the whole machine since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return (sum(v) - idle) / os.sysconf("SC_CLK_TCK"), sum(v) / os.sysconf("SC_CLK_TCK")


def churn_clients(sock, n, until, hello_ms, errors):
    """n threads that connect a shared-memory client (default arena), hold it 0.2 s,
    close it and connect again until `until`; HELLO round trips into hello_ms."""
    import threading

    import gemmd_shm as shm

    def loop():
        while time.time() < until - 0.25:
            t = time.monotonic()
            try:
                c = shm.Client(sock)
            except Exception as e:  # noqa: BLE001 - counted in the row
                errors.append(str(e)[:200])
                time.sleep(0.05)
                continue
            hello_ms.append((time.monotonic() - t) * 1e3)
            time.sleep(0.2)
            c.close()
    threads = [threading.Thread(target=loop, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    return threads


def start_workers(g, kind, workers, shape, ids, seconds):
    """`workers` processes of client `kind`, each cycling through its share of ids. Each
    warms up, prints "ready" and waits for the window's start on its stdin (start_window)."""
    m, n, k = shape
    lang, transport = kind.split("-")
    prefixes = {"shm": "unix://", "dev": "unixdev://", "mem": "unixmem://"}
    if lang == "pkg":
        prefixes = {"shm": "pkg://", "dev": "pkgdev://"}
    addr = prefixes[transport] + g.shm_socket if transport in prefixes else g.address
    if transport == "stream":
        if lang != "c":
            raise SystemExit("client %s: the GEMM session over a GemmStream is the C worker's (c-stream)" % kind)
        addr = "session:" + g.address
    if transport == "mem" and lang != "c":
        raise SystemExit("client %s: memfd regions are the C worker's (c-mem)" % kind)
    if lang == "pkg" and transport not in prefixes:
        raise SystemExit("client %s: the package's rows are pkg-shm and pkg-dev" % kind)
    per = max(1, len(ids) // workers)
    procs = []
    for w in range(workers):
        mine = [ids[(w * per + j) % len(ids)] for j in range(per)]
        args = [addr, str(m), str(k), ",".join(map(str, mine)), "-", str(seconds)]
        cmd = [binary("serving_worker")] + args if lang == "c" else \
            [sys.executable, os.path.abspath(__file__), "worker"] + args
        procs.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    return procs


def start_window(procs, timeout=180.0):
    """Waits until every worker is warm (its "ready" line; a worker that exits or says
    anything else instead is left out and its output kept for collect), then gives them
    all one start, a little ahead. Returns the start (time.time() seconds)."""
    deadline, waiting, early = time.time() + timeout, {p.stdout.fileno(): p for p in procs}, {}
    while waiting and time.time() < deadline:
        ready, _, _ = select.select(list(waiting), [], [], max(0.0, deadline - time.time()))
        for fd in ready:
            p = waiting.pop(fd)
            line = p.stdout.readline()
            if line.strip() != "ready":
                early[p] = line
    start_at = time.time() + 0.2
    for p in procs:
        if p.stdout.fileno() in waiting or p in early:
            continue
        try:
            p.stdin.write("%.6f\n" % start_at)
            p.stdin.flush()
        except BrokenPipeError:
            pass
    for p in waiting.values():  # never warm: stopped, counted as failed in collect
        p.kill()
    for p, line in early.items():
        p.early_output = line
    return start_at


def collect(procs):
    """The workers' sorted latencies (ns), connect times, request and error counts; the
    first worker's profile (--profile), printed."""
    lat, connect, errors, first_error, requests, profiled = [], [], 0, "", 0, False
    for p in procs:
        out, err = p.communicate(timeout=120)
        if "## profile" in err and not profiled:
            print(err[err.index("## profile"):].strip(), flush=True)
            profiled = True
        out = getattr(p, "early_output", "") + out
        if p.returncode != 0 or not out.strip():
            errors += 1
            first_error = first_error or ("worker exit %s: %s" % (p.returncode, err.strip()[-300:]))
            continue
        r = json.loads(out.strip().splitlines()[-1])
        lat += r["lat_ns"]
        connect.append(r["connect_ns"])
        errors += r["errors"]
        requests += r["requests"]
        first_error = first_error or r["first_error"]
    lat.sort()
    connect.sort()
    return lat, connect, requests, errors, first_error


def group_row(label, workers, shape, seconds, got):
    lat, connect, requests, errors, first_error = got
    m, n, k = shape
    return {
        "client": label, "workers": workers, "shape": "%dx%dx%d" % shape,
        "req_s": requests / seconds, "errors": errors, "first_error": first_error,
        "weight_gb_s": requests / seconds * n * k / 1e9,
        "p50_us": percentile(lat, 0.50) / 1e3, "p99_us": percentile(lat, 0.99) / 1e3,
        "mean_us": sum(lat) / len(lat) / 1e3 if lat else float("nan"),
        "connect_p50_ms": percentile(connect, 0.5) / 1e6, "connect_max_ms": (connect[-1] if connect else 0) / 1e6,
    }


def add_metrics(row, m0, m1, seconds, cpu_cores):
    def d(key):
        return m1.get(key, 0.0) - m0.get(key, 0.0)
    batches = d("gemmd_batch_stage_batches_total")
    row["req_per_batch"] = (d("gemmd_batch_requests_sum") / d("gemmd_batch_requests_count")
                            if d("gemmd_batch_requests_count") else 0.0)
    row["gemmd_cpu_cores"] = cpu_cores
    row["gemm_busy"] = d("gemmd_batch_gemm_seconds_total") / seconds
    for s in STAGES:
        row[s + "_us"] = d('gemmd_batch_stage_seconds_total{stage="%s"}' % s) / batches * 1e6 if batches else 0.0
    row["gemm_us"] = d("gemmd_batch_gemm_seconds_total") / batches * 1e6 if batches else 0.0
    # gemmd's own share of a request's round trip: arrival to answer, mean over the window
    kind = row["client"].split(":")[-1].strip().split(" ")[0]
    transport = "shm" if kind.split("-")[-1] in ("shm", "dev", "mem") else "grpc"
    n = d('gemmd_request_duration_seconds_count{transport="%s"}' % transport)
    row["gemmd_mean_us"] = d('gemmd_request_duration_seconds_sum{transport="%s"}' % transport) / n * 1e6 if n else 0.0
    return row


# --perf: the perf binary to sample the machine with during each window ($GEMMD_PERF, else
# perf on the PATH; tools/gpu/perf_bundle.sh carries one to the GPU machine), or None.
PERF = None


def perf_start(path, seconds):
    """perf sampling every CPU of the machine (cpu-clock, which needs no hardware counters)
    for `seconds`, into a file of its own; (perf, process, file)."""
    fd, out = tempfile.mkstemp(prefix="serving-perf-", suffix=".data")
    os.close(fd)
    p = subprocess.Popen([path, "record", "-a", "-e", "cpu-clock", "-F", "999", "-o", out, "--",
                          "sleep", "%.3f" % seconds], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return path, p, out


def perf_report(started):
    """Prints the window's samples by thread name, then by thread name and library, then the
    hottest symbols; each line's share is of all the machine's CPUs."""
    path, p, out = started
    _, err = p.communicate()
    if p.returncode != 0:
        why = err.strip().splitlines()[-1] if err.strip() else "exit status %d" % p.returncode
        print("# perf: record failed: %s" % why, flush=True)
        os.unlink(out)
        return
    for sort, limit, lines in (("comm", "0.5", 20), ("comm,dso", "0.4", 40), ("comm,dso,sym", "0.2", 60)):
        rep = subprocess.run([path, "report", "-i", out, "--stdio", "--sort", sort, "--percent-limit", limit],
                             capture_output=True, text=True)
        body = [ln.rstrip()[:170] for ln in rep.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
        print("# perf by %s (%% of every CPU's time over the window)" % sort, flush=True)
        for ln in body[:lines]:
            print("#   " + ln.strip(), flush=True)
    os.unlink(out)


def run_groups(g, groups, seconds, churn=0):
    """Rows for worker groups [(kind, workers, shape, ids)] run through the same window;
    with churn, that many more shared-memory clients connect and disconnect meanwhile.
    The gemmd-wide figures (stages, GEMM busy, CPU) are the window's, in every row."""
    # the previous point's clients gone first: 64 workers are exactly --shm-max-clients
    deadline = time.time() + 15
    while metrics(g.metrics_port).get("gemmd_shm_clients", 0) > 0 and time.time() < deadline:
        time.sleep(0.05)
    procs = [start_workers(g, kind, w, shape, ids, seconds) for kind, w, shape, ids in groups]
    start_at = start_window([p for ps in procs for p in ps])
    time.sleep(max(0.0, start_at - time.time()))
    hello_ms, churn_errors = [], []
    churners = churn_clients(g.shm_socket, churn, start_at + seconds, hello_ms, churn_errors) if churn else []
    m0, cpu0, t0 = metrics(g.metrics_port), process_cpu_seconds(g.proc.pid), time.monotonic()
    th0, mc0 = thread_cpu_seconds(g.proc.pid), machine_cpu_seconds()
    cl0 = [processes_cpu_seconds(ps) for ps in procs]
    perf = perf_start(PERF, max(0.1, start_at + seconds - time.time())) if PERF else None
    time.sleep(max(0.0, start_at + seconds - time.time()))
    m1, cpu1, t1 = metrics(g.metrics_port), process_cpu_seconds(g.proc.pid), time.monotonic()
    th1, mc1 = thread_cpu_seconds(g.proc.pid), machine_cpu_seconds()
    cl1 = [processes_cpu_seconds(ps) for ps in procs]
    threads = {k: (v - th0.get(k, 0.0)) / (t1 - t0) for k, v in th1.items() if v - th0.get(k, 0.0) > 0}
    machine_busy = (mc1[0] - mc0[0]) / (t1 - t0)
    print("# CPU cores: machine busy %.2f of %d; gemmd's threads: %s" % (
        machine_busy, os.cpu_count(), ", ".join("%s %.2f" % kv for kv in sorted(threads.items(), key=lambda kv: -kv[1]))),
        flush=True)
    if perf:
        perf_report(perf)
    rows = []
    for (kind, w, shape, _), ps, c0, c1 in zip(groups, procs, cl0, cl1):
        row = group_row(kind + (" +churn %d" % churn if churn else ""), w, shape, seconds, collect(ps))
        rows.append(add_metrics(row, m0, m1, seconds, (cpu1 - cpu0) / (t1 - t0)))
        clients = (c1 - c0) / (t1 - t0)
        row.update({"machine_busy_cores": machine_busy, "gemmd_thread_cores": threads,
                    "client_cpu_cores": clients,
                    "client_cpu_us_per_req": clients / row["req_s"] * 1e6 if row["req_s"] else 0.0})
        print("# clients' CPU: %s x%d %.2f cores, %.1f us a request" % (
            kind, w, clients, row["client_cpu_us_per_req"]), flush=True)
    for t in churners:
        t.join()
    hello_ms.sort()
    for row in rows:
        row.update({"churn_hellos": len(hello_ms), "churn_hello_p50_ms": percentile(hello_ms, 0.5),
                    "churn_hello_p99_ms": percentile(hello_ms, 0.99),
                    "churn_hello_max_ms": hello_ms[-1] if hello_ms else 0.0, "churn_errors": churn_errors[:3]})
    return rows


def run_point(g, kind, workers, shape, ids, seconds, churn=0):
    """One row: `workers` processes of client `kind` for `seconds`."""
    return run_groups(g, [(kind, workers, shape, ids)], seconds, churn)[0]


# ---- torch, the same work without gemmd -------------------------------------------------------


def torch_rows(shape, n_weights, worker_counts, seconds, on_device=False):
    """One process, one request at a time (H2D A, _scaled_mm, D2H, sync); and one process
    holding every worker's request: H2D of all A, one grouped GEMM, D2H, sync. on_device:
    the same with A and D already on the GPU (no copies)."""
    import torch

    m, n, k = shape
    dev = torch.device("cuda")
    f8 = torch.float8_e4m3fn
    w = (torch.randn(n_weights, n, k, device=dev) * 0.1).to(f8)  # each (N, K), row-major
    sw = torch.rand(n_weights, n, device=dev, dtype=torch.float32) + 0.5
    rows = []

    def timed(step, per_iter):
        for _ in range(5):
            step(0)
        torch.cuda.synchronize()
        lats, done, i = [], 0, 0
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t = time.perf_counter()
            step(i)
            lats.append(time.perf_counter() - t)
            done += per_iter
            i += 1
        lats.sort()
        return done / seconds, percentile(lats, 0.5) * 1e6, percentile(lats, 0.99) * 1e6

    a_host = (torch.randn(m, k) * 0.1).to(f8).pin_memory()
    sa_host = torch.ones(m, 1, dtype=torch.float32).pin_memory()
    d_host = torch.empty(m, n, dtype=torch.bfloat16).pin_memory()

    where = ", on the GPU" if on_device else ""
    if on_device:
        a_host, sa_host = a_host.to(dev), sa_host.to(dev)
        d_host = d_host.to(dev)

    def one(i):
        g = i % n_weights
        a = a_host.to(dev, non_blocking=True)
        sa = sa_host.to(dev, non_blocking=True)
        d = torch._scaled_mm(a, w[g].t(), scale_a=sa, scale_b=sw[g].view(1, n), out_dtype=torch.bfloat16)
        d_host.copy_(d, non_blocking=True)
        torch.cuda.synchronize()
    rps, p50, p99 = timed(one, 1)
    rows.append({"baseline": "torch, one request at a time" + where, "workers": 1, "req_s": rps,
                 "p50_us": p50, "p99_us": p99, "method": "_scaled_mm"})

    for workers in worker_counts:
        if workers < 2:
            continue
        per = max(1, n_weights // workers)
        a_all = (torch.randn(workers * m, k) * 0.1).to(f8).pin_memory()
        sa_all = torch.ones(workers * m, dtype=torch.float32).pin_memory()
        d_all = torch.empty(workers * m, n, dtype=torch.bfloat16).pin_memory()
        if on_device:  # .to(dev) below is then a no-op, and copy_ stays on the GPU
            a_all, sa_all, d_all = a_all.to(dev), sa_all.to(dev), d_all.to(dev)
        offs = torch.arange(1, workers + 1, device=dev, dtype=torch.int32) * m

        # The weights each round names, stacked once (as a model keeps its experts): the
        # timed loop reads them in place, never gathers them.
        sels = [torch.tensor([(wk * per + i) % n_weights for wk in range(workers)], device=dev)
                for i in range(per)]
        stacks = [(w[idx].contiguous(), sw[idx].contiguous()) for idx in sels]
        method = "_scaled_grouped_mm"

        def grouped(i):
            wb, sb = stacks[i % per]
            a = a_all.to(dev, non_blocking=True)
            sa = sa_all.to(dev, non_blocking=True)
            d = torch._scaled_grouped_mm(a, wb.transpose(-2, -1), sa, sb, offs=offs,
                                         out_dtype=torch.bfloat16)
            d_all.copy_(d, non_blocking=True)
            torch.cuda.synchronize()

        def looped(i):
            idx = sels[i % per].tolist()
            a = a_all.to(dev, non_blocking=True)
            sa = sa_all.to(dev, non_blocking=True).view(-1, 1)
            outs = [torch._scaled_mm(a[j * m:(j + 1) * m], w[g].t(), scale_a=sa[j * m:(j + 1) * m],
                                     scale_b=sw[g].view(1, n), out_dtype=torch.bfloat16)
                    for j, g in enumerate(idx)]
            d_all.copy_(torch.cat(outs), non_blocking=True)
            torch.cuda.synchronize()
        try:
            grouped(0)
            step = grouped
        except Exception as e:  # noqa: BLE001 - this torch has no usable grouped FP8 GEMM
            method = "_scaled_mm per group (_scaled_grouped_mm: %s)" % str(e).splitlines()[0][:80]
            step = looped
        rps, p50, p99 = timed(step, workers)
        del stacks
        rows.append({"baseline": "torch, one process holding the requests" + where, "workers": workers,
                     "req_s": rps, "p50_us": p50, "p99_us": p99, "method": method})
    return rows


def link_bandwidth(seconds=1.0, mib=256):
    """The host<->device link as torch sees it with pinned memory: GB/s up, down, and
    both at once (two streams)."""
    import torch

    n = mib << 20
    h_up = torch.empty(n, dtype=torch.uint8).pin_memory()
    h_down = torch.empty(n, dtype=torch.uint8).pin_memory()
    d_up = torch.empty(n, dtype=torch.uint8, device="cuda")
    d_down = torch.empty(n, dtype=torch.uint8, device="cuda")
    s_up, s_down = torch.cuda.Stream(), torch.cuda.Stream()

    def rate(up, down):
        for _ in range(2):
            step(up, down)
        torch.cuda.synchronize()
        t, reps = time.perf_counter(), 0
        while time.perf_counter() - t < seconds:
            step(up, down)
            reps += 1
        torch.cuda.synchronize()
        return reps * n / (time.perf_counter() - t) / 1e9

    def step(up, down):
        if up:
            with torch.cuda.stream(s_up):
                d_up.copy_(h_up, non_blocking=True)
        if down:
            with torch.cuda.stream(s_down):
                h_down.copy_(d_down, non_blocking=True)
        torch.cuda.synchronize()
    return {"h2d_gb_s": rate(1, 0), "d2h_gb_s": rate(0, 1), "both_each_gb_s": rate(1, 1)}


def run_mix(g, spec, seconds, decode_shape, decode_ids):
    """DECODE_CLIENT:DECODE_WORKERS:PREFILL_CLIENT:PREFILL_WORKERS:MxNxK: prefill alone (1
    worker and PREFILL_WORKERS), decode alone, and both in one window."""
    dk, dw, pk, pw, pshape = spec.split(":")
    dw, pw = int(dw), int(pw)
    pshape = tuple(int(x) for x in pshape.split("x"))
    t = time.time()
    pids = register_weights(g.shm_socket, max(2, pw), pshape[1], pshape[2], prefix="prefill")
    print("# %d prefill weights of %dx%d registered in %.1f s" % (len(pids), pshape[1], pshape[2],
                                                                  time.time() - t), flush=True)
    rows = []
    for label, groups in (("prefill alone", [(pk, 1, pshape, pids)]),
                          ("prefill alone", [(pk, pw, pshape, pids)]),
                          ("decode alone", [(dk, dw, decode_shape, decode_ids)]),
                          ("mixed", [(dk, dw, decode_shape, decode_ids), (pk, pw, pshape, pids)])):
        for r in run_groups(g, groups, seconds):
            r["client"] = "%s: %s" % (label, r["client"])
            rows.append(r)
            print(fmt_table([r]).splitlines()[-1], flush=True)
    dec_alone, pre_alone, dec_mix, pre_mix = rows[2], rows[1], rows[3], rows[4]
    print("mixed: decode req/s %.2fx alone, p99 %.2fx alone; prefill req/s %.2fx alone; GEMM busy %.0f%%" % (
        dec_mix["req_s"] / max(dec_alone["req_s"], 1e-9), dec_mix["p99_us"] / max(dec_alone["p99_us"], 1e-9),
        pre_mix["req_s"] / max(pre_alone["req_s"], 1e-9), 100 * dec_mix["gemm_busy"]), flush=True)
    return rows, pshape


# ---- The driver -------------------------------------------------------------------------------


def fmt_table(rows):
    head = ("| client | workers | req/s | weight GB/s | p50 µs | p99 µs | connect p50 / max ms | req/batch "
            "| gemmd CPU cores | GEMM busy | " + " | ".join(STAGES) + " | GEMM µs/batch | mean µs: round trip / in gemmd | errors |")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in rows:
        lines.append("| %s | %d | %.1fk | %.3g | %.1f | %.1f | %.1f / %.1f | %.1f | %.2f | %.0f%% | %s | %.1f | %.1f / %.1f | %s |" % (
            r["client"], r["workers"], r["req_s"] / 1e3, r["weight_gb_s"], r["p50_us"], r["p99_us"],
            r["connect_p50_ms"], r["connect_max_ms"], r["req_per_batch"], r["gemmd_cpu_cores"],
            100 * r["gemm_busy"], " | ".join("%.1f" % r[s + "_us"] for s in STAGES), r["gemm_us"],
            r.get("mean_us", 0.0), r.get("gemmd_mean_us", 0.0), r["errors"] if not r["errors"] else "%d (%s)" % (r["errors"], r["first_error"][:60])))
    return "\n".join(lines)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        a = sys.argv[2:]
        py_worker(a[0], int(a[1]), int(a[2]), [int(x) for x in a[3].split(",")], None if a[4] == "-" else float(a[4]),
                  float(a[5]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--shape", default=None, help="MxNxK (default 8x4096x4096 on cuda, 8x256x256 on cpu)")
    ap.add_argument("--weights", type=int, default=64)
    ap.add_argument("--workers", default=None, help="default 1,8,16,32,64 on cuda, 1,2,4,8 on cpu")
    ap.add_argument("--clients", default="c-shm,py-shm,c-grpc,py-grpc")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--torch", action="store_true", help="also the torch baselines (needs CUDA)")
    ap.add_argument("--torch-device", action="store_true",
                    help="also the torch baselines with the requests already on the GPU (client py-dev's)")
    ap.add_argument("--gemmd-args", default="", help="extra gemmd flags, space- or comma-separated")
    ap.add_argument("--churn", default=None, metavar="CLIENT:WORKERS:N",
                    help="also rows where N more shm clients connect and disconnect meanwhile, "
                         "each with and without the churn, e.g. c-shm:32:64")
    ap.add_argument("--mix", default=None, metavar="DCLIENT:DWORKERS:PCLIENT:PWORKERS:MxNxK",
                    help="also large (prefill) requests: alone at 1 and PWORKERS workers, the "
                         "decode workers alone, and both at once, e.g. c-shm:16:py-shm:2:4096x7168x16384")
    ap.add_argument("--profile", action="store_true",
                    help="the Python workers run their window under cProfile; the first one's top functions are printed")
    ap.add_argument("--perf", action="store_true",
                    help="sample every CPU of the machine with perf (cpu-clock) during each window and print "
                         "the shares by thread, library and symbol; perf from $GEMMD_PERF or the PATH")
    ap.add_argument("--json", default=None)
    o = ap.parse_args()
    if o.perf:
        global PERF
        PERF = os.environ.get("GEMMD_PERF") or shutil.which("perf")
        if PERF is None:
            ap.error("--perf: no perf binary (set GEMMD_PERF, or install perf)")
    if o.profile:
        os.environ["GEMMD_BENCH_PROFILE"] = "1"
    import harness

    shape = tuple(int(x) for x in (o.shape or ("8x4096x4096" if o.backend == "cuda" else "8x256x256")).split("x"))
    workers = [int(x) for x in (o.workers or ("1,8,16,32,64" if o.backend == "cuda" else "1,2,4,8")).split(",")]
    rows = []
    harness.EXTRA_ARGS[:] = []
    with harness.Gemmd("--backend", o.backend, *o.gemmd_args.replace(",", " ").split()) as g:
        t = time.time()
        ids = register_weights(g.shm_socket, o.weights, shape[1], shape[2])
        print("# %s, %d weights of %dx%d registered in %.1f s; gemmd %s" % (
            time.strftime("%Y-%m-%d %H:%M:%S"), len(ids), shape[1], shape[2], time.time() - t,
            o.gemmd_args or "(default flags)"), flush=True)
        for kind in filter(None, o.clients.split(",")):
            for w in workers:
                r = run_point(g, kind, w, shape, ids, o.seconds)
                rows.append(r)
                print(fmt_table([r]).splitlines()[-1], flush=True)
        if o.churn:
            kind, w, n = o.churn.split(":")
            for c in (0, int(n)):
                r = run_point(g, kind, int(w), shape, ids, o.seconds, churn=c)
                rows.append(r)
                print(fmt_table([r]).splitlines()[-1], flush=True)
                if c:
                    print("churn: %d HELLOs, p50 %.2f ms, p99 %.2f ms, max %.2f ms, %d refused %s" % (
                        r["churn_hellos"], r["churn_hello_p50_ms"], r["churn_hello_p99_ms"],
                        r["churn_hello_max_ms"], len(r["churn_errors"]),
                        r["churn_errors"][:1]), flush=True)
        pshape = None
        if o.mix:
            mrows, pshape = run_mix(g, o.mix, o.seconds, shape, ids)
            rows += mrows
    print("\nshape %s, %d weights\n" % ("x".join(map(str, shape)), o.weights))
    print(fmt_table(rows))
    out = {"shape": shape, "rows": rows}
    if o.torch:
        trows = torch_rows(shape, o.weights, workers, o.seconds)
        if o.torch_device:
            trows += torch_rows(shape, o.weights, workers, o.seconds, on_device=True)
        if pshape:
            trows += [dict(r, baseline=r["baseline"] + " (%dx%dx%d)" % pshape)
                      for r in torch_rows(pshape, 2, [1], o.seconds)]
        out["torch"] = trows
        out["link"] = link_bandwidth()
        print("\nhost<->device link (torch, pinned, 256 MiB copies): H2D %.1f GB/s, D2H %.1f GB/s, "
              "both at once %.1f GB/s each way" % (out["link"]["h2d_gb_s"], out["link"]["d2h_gb_s"],
                                                    out["link"]["both_each_gb_s"]))
        print("\n| torch baseline | workers | req/s | p50 µs | p99 µs | method |\n| --- | --- | --- | --- | --- | --- |")
        for r in trows:
            print("| %s | %d | %.1fk | %.1f | %.1f | %s |" % (r["baseline"], r["workers"], r["req_s"] / 1e3,
                                                          r["p50_us"], r["p99_us"], r["method"]))
    if o.json:
        with open(o.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
