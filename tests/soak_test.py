"""Soak: good and bad clients together, over gRPC, shared memory and HTTP, against one gemmd
(CPU backend) for SOAK_SECONDS (30 by default; GEMMD_SOAK_SECONDS for longer runs by hand),
while shm clients connect, die and reconnect.

Good clients: gRPC unary GEMMs (4 threads), GemmStream rounds, shm workers (3 processes)
that reconnect every few dozen requests. Bad clients: malformed and unknown-weight gRPC
requests, garbage bytes to a method, streams cancelled unread, RegisterWeight streams
abandoned, shm connections that never say HELLO or say it wrong, that send garbage
entries, or that are SIGKILLed with requests in flight; shm clients that misuse regions
(closed under requests, named after closing, unsealed, past the bound) or die with regions
open and requests in flight; HTTP heads trickled, malformed or cut off.

Passes when every good request is answered exactly once, with OK (shm: each request id
completes once, and no completion comes that was not asked for; streams: each id once), and
when, after the clients stop, gemmd's open fds and mappings are back to their baseline, its
resident memory is within a bound of it and did not grow through the second half of the
run, and its in-flight, queue and shm-client gauges are 0."""

import fcntl
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest

import grpc
import numpy as np

import harness as H

sys.path.insert(0, os.path.dirname(H.repo_path("client/python/gemmd_shm.py")))
import gemmd_shm as S  # noqa: E402

SOAK_SECONDS = float(os.environ.get("GEMMD_SOAK_SECONDS", "30"))
N, K = 256, 256  # each weight
WEIGHTS = 4
# Resident memory may settle above its baseline by this much (allocator caches, gRPC's
# per-connection buffers); under the sanitizers their own bookkeeping grows too.
SANITIZED = bool(os.environ.get("GEMMD_TSAN") or "ASAN_OPTIONS" in os.environ)
RSS_SLACK = (128 if SANITIZED else 48) << 20
# Mappings: the allocator's own regions (ASan's grow by a few dozen); every shm session maps
# its arena, and hundreds of sessions come and go, so a leak of them shows far above this.
MAPS_SLACK = 64 if SANITIZED else 16


# ---- shm child processes (this file run as a script) --------------------------------------

def sealed_memfd(nbytes):
    """A region's file as gemmd takes it: a memfd sealed against shrinking."""
    fd = os.memfd_create("soak-region", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, nbytes)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    return fd


def shm_good(path, weight_ids, end_at):
    """Reconnects every 40 requests; 4 requests in flight at a time. Every other session
    speaks version 2 and keeps A and D in a region of its own (a memfd) instead of the
    arena. Prints JSON counts."""
    sent = ok = bad = 0
    problems = []
    rng = random.Random()
    session = 0
    while time.time() < end_at:
        session += 1
        in_region = session % 2 == 0
        c = S.Client(path, arena_bytes=4 << 20, entries=16, version=2 if in_region else 1)
        a_bytes = bytes(rng.getrandbits(8) & 0x77 for _ in range(8 * K))
        regions = (0, 0, 0)
        if in_region:
            fd = sealed_memfd(8 * K + 4 * 8 * N * 2)
            os.pwrite(fd, a_bytes, 0)
            rid = c.open_region_fd(fd, 8 * K + 4 * 8 * N * 2)
            os.close(fd)
            a, ds, regions = 0, [8 * K + i * 8 * N * 2 for i in range(4)], (rid, 0, rid)
        else:
            a = c.alloc(8 * K)
            c.write(a, a_bytes)
            ds = [c.alloc(8 * N * 2) for _ in range(4)]
        outstanding = {}
        for _ in range(10):
            for d in ds:
                rid = c.gemm_async(m=8, k=K, a=(a, S.DTYPE_E4M3, S.LAYOUT_NONE, 0),
                                   weight_id=rng.choice(weight_ids), d=d, d_capacity=8 * N * 2,
                                   regions=regions)
                outstanding[rid] = d
                sent += 1
            while outstanding:
                for comp in c.pop_completions():
                    if comp.request_id not in outstanding:
                        problems.append("completion for request %d that was not outstanding" % comp.request_id)
                        continue
                    del outstanding[comp.request_id]
                    if comp.status == 0:
                        ok += 1
                    else:
                        bad += 1
                        problems.append("status %d: %s" % (comp.status, comp.message))
                if outstanding:
                    c.wait_completions(5.0)
        time.sleep(0.05)
        if c.pop_completions():
            problems.append("a completion came after every request was answered")
        c.close()
    print(json.dumps({"sent": sent, "ok": ok, "bad": bad, "problems": problems[:5]}))


