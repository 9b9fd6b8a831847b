"""The shared-memory transport, driven by client/python/gemmd_shm.py (standard library
only, written from docs/shm-protocol.md): the correctness cases of the gRPC suite over
shm; weights registered over shm and over gRPC, used by both; and safety against any
client: bad descriptors, random bytes, jumping ring indices, disconnects mid-request,
1000 connect-and-kill cycles (fds and memory back where they were), a uid not on the
allow-list, a flooding client held to its in-flight limit while another is served."""

import os
import signal
import socket
import struct
import sys
import threading
import time
import unittest

import grpc
import numpy as np

import harness as H

sys.path.insert(0, os.path.join(os.path.dirname(H.repo_path("client/python/gemmd_shm.py"))))
import gemmd_shm as S  # noqa: E402


def put_matrix(c, m):
    """Copies a protobuf Matrix into the arena: (data offset, dtype, layout, scales offset)."""
    off = c.alloc(len(m.data))
    c.write(off, m.data)
    s_off = 0
    if len(m.scales):
        s_off = c.alloc(4 * len(m.scales))
        c.write(s_off, struct.pack("<%df" % len(m.scales), *m.scales))
    return off, m.dtype, m.scale_layout, s_off


def result_matrix(pb, c, comp, d_off, m, n, out):
    return pb.Matrix(rows=m, cols=n, dtype=out or pb.DTYPE_BF16, data=c.read(d_off, comp.d_bytes))


