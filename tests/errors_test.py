"""Every status code of docs/api.md §2, provoked over gRPC and checked with its message; garbage
bytes; and after each, gemmd still serves correctly."""

import subprocess
import time
import unittest

import grpc
import numpy as np

import harness as H


def identity(x):
    return x


class StatusCodes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pb, _, _, _ = H.stubs()
        cls.rng = np.random.default_rng()

    def expect(self, code, fragment, fn, *args, **kwargs):
        with self.assertRaises(grpc.RpcError) as e:
            fn(*args, **kwargs)
        self.assertEqual(e.exception.code(), code, e.exception.details())
        self.assertIn(fragment, e.exception.details())
        return e.exception.details()

    def still_serves(self, stub):
        pb = self.pb
        a = H.make_matrix(pb, self.rng, 3, 40, H.DT_E4M3, H.SL_ROW)
        b = H.make_matrix(pb, self.rng, 5, 40, H.DT_E4M3, H.SL_TENSOR)
        r = stub.Gemm(pb.GemmRequest(a=a, b=b, out_dtype=pb.DTYPE_FP32))
        self.assertLessEqual(H.rel_error(H.decode_output(r.d), H.reference(a, b)), 1e-4)

    def test_invalid_argument(self):
        pb = self.pb
        IA = grpc.StatusCode.INVALID_ARGUMENT
        with H.Gemmd() as d:
            stub = d.stub()
            good_b = H.make_matrix(pb, self.rng, 4, 16, H.DT_E4M3, H.SL_NONE)
            cases = [
                ("a.scales has 3 values; SCALE_LAYOUT_ROW needs a.rows = 8",
                 pb.GemmRequest(a=pb.Matrix(rows=8, cols=16, dtype=pb.DTYPE_FP8_E4M3, data=bytes(128),
                                            scale_layout=pb.SCALE_LAYOUT_ROW, scales=[1, 2, 3]), b=good_b)),
                ("a.data has 100 bytes; 8 x 16 DTYPE_BF16 needs 256",
                 pb.GemmRequest(a=pb.Matrix(rows=8, cols=16, dtype=pb.DTYPE_BF16, data=bytes(100)), b=good_b)),
                ("a is 0 x 16",
                 pb.GemmRequest(a=pb.Matrix(rows=0, cols=16, dtype=pb.DTYPE_FP8_E4M3), b=good_b)),
                ("a.dtype is DTYPE_UNSPECIFIED",
                 pb.GemmRequest(a=pb.Matrix(rows=1, cols=16, data=bytes(16)), b=good_b)),
                ("a.dtype 9 is not a known DType",
                 pb.GemmRequest(a=pb.Matrix(rows=1, cols=16, dtype=9, data=bytes(16)), b=good_b)),
                ("a.scale_layout 7 is not a known ScaleLayout",
                 pb.GemmRequest(a=pb.Matrix(rows=1, cols=16, dtype=1, data=bytes(16), scale_layout=7), b=good_b)),
                ("a.scale_layout SCALE_LAYOUT_BLOCK_128X128 is not allowed here",
                 pb.GemmRequest(a=pb.Matrix(rows=1, cols=16, dtype=1, data=bytes(16), scale_layout=4, scales=[1]),
                                b=good_b)),
                ("b.scale_layout SCALE_LAYOUT_BLOCK_1X128 is not allowed here",
                 pb.GemmRequest(a=pb.Matrix(rows=1, cols=16, dtype=1, data=bytes(16)),
                                b=pb.Matrix(rows=4, cols=16, dtype=1, data=bytes(64), scale_layout=3, scales=[1] * 4))),
                ("a.scales has 1 values; SCALE_LAYOUT_BLOCK_1X128 needs a.rows x ceil(a.cols/128) = 2 x 2 = 4",
                 pb.GemmRequest(a=pb.Matrix(rows=2, cols=200, dtype=1, data=bytes(400), scale_layout=3, scales=[1]),
                                b=pb.Matrix(rows=1, cols=200, dtype=1, data=bytes(200)))),
                ("out_dtype DTYPE_FP8_E4M3 is not an output type",
                 pb.GemmRequest(a=pb.Matrix(rows=1, cols=16, dtype=1, data=bytes(16)), b=good_b,
                                out_dtype=pb.DTYPE_FP8_E4M3)),
                ("a is missing", pb.GemmRequest(b=good_b)),
                ("no B: set one of weight_id, weight_name or b",
                 pb.GemmRequest(a=pb.Matrix(rows=1, cols=16, dtype=1, data=bytes(16)))),
                ("a.cols = 17 but b has k = 16",
                 pb.GemmRequest(a=pb.Matrix(rows=1, cols=17, dtype=1, data=bytes(17)), b=good_b)),
                ("weight_id 0 names no weight",
                 pb.GemmRequest(a=pb.Matrix(rows=1, cols=16, dtype=1, data=bytes(16)), weight_id=0)),
            ]
            for fragment, req in cases:
                self.expect(IA, fragment, stub.Gemm, req)
            # Against a registered weight: K must match.
            stub.RegisterWeight(iter([pb.RegisterWeightRequest(name="w16", weight=good_b)]))
            self.expect(IA, "a.cols = 20 but weight 'w16' has k = 16", stub.Gemm,
                        pb.GemmRequest(a=pb.Matrix(rows=1, cols=20, dtype=1, data=bytes(20)), weight_name="w16"))
            # Garbage bytes where a GemmRequest should be, through a raw method handle.
            ch = d.channel()
            raw = ch.unary_unary("/gemmd.v1.GemmService/Gemm", request_serializer=identity,
                                 response_deserializer=identity)
            self.expect(IA, "not a valid gemmd.v1.GemmRequest", raw, b"\x2a\x7f\x00garbage")
            self.expect(IA, "not a valid gemmd.v1.GemmRequest", raw, bytes(range(256)) * 4)
            # Registration streams that lie about their size, or name nothing.
            reg = stub.RegisterWeight
            self.expect(IA, "weight.data runs past 64 bytes", reg, iter([
                pb.RegisterWeightRequest(name="x", weight=pb.Matrix(rows=4, cols=16, dtype=1, data=bytes(60))),
                pb.RegisterWeightRequest(weight=pb.Matrix(data=bytes(10)))]))
            self.expect(IA, "the stream ended after 60 of 64 weight.data bytes", reg, iter([
                pb.RegisterWeightRequest(name="x", weight=pb.Matrix(rows=4, cols=16, dtype=1, data=bytes(60)))]))
            self.expect(IA, "name must be 1 to 255 characters", reg, iter([
                pb.RegisterWeightRequest(weight=pb.Matrix(rows=4, cols=16, dtype=1, data=bytes(64)))]))
            self.expect(IA, "weight is missing", reg, iter([pb.RegisterWeightRequest(name="y")]))
            self.expect(IA, "set weight_id", stub.UnregisterWeight, pb.UnregisterWeightRequest())
            # Streams answer a bad request in-band and go on.
            good = pb.GemmRequest(request_id=2, a=pb.Matrix(rows=1, cols=16, dtype=1, data=bytes(16)), b=good_b)
            resps = list(stub.GemmStream(iter([pb.GemmRequest(request_id=1), good])))
            by_id = {r.request_id: r for r in resps}
            self.assertEqual(by_id[1].error_code, grpc.StatusCode.INVALID_ARGUMENT.value[0])
            self.assertIn("a is missing", by_id[1].error_message)
            self.assertEqual(by_id[2].error_code, 0)
            self.still_serves(stub)
            # Every refusal was counted.
            status, body, _ = d.http("/metrics")
            line = [l for l in body.decode().splitlines()
                    if l.startswith('gemmd_requests_total{transport="grpc",code="INVALID_ARGUMENT"}')]
            self.assertEqual(len(line), 1)
            self.assertEqual(float(line[0].split()[-1]), len(cases) + 1 + 2 + 1)

    def test_not_found_already_exists_unimplemented(self):
        pb = self.pb
        with H.Gemmd() as d:
            stub = d.stub()
            a = pb.Matrix(rows=1, cols=16, dtype=1, data=bytes(16))
            self.expect(grpc.StatusCode.NOT_FOUND, "no weight with weight_id 42 is registered",
                        stub.Gemm, pb.GemmRequest(a=a, weight_id=42))
            self.expect(grpc.StatusCode.NOT_FOUND, "no weight named 'ghost' is registered",
                        stub.Gemm, pb.GemmRequest(a=a, weight_name="ghost"))
            self.expect(grpc.StatusCode.NOT_FOUND, "no weight named 'ghost'",
                        stub.UnregisterWeight, pb.UnregisterWeightRequest(name="ghost"))
            w = pb.Matrix(rows=2, cols=16, dtype=1, data=bytes(32))
            stub.RegisterWeight(iter([pb.RegisterWeightRequest(name="dup", weight=w)]))
            self.expect(grpc.StatusCode.ALREADY_EXISTS, "a weight named 'dup' already exists",
                        stub.RegisterWeight, iter([pb.RegisterWeightRequest(name="dup", weight=w)]))
            raw = d.channel().unary_unary("/gemmd.v1.GemmService/Nope", request_serializer=identity,
                                          response_deserializer=identity)
            self.expect(grpc.StatusCode.UNIMPLEMENTED, "/gemmd.v1.GemmService/Nope", raw, b"")
            self.still_serves(stub)

    def test_resource_exhausted_limits(self):
        pb = self.pb
        RE = grpc.StatusCode.RESOURCE_EXHAUSTED
        with H.Gemmd("--max-m", "64", "--max-n", "32", "--max-k", "256", "--max-message-bytes", "1M",
                     "--weight-memory-bytes", "4K") as d:
            stub = d.stub()
            self.expect(RE, "a.rows = 65 is over the limit 64 (--max-m)", stub.Gemm,
                        pb.GemmRequest(a=pb.Matrix(rows=65, cols=16, dtype=1, data=bytes(65 * 16)),
                                       b=pb.Matrix(rows=1, cols=16, dtype=1, data=bytes(16))))
            self.expect(RE, "b.rows = 33 is over the limit 32 (--max-n)", stub.Gemm,
                        pb.GemmRequest(a=pb.Matrix(rows=1, cols=16, dtype=1, data=bytes(16)),
                                       b=pb.Matrix(rows=33, cols=16, dtype=1, data=bytes(33 * 16))))
            self.expect(RE, "a.cols = 300 is over the limit 256 (--max-k)", stub.Gemm,
                        pb.GemmRequest(a=pb.Matrix(rows=1, cols=300, dtype=1, data=bytes(300)), weight_id=1))
            # Over the message size limit: gRPC itself refuses it.
            with self.assertRaises(grpc.RpcError) as e:
                stub.Gemm(pb.GemmRequest(a=pb.Matrix(rows=64, cols=256, dtype=5, data=bytes(2 << 20))))
            self.assertEqual(e.exception.code(), RE)
            # Over the weight budget: 4 KiB.
            self.expect(RE, "over the whole budget", stub.RegisterWeight, iter([pb.RegisterWeightRequest(
                name="big", weight=pb.Matrix(rows=32, cols=256, dtype=1, data=bytes(32 * 256)))]))
            small = pb.Matrix(rows=8, cols=256, dtype=1, data=bytes(8 * 256))
            stub.RegisterWeight(iter([pb.RegisterWeightRequest(name="s1", weight=small)]))
            self.expect(RE, "only 2048 of the 4096-byte budget are free", stub.RegisterWeight,
                        iter([pb.RegisterWeightRequest(name="s2", weight=pb.Matrix(
                            rows=12, cols=256, dtype=1, data=bytes(12 * 256)))]))
            self.still_serves(stub)

    # The daemons of the tests that hold the engine with one long GEMM run it whole: split
    # into pieces (--split-flops), small requests would be served between them.
    WHOLE = ("--split-flops", "1e15")  # the exponent form --help uses

    def test_registration_streams_are_bounded(self):
        """--max-registrations streams may be past their first message at once; one more is
        RESOURCE_EXHAUSTED at once (and retrying after one is done works)."""
        import threading

        pb = self.pb
        n = k = 1024
        with H.Gemmd("--max-registrations", "2") as d:
            stub = d.stub()
            go = threading.Event()

            def slow(name):
                yield pb.RegisterWeightRequest(name=name, weight=pb.Matrix(rows=n, cols=k, dtype=pb.DTYPE_FP8_E4M3))
                go.wait(30)
                yield pb.RegisterWeightRequest(weight=pb.Matrix(data=bytes(n * k)))
            held = [stub.RegisterWeight.future(slow("held-%d" % i)) for i in range(2)]
            time.sleep(0.5)  # both first messages are in
            with self.assertRaises(grpc.RpcError) as e:
                stub.RegisterWeight(iter([pb.RegisterWeightRequest(
                    name="third", weight=pb.Matrix(rows=n, cols=k, dtype=pb.DTYPE_FP8_E4M3, data=bytes(n * k)))]),
                    timeout=10)
            self.assertEqual(e.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assertIn("--max-registrations", e.exception.details())
            go.set()
            for f in held:
                self.assertEqual(f.result(timeout=30).n, n)
            info = stub.RegisterWeight(iter([pb.RegisterWeightRequest(
                name="third", weight=pb.Matrix(rows=n, cols=k, dtype=pb.DTYPE_FP8_E4M3, data=bytes(n * k)))]))
            self.assertEqual(info.name, "third")

    def test_registration_refused_by_free_budget_before_its_data(self):
        """A RegisterWeight whose weight fits the whole budget but not what is free (beside the
        registered weights and the other uploads in progress) is refused on its first message,
        while its data has not come, with RESOURCE_EXHAUSTED naming the free bytes."""
        import threading

        pb = self.pb
        n, k = 512, 1024  # 512 KiB of E4M3 each; the budget holds one
        header = pb.Matrix(rows=n, cols=k, dtype=pb.DTYPE_FP8_E4M3)
        with H.Gemmd("--weight-memory-bytes", str(800 * 1024)) as d:
            stub = d.stub()
            go = threading.Event()

            def held_open(name):
                yield pb.RegisterWeightRequest(name=name, weight=header)
                go.wait(30)  # the data would come only now
                yield pb.RegisterWeightRequest(weight=pb.Matrix(data=bytes(n * k)))

            try:
                # Beside an upload in progress that claims most of the budget.
                first = stub.RegisterWeight.future(held_open("first"))
                time.sleep(0.5)
                t0 = time.monotonic()
                with self.assertRaises(grpc.RpcError) as e:
                    stub.RegisterWeight(held_open("second"), timeout=20)
                self.assertEqual(e.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
                self.assertLess(time.monotonic() - t0, 10, "refused only when the data came")
                self.assertIn("registrations in progress", e.exception.details())
                go.set()
                self.assertEqual(first.result(timeout=30).name, "first")
                # Beside a registered weight.
                go.clear()
                t0 = time.monotonic()
                with self.assertRaises(grpc.RpcError) as e:
                    stub.RegisterWeight(held_open("third"), timeout=20)
                self.assertEqual(e.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
                self.assertLess(time.monotonic() - t0, 10, "refused only when the data came")
                self.assertRegex(e.exception.details(), r"only \d+ of the \d+-byte budget are free")
            finally:
                go.set()
            # Room again once the weight is removed.
            stub.UnregisterWeight(pb.UnregisterWeightRequest(name="first"))
            info = stub.RegisterWeight(iter([pb.RegisterWeightRequest(
                name="third", weight=pb.Matrix(rows=n, cols=k, dtype=pb.DTYPE_FP8_E4M3, data=bytes(n * k)))]))
            self.assertEqual(info.name, "third")

    def _occupy_engine(self, d, stub):
        """Starts a long GEMM and returns its future once it runs on the engine. Its rows are
        sized from short GEMMs of the same weight, for about 3 s of this machine's CPU
        backend, since build machines differ several-fold in speed and the tests need the
        engine held longer than their own waits. The faster of two probes sets the size,
        and it is at least 2048 rows (about 1 s here unloaded): a probe slowed by other
        tests' load on the CPUs would otherwise size a GEMM that ends early once the load
        passes. At most 8192 rows, so that load cannot stretch it past the small requests'
        60 s wait."""
        pb = self.pb
        n, k, probe = 4096, 8192, 128
        w = H.make_matrix(pb, self.rng, n, k, H.DT_E4M3, H.SL_NONE)
        stub.RegisterWeight(iter([pb.RegisterWeightRequest(name="long", weight=w)]))
        a = H.make_matrix(pb, self.rng, probe, k, H.DT_E4M3, H.SL_NONE)
        times = []
        for _ in range(2):
            t0 = time.time()
            stub.Gemm(pb.GemmRequest(a=a, weight_name="long"))
            times.append(time.time() - t0)
        per_row = min(times) / probe
        rows = int(min(8192, max(2048, 3.0 / per_row))) // 128 * 128
        self.long_a = H.make_matrix(pb, self.rng, rows, k, H.DT_E4M3, H.SL_NONE)
        return self._start_long(d, stub)

    def _longer(self):
        """Twice the long GEMM's rows (at most 8192), for a test whose engine was released
        before its waits ended; False when it is at the bound already."""
        rows = self.long_a.rows
        if rows >= 8192:
            return False
        self.long_a = H.make_matrix(self.pb, self.rng, min(8192, 2 * rows), self.long_a.cols,
                                    H.DT_E4M3, H.SL_NONE)
        return True

    def _start_long(self, d, stub):
        """The long GEMM of _occupy_engine again, on any connection; its future once it runs."""
        fut = stub.Gemm.future(self.pb.GemmRequest(a=self.long_a, weight_name="long"))
        deadline = time.time() + 60
        while time.time() < deadline and not (self._metric(d, "gemmd_inflight_requests") >= 1
                                              and self._metric(d, "gemmd_queue_depth") == 0):
            time.sleep(0.01)
        return fut

    def _metric(self, d, name_and_labels):
        _, body, _ = d.http("/metrics")
        for line in body.decode().splitlines():
            if line.startswith(name_and_labels + " "):
                return float(line.split()[-1])
        return 0.0

    @unittest.skipIf(H.BACKEND == "cuda", "holds the engine with a GEMM that takes the CPU "
                     "seconds; the GPU is done in microseconds (queue and deadline logic is the "
                     "loop's, engine-independent, and runs on the CPU backend)")
    def test_queue_full_and_per_connection_limit(self):
        pb = self.pb
        with H.Gemmd("--queue-depth", "3", "--max-inflight-per-client", "4", *self.WHOLE) as d:
            stub = d.stub()
            fut = self._occupy_engine(d, stub)
            a = pb.Matrix(rows=1, cols=16, dtype=1, data=bytes(16))
            b = pb.Matrix(rows=1, cols=16, dtype=1, data=bytes(16))
            # One connection: 1 in flight already; 3 more fit its limit of 4 and the queue of 3;
            # the rest are refused, by the queue bound or the connection bound.
            futures = [stub.Gemm.future(pb.GemmRequest(request_id=i, a=a, b=b)) for i in range(8)]
            codes = []
            for f in futures:
                try:
                    f.result(timeout=60)
                    codes.append("OK")
                except grpc.RpcError as e:
                    codes.append(e.code().name)
                    self.assertTrue("--queue-depth" in e.details() or "--max-inflight-per-client" in e.details(),
                                    e.details())
            self.assertEqual(codes.count("OK"), 3, codes)
            self.assertEqual(codes.count("RESOURCE_EXHAUSTED"), 5, codes)
            fut.result(timeout=120)
            # Another connection is not held to the first one's limit.
            other = d.stub()
            fut = self._start_long(d, other)
            stream_reqs = [pb.GemmRequest(request_id=i, a=a, b=b) for i in range(6)]
            resps = list(stub.GemmStream(iter(stream_reqs)))
            self.assertEqual(len(resps), 6)
            refused = [r for r in resps if r.error_code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]]
            self.assertEqual(len(refused), 3, [(r.request_id, r.error_code) for r in resps])
            fut.result(timeout=120)
            self.still_serves(stub)

    @unittest.skipIf(H.BACKEND == "cuda", "holds the engine with a GEMM that takes the CPU "
                     "seconds; the GPU is done in microseconds (queue and deadline logic is the "
                     "loop's, engine-independent, and runs on the CPU backend)")
    def test_deadline_exceeded_before_dispatch_spends_no_compute(self):
        pb = self.pb
        with H.Gemmd(*self.WHOLE) as d:
            stub = d.stub()
            fut = self._occupy_engine(d, stub)
            batches_before = self._metric(d, "gemmd_batches_total")
            a = pb.Matrix(rows=1, cols=16, dtype=1, data=bytes(16))
            b = pb.Matrix(rows=1, cols=16, dtype=1, data=bytes(16))
            with self.assertRaises(grpc.RpcError) as e:
                stub.Gemm(pb.GemmRequest(a=a, b=b), timeout=0.2)
            self.assertEqual(e.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
            fut.result(timeout=120)
            deadline = time.time() + 10
            while time.time() < deadline and self._metric(
                    d, 'gemmd_requests_total{transport="grpc",code="DEADLINE_EXCEEDED"}') < 1:
                time.sleep(0.05)
            self.assertEqual(self._metric(d, 'gemmd_requests_total{transport="grpc",code="DEADLINE_EXCEEDED"}'), 1)
            # Only the long GEMM ran a batch: the expired request spent nothing.
            self.assertEqual(self._metric(d, "gemmd_batches_total"), batches_before + 1)
            self.still_serves(stub)


    @unittest.skipIf(H.BACKEND == "cuda", "holds the engine with a GEMM that takes the CPU "
                     "seconds; the GPU is done in microseconds")
    def test_session_deadline_ends_its_stream(self):
        """libgemmclient's GEMM session keeps one GemmStream open; a request on it that is not
        answered within the call's deadline fails DEADLINE_EXCEEDED at that deadline (the
        stream is cancelled, since one request on it cannot be), and the next request goes
        on a new stream."""
        with H.Gemmd(*self.WHOLE) as d:
            stub = d.stub()
            fut = self._occupy_engine(d, stub)
            while True:
                t0 = time.time()
                p = subprocess.run([H.repo_path("client/gemmctl/gemmctl"), "--addr", d.address,
                                    "--timeout-ms", "300", "gemm", "--m", "1", "--n", "16", "--k", "128",
                                    "--session", "2"], capture_output=True, text=True, timeout=60)
                took = time.time() - t0
                if "0 answered OK" in p.stdout or took >= 2.0:
                    break
                # A request answered within the deadlines found the engine free: the long
                # GEMM ended early (its probe ran slowed by other tests' load, or the scrapes
                # that saw it start came late), so the run shows nothing: again, held
                # longer. A session that took longer than its deadlines is checked.
                fut.result(timeout=120)
                self.assertTrue(self._longer(), "8192 rows did not hold the engine for the session")
                fut = self._start_long(d, stub)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("2 requests, 0 answered OK, 2 failed", p.stdout)
            self.assertIn("DEADLINE_EXCEEDED", p.stderr)
            # Two deadlines of 0.3 s, not the engine's seconds.
            self.assertLess(took, 2.0, p.stdout)
            fut.result(timeout=120)
            self.still_serves(stub)

if __name__ == "__main__":
    unittest.main(verbosity=2)