def shm_bad(path, kind, weight_id):
    """One hostile client; exits (or is killed) when done."""
    if kind == "silent":  # connects, never says HELLO
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect(path)
        time.sleep(0.3)
        s.close()
    elif kind == "bad_hello":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect(path)
        s.send(b"GEMMDSH1" + os.urandom(40))
        s.settimeout(5)
        try:
            s.recv(256)
        except OSError:
            pass
        s.close()
    elif kind == "garbage_entries":
        c = S.Client(path, arena_bytes=1 << 20, entries=16)
        for i in range(40):
            raw = bytearray(os.urandom(128))
            raw[24:32] = struct.pack("<Q", 100 + i)
            c.submit(bytes(raw))
        time.sleep(0.1)
        c.close()
    elif kind == "regions_killed":  # regions open and requests naming them in flight
        c = S.Client(path, arena_bytes=1 << 20, entries=16, version=2)
        ids = []
        for _ in range(3):
            fd = sealed_memfd(1 << 16)
            ids.append(c.open_region_fd(fd, 1 << 16))
            os.close(fd)
        for i in range(8):
            r = ids[i % 3]
            c.gemm_async(m=8, k=K, a=(0, S.DTYPE_E4M3, S.LAYOUT_NONE, 0), weight_id=weight_id,
                         d=8 * K, d_capacity=8 * N * 2, regions=(r, 0, r))
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "regions_misused":  # closed under requests, named after, unsealed, too many
        c = S.Client(path, arena_bytes=1 << 20, entries=16, version=2)
        fd = sealed_memfd(1 << 16)
        for _ in range(40):
            r = c.open_region_fd(fd, 1 << 16)
            c.gemm_async(m=8, k=K, a=(0, S.DTYPE_E4M3, S.LAYOUT_NONE, 0), weight_id=weight_id,
                         d=8 * K, d_capacity=8 * N * 2, regions=(r, 0, r))
            c.close_region(r)
            c.gemm_async(m=8, k=K, a=(0, S.DTYPE_E4M3, S.LAYOUT_NONE, 0), weight_id=weight_id,
                         d=8 * K, d_capacity=8 * N * 2, regions=(r, 0, r))  # INVALID_ARGUMENT
        try:
            os.ftruncate(fd, 0)  # the seal refuses it
        except PermissionError:
            pass
        open_ids = []
        try:
            while len(open_ids) < 40:  # past the bound: RESOURCE_EXHAUSTED
                open_ids.append(c.open_region_fd(fd, 1 << 16))
        except S.ShmError:
            pass
        unsealed = os.memfd_create("soak-unsealed")
        os.ftruncate(unsealed, 1 << 16)
        try:
            c.open_region_fd(unsealed, 1 << 16)
        except S.ShmError:
            pass
        os.close(unsealed)
        os.close(fd)
        time.sleep(0.1)
        c.close()  # with regions open
    elif kind == "killed_in_flight":
        c = S.Client(path, arena_bytes=1 << 20, entries=16)
        a = c.alloc(8 * K)
        d = c.alloc(8 * N * 2)
        for _ in range(8):
            c.gemm_async(m=8, k=K, a=(a, S.DTYPE_E4M3, S.LAYOUT_NONE, 0), weight_id=weight_id,
                         d=d, d_capacity=8 * N * 2)
        os.kill(os.getpid(), signal.SIGKILL)


# ---- the test -------------------------------------------------------------------------------

def maps_count(pid):
    with open("/proc/%d/maps" % pid) as f:
        return sum(1 for _ in f)