class Correctness(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = H.Gemmd()
        cls.pb, _, _, _ = H.stubs()
        cls.rng = np.random.default_rng()

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def test_every_dtype_layout_output_inline(self):
        pb = self.pb
        shapes = [(1, 1, 1), (7, 129, 1000), (3, 17, 128), (1, 300, 129), (16, 8, 257)]
        dtypes = [H.DT_E4M3, H.DT_E5M2, H.DT_BF16, H.DT_FP16, H.DT_FP32]
        outs = [0, pb.DTYPE_BF16, pb.DTYPE_FP16, pb.DTYPE_FP32]
        i = 0
        with S.Client(self.d.shm_socket) as c:
            for adt in dtypes:
                for al in (H.SL_NONE, H.SL_TENSOR, H.SL_ROW, H.SL_1X128):
                    for bdt in dtypes:
                        for bl in (H.SL_NONE, H.SL_TENSOR, H.SL_ROW, H.SL_128X128):
                            m, n, k = shapes[i % len(shapes)]
                            out = outs[i % len(outs)]
                            i += 1
                            c.reset()
                            a = H.make_matrix(pb, self.rng, m, k, adt, al)
                            b = H.make_matrix(pb, self.rng, n, k, bdt, bl)
                            d_bytes = m * n * (4 if out == pb.DTYPE_FP32 else 2)
                            d_off = c.alloc(d_bytes)
                            comp = c.gemm(m=m, k=k, n=n, a=put_matrix(c, a), b=put_matrix(c, b),
                                          d=d_off, d_capacity=d_bytes, out_dtype=out)
                            self.assertEqual(comp.d_bytes, d_bytes)
                            got = H.decode_output(result_matrix(pb, c, comp, d_off, m, n, out))
                            tol = H.TOLERANCE[out or pb.DTYPE_BF16]
                            err = H.output_error(got, H.reference(a, b), out or pb.DTYPE_BF16)
                            self.assertLessEqual(err, tol, "case %d A=%d/%d B=%d/%d out=%d" % (
                                i, adt, al, bdt, bl, out))

    def test_weights_across_transports(self):
        """Registered over shm, used over gRPC and shm; registered over gRPC, found by name
        over shm: the same bits every way."""
        pb = self.pb
        stub = self.d.stub()
        k = 300
        with S.Client(self.d.shm_socket) as c:
            for dt, layout in ((H.DT_E4M3, H.SL_128X128), (H.DT_BF16, H.SL_NONE)):
                b = H.make_matrix(pb, self.rng, 130, k, dt, layout)
                wid = c.register_weight("shm-%d" % dt, 130, k, b.data, dt, layout, list(b.scales))
                listed = {w.name: w for w in stub.ListWeights(pb.ListWeightsRequest()).weights}
                self.assertEqual(listed["shm-%d" % dt].weight_id, wid)
                a = H.make_matrix(pb, self.rng, 5, k, H.DT_E4M3, H.SL_1X128)
                over_grpc = stub.Gemm(pb.GemmRequest(a=a, weight_id=wid, out_dtype=pb.DTYPE_FP32))
                c.reset()
                d_off = c.alloc(5 * 130 * 4)
                comp = c.gemm(m=5, k=k, a=put_matrix(c, a), weight_id=wid, d=d_off,
                              d_capacity=5 * 130 * 4, out_dtype=pb.DTYPE_FP32)
                self.assertEqual(c.read(d_off, comp.d_bytes), over_grpc.d.data)
                self.assertLessEqual(H.rel_error(H.decode_output(over_grpc.d), H.reference(a, b)), 1e-4)
                c.unregister_weight(wid)
            b = H.make_matrix(pb, self.rng, 64, k, H.DT_E5M2, H.SL_ROW)
            info = stub.RegisterWeight(iter([pb.RegisterWeightRequest(name="by-grpc", weight=b)]))
            self.assertEqual(c.weight_info(name="by-grpc"), (info.weight_id, 64, k))
            with self.assertRaises(S.ShmError) as e:
                c.weight_info(name="nobody")
            self.assertEqual(e.exception.code, 5)

    def test_stacked_batches_over_shm(self):
        """Many requests in the ring at once form batches, every answer once and right."""
        pb = self.pb
        k = 256
        b = H.make_matrix(pb, self.rng, 96, k, H.DT_E4M3, H.SL_128X128)
        with S.Client(self.d.shm_socket) as c:
            wid = c.register_weight("stack", 96, k, b.data, H.DT_E4M3, H.SL_128X128, list(b.scales))
            reqs, entries = {}, []
            for i in range(64):
                a = H.make_matrix(pb, self.rng, 1 + i % 8, k, H.DT_E4M3, H.SL_1X128)
                d_off = c.alloc(a.rows * 96 * 4)
                rid, raw = c.gemm_entry(m=a.rows, k=k, a=put_matrix(c, a), weight_id=wid, d=d_off,
                                        d_capacity=a.rows * 96 * 4, out_dtype=pb.DTYPE_FP32)
                reqs[rid] = (a, d_off)
                entries.append(raw)
            c.submit_many(entries)  # one doorbell: gemmd sees them together
            sizes = []
            for rid, (a, d_off) in reqs.items():
                comp = c.wait(rid)
                self.assertEqual(comp.status, 0, comp.message)
                sizes.append(comp.batch_requests)
                got = H.decode_output(pb.Matrix(rows=a.rows, cols=96, dtype=pb.DTYPE_FP32,
                                                data=c.read(d_off, comp.d_bytes)))
                self.assertLessEqual(H.rel_error(got, H.reference(a, b)), 1e-4)
            self.assertGreater(max(sizes), 1, "no batch formed from a full ring")


def raw_entry(**fields):
    """A 128-byte submission entry with named fields (defaults 0)."""
    order = ["opcode", "a_dtype", "a_layout", "out_dtype", "b_source", "b_dtype", "b_layout", "r0",
             "m", "n", "k", "timeout_us", "request_id", "weight_id", "a_offset", "a_scales_offset",
             "b_offset", "b_scales_offset", "d_offset", "d_capacity", "a_region", "a_scales_region",
             "d_region"]
    return S.SQE.pack(*[fields.get(f, 0) for f in order])


class Safety(unittest.TestCase):
    def setUp(self):
        self.d = H.Gemmd()
        self.pb, _, _, _ = H.stubs()
        self.rng = np.random.default_rng()

    def tearDown(self):
        self.assertEqual(self.d.stop(), 0)

    def healthy(self, c=None):
        """A small GEMM over a fresh or given client comes back right."""
        pb = self.pb
        own = c is None
        c = c or S.Client(self.d.shm_socket)
        try:
            c.reset()
            a = H.make_matrix(pb, self.rng, 2, 64, H.DT_E4M3, H.SL_ROW)
            b = H.make_matrix(pb, self.rng, 3, 64, H.DT_E4M3, H.SL_NONE)
            d_off = c.alloc(2 * 3 * 4)
            comp = c.gemm(m=2, k=64, n=3, a=put_matrix(c, a), b=put_matrix(c, b), d=d_off,
                          d_capacity=24, out_dtype=pb.DTYPE_FP32)
            got = H.decode_output(pb.Matrix(rows=2, cols=3, dtype=pb.DTYPE_FP32, data=c.read(d_off, 24)))
            self.assertLessEqual(H.rel_error(got, H.reference(a, b)), 1e-4)
        finally:
            if own:
                c.close()

    def test_bad_descriptors_fail_alone(self):
        with S.Client(self.d.shm_socket) as c:
            base = c.data_off
            size = c.size
            cases = [
                (raw_entry(opcode=9, request_id=1), "unknown opcode 9"),
                (raw_entry(opcode=1, a_dtype=1, m=4, k=16, b_source=1, b_dtype=1, n=4, request_id=2,
                           a_offset=size - 8, b_offset=base, d_offset=base + 4096, d_capacity=64),
                 "outside the data"),
                (raw_entry(opcode=1, a_dtype=1, m=4, k=16, b_source=1, b_dtype=1, n=4, request_id=3,
                           a_offset=2**64 - 16, b_offset=base, d_offset=base + 4096, d_capacity=64),
                 "outside the data"),
                (raw_entry(opcode=1, a_dtype=1, m=4, k=16, b_source=1, b_dtype=1, n=4, request_id=4,
                           a_offset=0, b_offset=base, d_offset=base + 4096, d_capacity=64),
                 "outside the data"),
                (raw_entry(opcode=1, a_dtype=9, m=4, k=16, request_id=5, a_offset=base),
                 "a.dtype 9 is not a known DType"),
                (raw_entry(opcode=1, a_dtype=1, a_layout=2, m=4, k=16, b_source=1, b_dtype=1, n=4,
                           request_id=6, a_offset=base, a_scales_offset=base + 1, b_offset=base,
                           d_offset=base + 4096, d_capacity=64), "not 4-byte aligned"),
                (raw_entry(opcode=1, a_dtype=1, m=4, k=16, b_source=1, b_dtype=1, n=4, request_id=7,
                           a_offset=base, b_offset=base, d_offset=base + 4096, d_capacity=8),
                 "D needs 32 bytes"),
                (raw_entry(opcode=1, a_dtype=1, m=4, k=16, b_source=3, request_id=8, a_offset=base),
                 "B source 3"),
                (raw_entry(opcode=1, a_dtype=1, m=0, k=16, request_id=9, a_offset=base), "rows and cols"),
                (raw_entry(opcode=1, a_dtype=1, m=4, k=16, b_source=0, weight_id=77, request_id=10,
                           a_offset=base, d_offset=base + 4096, d_capacity=64), "no weight with weight_id 77"),
            ]
            for entry, fragment in cases:
                c.submit(entry)
                rid = S.SQE.unpack(entry)[12]
                comp = c.wait(rid)
                self.assertNotEqual(comp.status, 0, fragment)
                self.assertIn(fragment, comp.message)
            self.healthy(c)
            # Random bytes: every entry answered, gemmd unharmed.
            rng = np.random.default_rng()
            for i in range(300):
                raw = bytearray(rng.integers(0, 256, 128, dtype=np.uint8).tobytes())
                raw[24:32] = struct.pack("<Q", 1000 + i)
                c.submit(bytes(raw))
            answered = set()
            for i in range(300):
                answered.add(c.wait(1000 + i).request_id)
            self.assertEqual(len(answered), 300)
            self.healthy(c)
        self.healthy()

    def test_ring_index_jump_ends_only_that_session(self):
        bystander = S.Client(self.d.shm_socket)
        c = S.Client(self.d.shm_socket)
        c._set_u32(S.SQ_TAIL, c._u32(S.SQ_HEAD) + 100000)
        os.eventfd_write(c.sq_efd, 1)
        c.sock.settimeout(10)
        self.assertEqual(c.sock.recv(16), b"", "gemmd should close a session whose ring lies")
        c.close()
        self.healthy(bystander)
        bystander.close()
        self.assertIn("sq_tail moved past the ring", self.d.log_text())

    def _big_weight(self, c):
        pb = self.pb
        w = H.make_matrix(pb, self.rng, 4096, 4096, H.DT_E4M3, H.SL_NONE)
        self.d.stub().RegisterWeight(iter([pb.RegisterWeightRequest(name="big", weight=w)]))
        return c.weight_info(name="big")[0]

    def test_disconnect_mid_request_and_kill_cycles(self):
        with S.Client(self.d.shm_socket) as probe:
            wid = self._big_weight(probe)
        # A client that leaves while its long GEMM runs.
        c = S.Client(self.d.shm_socket)
        a_off = c.alloc(4096 * 4096)
        c.write(a_off, bytes(4096 * 4096))
        d_off = c.alloc(4096 * 4096 * 2)
        c.gemm_async(m=4096, k=4096, a=(a_off, 1, 0, 0), weight_id=wid, d=d_off, d_capacity=4096 * 4096 * 2)
        time.sleep(0.2)
        c.close()
        self.healthy()
        time.sleep(0.5)
        fds0, rss0 = self.d.open_fds(), self.d.rss_bytes()
        # 1000 processes that connect, submit, and die (SIGKILL'd or exiting), half of them
        # with a request in flight.
        path = self.d.shm_socket
        for i in range(1000):
            pid = os.fork()
            if pid == 0:
                try:
                    cc = S.Client(path, arena_bytes=1 << 20, entries=8)
                    if i % 2:
                        ao = cc.alloc(64)
                        do = cc.alloc(64)
                        cc.gemm_async(m=1, k=64, n=1, a=(ao, 1, 0, 0), b=(ao, 1, 0, 0), d=do, d_capacity=64)
                    if i % 3 == 0:
                        os.kill(os.getpid(), signal.SIGKILL)
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
        time.sleep(1.0)
        self.healthy()
        deadline = time.time() + 10
        while time.time() < deadline and self.d.open_fds() > fds0:
            time.sleep(0.1)
        self.assertLessEqual(self.d.open_fds(), fds0, "gemmd leaks descriptors")
        # ThreadSanitizer's own shadow and history memory grows with the threads' traffic;
        # AddressSanitizer's allocator keeps redzones and freed chunks in caches of its own
        # (33.9 MB in one run). A leaked 1 MiB arena per client would be 1000 MiB.
        bound = (256 if os.environ.get("GEMMD_TSAN") else 64 if "ASAN_OPTIONS" in os.environ else 32) << 20
        self.assertLess(self.d.rss_bytes() - rss0, bound, "gemmd's memory grew with dead clients")
        _, body, _ = self.d.http("/metrics")
        gauge = [l for l in body.decode().splitlines() if l.startswith("gemmd_shm_clients ")]
        self.assertEqual(gauge, ["gemmd_shm_clients 0"])

    def test_uid_not_allowed(self):
        if os.getuid() != 0:
            self.skipTest("needs root to connect as another uid")
        path = self.d.shm_socket

        def connect():
            try:
                S.Client(path)
                return "accepted"
            except S.ShmError as e:
                return "%d %s" % (e.code, e.message)
        answer = H.as_nobody(connect)
        self.assertTrue(answer.startswith("7 uid 65534 gid 65534 is not allowed"), answer)
        self.assertIn("--shm-allow-uids", answer)
        self.healthy()

    def test_flooding_client_is_held_to_its_limit(self):
        """A client with 64 requests in its ring holds at most its 4 in the daemon, so a
        bystander's request is served after those few, not after the whole flood. Checked by
        counting the flood's completions during the bystander's wait (load on the test
        machine changes how long that takes, not how many)."""
        d2 = H.Gemmd("--max-inflight-per-client", "4")
        self.addCleanup(d2.stop)
        pb = self.pb
        k = 2048
        w = H.make_matrix(pb, self.rng, 2048, k, H.DT_E4M3, H.SL_NONE)
        d2.stub().RegisterWeight(iter([pb.RegisterWeightRequest(name="w", weight=w)]))
        flood = S.Client(d2.shm_socket)
        self.addCleanup(flood.close)
        other = S.Client(d2.shm_socket)
        self.addCleanup(other.close)
        wid = flood.weight_info(name="w")[0]
        self.assertEqual(flood.max_inflight, 4)
        a = H.make_matrix(pb, self.rng, 1, k, H.DT_E4M3, H.SL_NONE)
        ao = other.alloc(k)
        other.write(ao, a.data)
        do = other.alloc(2048 * 2)
        a_off = flood.alloc(512 * k)
        flood.write(a_off, bytes(512 * k))
        outs = [flood.alloc(512 * 2048 * 2) for _ in range(8)]
        ids = [flood.gemm_async(m=512, k=k, a=(a_off, 1, 0, 0), weight_id=wid, d=outs[i % 8],
                                d_capacity=512 * 2048 * 2)
               for i in range(64)]  # far more than the limit: the rest wait in the ring
        time.sleep(0.05)
        flood._consume()
        done_before = len(flood._done)
        other.gemm(m=1, k=k, a=(ao, 1, 0, 0), weight_id=wid, d=do, d_capacity=2048 * 2)
        flood._consume()
        done_during = len(flood._done) - done_before
        peak = d2.stub().GetStats(pb.GetStatsRequest()).inflight_requests
        for _ in range(4):
            other.gemm(m=1, k=k, a=(ao, 1, 0, 0), weight_id=wid, d=do, d_capacity=2048 * 2)
            peak = max(peak, d2.stub().GetStats(pb.GetStatsRequest()).inflight_requests)
        self.assertLessEqual(peak, 4 + 1, "the flooder had more than its 4 in flight")
        for rid in ids:
            self.assertEqual(flood.wait(rid).status, 0)
        pending_before = 64 - done_before
        # Where the backend finished the flood before the bystander came (a GPU does 64 of
        # these in about a millisecond) there is no queue to jump, and only the peak counts.
        if pending_before > 16:
            # Ahead of the bystander: the flooder's 4 in the daemon, and at most 4 more that
            # may share its batch; a few more may publish between the two counts.
            self.assertLessEqual(done_during, 12,
                                 "%d of the flood's %d pending requests were served while the "
                                 "bystander waited" % (done_during, pending_before))


class Metrics(unittest.TestCase):
    def test_shm_label_and_gauge(self):
        pb, _, _, _ = H.stubs()
        with H.Gemmd() as d:
            c1, c2 = S.Client(d.shm_socket), S.Client(d.shm_socket)
            _, body, _ = d.http("/metrics")
            self.assertIn("gemmd_shm_clients 2", body.decode())
            ao = c1.alloc(16)
            do = c1.alloc(64)
            for _ in range(3):
                c1.gemm(m=1, k=16, n=1, a=(ao, 1, 0, 0), b=(ao, 1, 0, 0), d=do, d_capacity=64)
            c1.submit(raw_entry(opcode=1, a_dtype=9, m=1, k=1, request_id=99))
            self.assertEqual(c1.wait(99).status, 3)
            c1.close()
            c2.close()
            time.sleep(0.3)
            _, body, _ = d.http("/metrics")
            text = body.decode()
            self.assertIn('gemmd_requests_total{transport="shm",code="OK"} 3', text)
            self.assertIn('gemmd_requests_total{transport="shm",code="INVALID_ARGUMENT"} 1', text)
            self.assertIn("gemmd_shm_clients 0", text)
            rc, out = H.promtool_check(body)
            self.assertEqual(rc, 0, out)


class Crowding(unittest.TestCase):
    @staticmethod
    def _until(cond, seconds=5.0):
        deadline = time.time() + seconds
        while not cond() and time.time() < deadline:
            time.sleep(0.005)
        return cond()

    @staticmethod
    def _held_gemm(c):
        """Submits a tiny GEMM that --max-batch-delay-us keeps in flight: its client is
        busy until the answer, whatever the test's own timing. The request id."""
        ao, do = c.alloc(16), c.alloc(64)
        rid, raw = c.gemm_entry(m=1, k=16, n=1, a=(ao, 1, 0, 0), b=(ao, 1, 0, 0), d=do, d_capacity=64)
        c.submit(raw)
        return rid

    def test_crowded_word_follows_the_busy_clients(self):
        """Past --shm-spinning-clients busy clients (a request in flight, or one sent within
        the last 20 ms) every header says crowded, a new client's from its connect; clients
        that are connected and idle do not count, and it clears once the busy ones go
        quiet."""
        with H.Gemmd("--shm-spinning-clients", "1", "--max-batch-delay-us", "1000000") as d:
            c1, c2, c3 = (S.Client(d.shm_socket) for _ in range(3))
            clients = [c1, c2, c3]
            self.assertEqual([c.crowded() for c in clients], [False] * 3)  # connected, idle
            r1 = self._held_gemm(c1)
            time.sleep(0.05)  # one busy client: at the bound, not past it
            self.assertEqual([c.crowded() for c in clients], [False] * 3)
            r2 = self._held_gemm(c2)
            self.assertTrue(self._until(lambda: all(c.crowded() for c in clients), 0.5))
            c4 = S.Client(d.shm_socket)  # told at its WELCOME, while both are in flight
            clients.append(c4)
            self.assertTrue(c4.crowded())
            self.assertEqual(c1.wait(r1).status, 0)
            self.assertEqual(c2.wait(r2).status, 0)
            self.assertTrue(self._until(lambda: not any(c.crowded() for c in clients)))
            for c in clients:
                c.close()
        with H.Gemmd() as d:  # the default: never fewer than one client may spin
            with S.Client(d.shm_socket) as c:
                self.assertFalse(c.crowded())


class Refusals(unittest.TestCase):
    def test_bad_hello(self):
        with H.Gemmd() as d:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.connect(d.shm_socket)
            s.send(b"hello there, not a HELLO")
            reply = s.recv(256)
            status = struct.unpack_from("<i", reply, 12)[0]
            self.assertEqual(status, 3)
            self.assertIn(b"expected a 32-byte GEMMDSH1 HELLO", reply)
            s.close()
            with self.assertRaises(S.ShmError) as e:
                S.Client(d.shm_socket, entries=3)
            self.assertIn("power of two", e.exception.message)


if __name__ == "__main__":
    unittest.main(verbosity=2)