class Soak(unittest.TestCase):
    def setUp(self):
        self.pb, _, _, _ = H.stubs()
        self.rng = np.random.default_rng()
        self.failures = []
        self.lock = threading.Lock()

    def fail_later(self, text):
        with self.lock:
            self.failures.append(text)

    # -- gRPC ---------------------------------------------------------------------------------
    def grpc_good(self, stub, end_at, counts):
        pb = self.pb
        a = H.make_matrix(pb, self.rng, 8, K, H.DT_E4M3, H.SL_NONE)
        rid = (threading.get_ident() & 0xffffffff) << 20
        while time.time() < end_at:
            rid += 1
            try:
                r = stub.Gemm(pb.GemmRequest(request_id=rid, a=a, weight_name="w%d" % (rid % WEIGHTS)),
                              timeout=30)
            except grpc.RpcError as e:
                self.fail_later("good gRPC request %d: %s %s" % (rid, e.code(), e.details()))
                continue
            if r.request_id != rid or r.d.rows != 8 or r.d.cols != N:
                self.fail_later("good gRPC request %d answered as %d, %dx%d" % (rid, r.request_id, r.d.rows, r.d.cols))
            with self.lock:
                counts["grpc"] += 1

    def grpc_stream(self, stub, end_at, counts):
        pb = self.pb
        a = H.make_matrix(pb, self.rng, 8, K, H.DT_E4M3, H.SL_NONE)
        base = 1
        while time.time() < end_at:
            ids = list(range(base, base + 20))
            base += 20
            reqs = [pb.GemmRequest(request_id=i, a=a, weight_name="w%d" % (i % WEIGHTS)) for i in ids]
            try:
                got = [r.request_id for r in stub.GemmStream(iter(reqs), timeout=60) if r.error_code == 0]
            except grpc.RpcError as e:
                self.fail_later("GemmStream: %s %s" % (e.code(), e.details()))
                continue
            if sorted(got) != ids:
                self.fail_later("GemmStream answered %d of 20, ids %s" % (len(got), got[:5]))
            with self.lock:
                counts["stream"] += len(got)

    def grpc_bad(self, d, stub, end_at, counts):
        pb = self.pb
        ch = d.channel()
        raw = ch.unary_unary("/gemmd.v1.GemmService/Gemm", request_serializer=None,
                             response_deserializer=None)
        a = H.make_matrix(pb, self.rng, 8, K, H.DT_E4M3, H.SL_NONE)
        expect = {
            "bad shape": (lambda: stub.Gemm(pb.GemmRequest(a=pb.Matrix(rows=8, cols=K, dtype=1, data=b"x"),
                                                           weight_name="w0"), timeout=10),
                          grpc.StatusCode.INVALID_ARGUMENT),
            "unknown weight": (lambda: stub.Gemm(pb.GemmRequest(a=a, weight_name="nope"), timeout=10),
                               grpc.StatusCode.NOT_FOUND),
            "garbage": (lambda: raw(os.urandom(64) + b"\xff\xff\xff\xff\x0f", timeout=10),
                        grpc.StatusCode.INVALID_ARGUMENT),
            "huge claim": (lambda: stub.RegisterWeight(iter([pb.RegisterWeightRequest(
                name="huge", weight=pb.Matrix(rows=65536, cols=65536, dtype=1))]), timeout=10),
                           grpc.StatusCode.RESOURCE_EXHAUSTED),
        }
        i = 0
        while time.time() < end_at:
            i += 1
            name = list(expect)[i % len(expect)]
            call, code = expect[name]
            try:
                call()
                self.fail_later("bad gRPC request (%s) succeeded" % name)
            except grpc.RpcError as e:
                if e.code() != code:
                    self.fail_later("bad gRPC request (%s): %s, expected %s" % (name, e.code(), code))
            # A stream cancelled with answers unread, and a registration abandoned midway.
            it = stub.GemmStream(iter([pb.GemmRequest(request_id=j, a=a, weight_name="w0") for j in range(8)]))
            time.sleep(0.01)
            it.cancel()
            go = threading.Event()

            def abandoned():
                yield pb.RegisterWeightRequest(name="gone%d" % i, weight=pb.Matrix(rows=N, cols=K, dtype=1,
                                                                                   data=bytes(N * K // 2)))
                go.wait(2)
            f = stub.RegisterWeight.future(abandoned())
            time.sleep(0.02)
            f.cancel()
            go.set()
            with self.lock:
                counts["bad"] += 3

    # -- HTTP ---------------------------------------------------------------------------------
    def http_mix(self, d, end_at, counts):
        while time.time() < end_at:
            status, _, _ = d.http("/metrics")
            if status != 200:
                self.fail_later("/metrics answered %d" % status)
            for payload in (b"GET /metr", b"\x00\x01garbage\r\n\r\n", b"GET /healthz HTTP/1.1\r\nHost: x\r\n"):
                s = socket.create_connection(("127.0.0.1", d.metrics_port), timeout=5)
                s.sendall(payload)
                time.sleep(0.01)
                s.close()
            with self.lock:
                counts["http"] += 1

    # -- shm ----------------------------------------------------------------------------------
    def shm_churn(self, d, end_at, weight_id, counts):
        kinds = ["silent", "bad_hello", "garbage_entries", "killed_in_flight", "regions_killed",
                 "regions_misused"]
        i = 0
        while time.time() < end_at:
            kind = kinds[i % len(kinds)]
            i += 1
            p = subprocess.run([sys.executable, __file__, "shm-bad", d.shm_socket, kind, str(weight_id)],
                               capture_output=True, text=True, timeout=60)
            if p.returncode not in (0, -signal.SIGKILL):
                self.fail_later("hostile shm client %s: rc %d %s" % (kind, p.returncode, p.stderr[-300:]))
            with self.lock:
                counts["shm_bad"] += 1

    def test_soak(self):
        pb = self.pb
        with H.Gemmd("--max-registrations", "4", "--weight-memory-bytes", "1G") as d:
            stub = d.stub()
            for i in range(WEIGHTS):
                w = H.make_matrix(pb, self.rng, N, K, H.DT_E4M3, H.SL_NONE)
                stub.RegisterWeight(iter([pb.RegisterWeightRequest(name="w%d" % i, weight=w)]))
            ids = [stub.ListWeights(pb.ListWeightsRequest()).weights[i].weight_id for i in range(WEIGHTS)]
            pid = d.proc.pid

            # Warm up every path once, then take the baseline.
            warm_end = time.time() + 2
            counts = {"grpc": 0, "stream": 0, "bad": 0, "http": 0, "shm_bad": 0}
            self.grpc_good(stub, warm_end, counts)
            subprocess.run([sys.executable, __file__, "shm-good", d.shm_socket, json.dumps(ids),
                            str(time.time() + 1)], capture_output=True, timeout=60, check=True)
            self.grpc_bad(d, stub, time.time() + 1, counts)
            self.settle(d)
            targets0 = d.fd_targets()
            fds0, maps0, rss0 = len(targets0), maps_count(pid), d.rss_bytes()

            counts = {k: 0 for k in counts}
            start = time.time()
            end_at = start + SOAK_SECONDS
            shm_workers = [subprocess.Popen([sys.executable, __file__, "shm-good", d.shm_socket, json.dumps(ids),
                                             str(end_at)], stdout=subprocess.PIPE, text=True) for _ in range(3)]
            threads = [threading.Thread(target=self.grpc_good, args=(stub, end_at, counts)) for _ in range(4)]
            threads += [threading.Thread(target=self.grpc_stream, args=(stub, end_at, counts)),
                        threading.Thread(target=self.grpc_bad, args=(d, stub, end_at, counts)),
                        threading.Thread(target=self.http_mix, args=(d, end_at, counts)),
                        threading.Thread(target=self.shm_churn, args=(d, end_at, ids[0], counts))]
            for t in threads:
                t.start()
            rss = []
            while time.time() < end_at:
                rss.append((time.time() - start, d.rss_bytes()))
                time.sleep(0.5)
            for t in threads:
                t.join(timeout=120)
            shm = [json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in shm_workers]
            self.settle(d)
            # A connection the test itself just closed (its last metrics scrape) can hold an fd
            # for a moment; a leaked one stays. Wait a few seconds for the count to come back.
            deadline = time.time() + 5
            targets1 = d.fd_targets()
            while len(targets1) > fds0 and time.time() < deadline:
                time.sleep(0.2)
                targets1 = d.fd_targets()
            new_fds = {fd: t for fd, t in targets1.items() if targets0.get(fd) != t}
            fds1, maps1, rss1 = len(targets1), maps_count(pid), d.rss_bytes()
            inflight = H.metric(d, "gemmd_inflight_requests")
            depth = H.metric(d, "gemmd_queue_depth")
            clients = H.metric(d, "gemmd_shm_clients")
            self.assertEqual(d.http("/healthz")[0], 200)

        print("soak %.0f s: gRPC %d, stream %d, bad gRPC %d, HTTP rounds %d, hostile shm %d, shm %s" % (
            SOAK_SECONDS, counts["grpc"], counts["stream"], counts["bad"], counts["http"], counts["shm_bad"],
            [(s["sent"], s["ok"]) for s in shm]))
        print("fds %d -> %d, maps %d -> %d, RSS %.1f -> %.1f MiB (peak %.1f)" % (
            fds0, fds1, maps0, maps1, rss0 / 2**20, rss1 / 2**20, max(r for _, r in rss) / 2**20))
        print("fds new or changed: %s" % new_fds)
        self.assertEqual(self.failures, [], "\n".join(self.failures[:10]))
        for s in shm:
            self.assertEqual(s["problems"], [])
            self.assertEqual(s["ok"], s["sent"])
            self.assertGreater(s["sent"], 0)
        for k in ("grpc", "stream", "bad", "http", "shm_bad"):
            self.assertGreater(counts[k], 0, k)
        self.assertEqual((inflight, depth, clients), (0, 0, 0), "in flight, queue depth, shm clients")
        self.assertLessEqual(fds1, fds0, "open fds after the soak; new: %s" % new_fds)
        self.assertLessEqual(maps1, maps0 + MAPS_SLACK, "mappings after the soak")
        self.assertLess(rss1 - rss0, RSS_SLACK, "resident memory after the soak")
        half = [r for t, r in rss if t >= SOAK_SECONDS / 2]
        self.assertLess(half[-1] - half[0], RSS_SLACK, "resident memory grew through the second half")

    def settle(self, d, timeout=20):
        """Waits until nothing is in flight, no shm client is connected, and the fd count
        has stopped falling."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            fds = d.open_fds()
            if (H.metric(d, "gemmd_inflight_requests") == 0 and H.metric(d, "gemmd_shm_clients") == 0
                    and fds == last):
                return
            last = fds
            time.sleep(0.5)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "shm-good":
        shm_good(sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4]))
    elif len(sys.argv) > 1 and sys.argv[1] == "shm-bad":
        shm_bad(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        unittest.main(verbosity=2)
