"""gemmd over gRPC, driven by Python grpcio (stubs generated from proto/ at test time):
results against the tests' own FP64 reference for every dtype x layout x output, ragged
shapes, inline and registered B, mixed E4M3/E5M2, batches of many weights, GemmStream,
weights add/list/remove, GetStats, health Check and Watch."""

import threading
import time
import unittest

import grpc
import numpy as np

import harness as H


class Correctness(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = H.Gemmd()
        cls.pb, cls.pbg, _, _ = H.stubs()
        cls.stub = cls.d.stub()
        cls.rng = np.random.default_rng()

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def check(self, resp, a, b, out):
        pb = self.pb
        self.assertEqual(resp.d.rows, a.rows)
        self.assertEqual(resp.d.cols, b.rows)
        self.assertEqual(resp.d.dtype, out if out != pb.DTYPE_UNSPECIFIED else pb.DTYPE_BF16)
        err = H.output_error(H.decode_output(resp.d), H.reference(a, b), resp.d.dtype)
        tol = H.TOLERANCE[resp.d.dtype]
        self.assertLessEqual(err, tol, "%dx%dx%d A=%d/%d B=%d/%d out=%d: error %.3g > %g" % (
            a.rows, b.rows, a.cols, a.dtype, a.scale_layout, b.dtype, b.scale_layout, out, err, tol))

    def test_every_dtype_layout_output_inline(self):
        pb = self.pb
        shapes = [(1, 1, 1), (7, 129, 1000), (3, 17, 128), (1, 300, 129), (16, 8, 257), (5, 33, 64)]
        a_layouts = [H.SL_NONE, H.SL_TENSOR, H.SL_ROW, H.SL_1X128]
        b_layouts = [H.SL_NONE, H.SL_TENSOR, H.SL_ROW, H.SL_128X128]
        dtypes = [H.DT_E4M3, H.DT_E5M2, H.DT_BF16, H.DT_FP16, H.DT_FP32]
        outs = [pb.DTYPE_UNSPECIFIED, pb.DTYPE_BF16, pb.DTYPE_FP16, pb.DTYPE_FP32]
        i = 0
        reqs = []
        for adt in dtypes:
            for al in a_layouts:
                for bdt in dtypes:
                    for bl in b_layouts:
                        m, n, k = shapes[i % len(shapes)]
                        out = outs[i % len(outs)]
                        i += 1
                        a = H.make_matrix(pb, self.rng, m, k, adt, al)
                        b = H.make_matrix(pb, self.rng, n, k, bdt, bl)
                        reqs.append(pb.GemmRequest(request_id=i, a=a, b=b, out_dtype=out))
        # GemmStream carries them all; every answer is checked against its own request.
        by_id = {r.request_id: r for r in reqs}
        seen = set()
        for resp in self.stub.GemmStream(iter(reqs)):
            self.assertEqual(resp.error_code, 0, resp.error_message)
            self.assertNotIn(resp.request_id, seen)
            seen.add(resp.request_id)
            req = by_id[resp.request_id]
            self.check(resp, req.a, req.b, req.out_dtype)
        self.assertEqual(seen, set(by_id))

    def test_every_output_fp32_accuracy_long_k(self):
        """FP32 output within 1e-4 of FP64 for K up to 16384 (docs/api.md §1)."""
        pb = self.pb
        for k in (4096, 16384):
            a = H.make_matrix(pb, self.rng, 4, k, H.DT_E4M3, H.SL_1X128)
            b = H.make_matrix(pb, self.rng, 8, k, H.DT_E4M3, H.SL_128X128)
            resp = self.stub.Gemm(pb.GemmRequest(a=a, b=b, out_dtype=pb.DTYPE_FP32))
            self.check(resp, a, b, pb.DTYPE_FP32)

    def test_registered_matches_inline_bit_for_bit(self):
        pb = self.pb
        for wdt, wl in [(H.DT_E4M3, H.SL_128X128), (H.DT_E5M2, H.SL_ROW), (H.DT_BF16, H.SL_NONE),
                        (H.DT_FP32, H.SL_NONE), (H.DT_E4M3, H.SL_TENSOR)]:
            n, k = 129, 300
            b = H.make_matrix(pb, self.rng, n, k, wdt, wl)
            name = "w-%d-%d-%d" % (wdt, wl, self.rng.integers(1 << 30))
            chunks = [pb.RegisterWeightRequest(name=name, weight=pb.Matrix(
                rows=n, cols=k, dtype=wdt, scale_layout=wl, data=b.data[:1000], scales=b.scales[:1]))]
            for off in range(1000, len(b.data), 7000):
                chunks.append(pb.RegisterWeightRequest(weight=pb.Matrix(data=b.data[off:off + 7000])))
            chunks.append(pb.RegisterWeightRequest(weight=pb.Matrix(scales=b.scales[1:])))
            info = self.stub.RegisterWeight(iter(chunks))
            self.assertEqual((info.name, info.n, info.k), (name, n, k))
            self.assertIn(info.dtype, (pb.DTYPE_FP8_E4M3, pb.DTYPE_FP8_E5M2))
            if wdt in (H.DT_BF16, H.DT_FP32):
                self.assertEqual(info.scale_layout, pb.SCALE_LAYOUT_BLOCK_128X128)
            a = H.make_matrix(pb, self.rng, 7, k, H.DT_E5M2, H.SL_ROW)
            by_id = self.stub.Gemm(pb.GemmRequest(a=a, weight_id=info.weight_id, out_dtype=pb.DTYPE_FP32))
            by_name = self.stub.Gemm(pb.GemmRequest(a=a, weight_name=name, out_dtype=pb.DTYPE_FP32))
            inline = self.stub.Gemm(pb.GemmRequest(a=a, b=b, out_dtype=pb.DTYPE_FP32))
            self.assertEqual(by_id.d.data, inline.d.data)
            self.assertEqual(by_name.d.data, inline.d.data)
            self.check(inline, a, b, pb.DTYPE_FP32)
            self.stub.UnregisterWeight(pb.UnregisterWeightRequest(weight_id=info.weight_id))

    def test_many_weights_batch_together(self):
        """Concurrent requests against 24 weights: right answers, batches with several groups."""
        # Its own gemmd with a batching delay: on a fast GPU each batch may finish before
        # the next request comes, and nothing would wait to be batched.
        with H.Gemmd("--max-batch-delay-us", "2000") as d:
            self.many_weights_batch_together(d)

    def many_weights_batch_together(self, d):
        pb = self.pb
        k = 256
        stub = d.stub()
        weights = []
        for i in range(24):
            b = H.make_matrix(pb, self.rng, 64 + i, k, H.DT_E4M3, H.SL_128X128)
            info = stub.RegisterWeight(iter([pb.RegisterWeightRequest(name="batch-%d" % i, weight=b)]))
            weights.append((info, b))
        errors, groups, requests = [], [], []
        lock = threading.Lock()

        def worker(seed):
            rng = np.random.default_rng(seed)
            stub = d.stub()
            for j in range(12):
                info, b = weights[rng.integers(len(weights))]
                a = H.make_matrix(pb, rng, int(rng.integers(1, 9)), k, H.DT_E4M3, H.SL_1X128)
                resp = stub.Gemm(pb.GemmRequest(a=a, weight_id=info.weight_id, out_dtype=pb.DTYPE_FP32))
                err = H.rel_error(H.decode_output(resp.d), H.reference(a, b))
                with lock:
                    if err > 1e-4:
                        errors.append(err)
                    groups.append(resp.stats.batch_groups)
                    requests.append(resp.stats.batch_requests)

        threads = [threading.Thread(target=worker, args=(s,)) for s in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(groups), 16 * 12)
        self.assertGreater(max(requests), 1, "no batch held more than one request")
        self.assertGreater(max(groups), 1, "no batch held more than one weight")
        for info, _ in weights:
            stub.UnregisterWeight(pb.UnregisterWeightRequest(name=info.name))

    def test_same_weight_requests_stack_into_one_group(self):
        pb = self.pb
        k = 512
        b = H.make_matrix(pb, self.rng, 300, k, H.DT_E4M3, H.SL_128X128)
        info = self.stub.RegisterWeight(iter([pb.RegisterWeightRequest(name="stack", weight=b)]))
        # A long request occupies the engine while the others queue behind it.
        big = H.make_matrix(pb, self.rng, 2048, k, H.DT_E4M3, H.SL_1X128)
        reqs = [pb.GemmRequest(request_id=0, a=big, weight_id=info.weight_id, out_dtype=pb.DTYPE_FP32)]
        small = []
        for i in range(1, 20):
            a = H.make_matrix(pb, self.rng, i, k, H.DT_E4M3, H.SL_1X128)
            small.append(a)
            reqs.append(pb.GemmRequest(request_id=i, a=a, weight_id=info.weight_id, out_dtype=pb.DTYPE_FP32))
        resps = {r.request_id: r for r in self.stub.GemmStream(iter(reqs))}
        stacked = [r for i, r in resps.items() if i > 0 and r.stats.batch_requests > 1]
        self.assertTrue(stacked, "requests queued behind a long one never shared a batch")
        for r in stacked:
            self.assertEqual(r.stats.batch_groups, 1, "one weight, one A dtype, one output: one group")
        for i, a in enumerate(small, start=1):
            self.check(resps[i], a, b, pb.DTYPE_FP32)
        self.stub.UnregisterWeight(pb.UnregisterWeightRequest(weight_id=info.weight_id))


class WeightsAndStats(unittest.TestCase):
    def test_list_unregister_stats_health(self):
        pb, _, hpb, hpbg = H.stubs()
        rng = np.random.default_rng()
        with H.Gemmd() as d:
            stub = d.stub()
            self.assertEqual(len(stub.ListWeights(pb.ListWeightsRequest()).weights), 0)
            ids = []
            for name in ("alpha", "beta", "gamma"):
                b = H.make_matrix(pb, rng, 16, 32, H.DT_E4M3, H.SL_ROW)
                ids.append(stub.RegisterWeight(iter([pb.RegisterWeightRequest(name=name, weight=b)])).weight_id)
            self.assertEqual(len(set(ids)), 3)
            listed = stub.ListWeights(pb.ListWeightsRequest()).weights
            self.assertEqual([w.name for w in listed], ["alpha", "beta", "gamma"])
            self.assertEqual([w.weight_id for w in listed], ids)
            self.assertEqual(listed[0].bytes, 16 * 32 + 4 * 16)
            stub.UnregisterWeight(pb.UnregisterWeightRequest(name="beta"))
            self.assertEqual([w.name for w in stub.ListWeights(pb.ListWeightsRequest()).weights],
                             ["alpha", "gamma"])
            a = H.make_matrix(pb, rng, 2, 32, H.DT_E4M3, H.SL_NONE)
            for _ in range(5):
                stub.Gemm(pb.GemmRequest(a=a, weight_name="alpha"))
            # Answers leave from the engine's thread; the loop counts them just after.
            deadline = time.monotonic() + 5
            st = stub.GetStats(pb.GetStatsRequest())
            while st.requests_total < 5 and time.monotonic() < deadline:
                time.sleep(0.01)
                st = stub.GetStats(pb.GetStatsRequest())
            self.assertEqual(st.backend, H.BACKEND)
            self.assertTrue(st.ready)
            self.assertFalse(st.draining)
            self.assertEqual(st.weights, 2)
            self.assertEqual(st.requests_total, 5)
            self.assertEqual(st.batches_total, 5)
            self.assertEqual(st.flops_total, 5 * 2 * 2 * 16 * 32)
            self.assertEqual(st.request_latency.count, 5)
            self.assertGreater(st.request_latency.p50_us, 0)
            self.assertLessEqual(st.request_latency.p50_us, st.request_latency.max_us)
            health = hpbg.HealthStub(d.channel())
            for service in ("", "gemmd.v1.GemmService", "liveness"):
                self.assertEqual(health.Check(hpb.HealthCheckRequest(service=service)).status,
                                 hpb.HealthCheckResponse.SERVING)
            with self.assertRaises(grpc.RpcError) as e:
                health.Check(hpb.HealthCheckRequest(service="nope"))
            self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_health_watch_sees_drain(self):
        _, _, hpb, hpbg = H.stubs()
        d = H.Gemmd()
        health = hpbg.HealthStub(d.channel())
        stream = health.Watch(hpb.HealthCheckRequest(service=""))
        first = next(stream)
        self.assertEqual(first.status, hpb.HealthCheckResponse.SERVING)
        unknown = health.Watch(hpb.HealthCheckRequest(service="other"))
        self.assertEqual(next(unknown).status, hpb.HealthCheckResponse.SERVICE_UNKNOWN)
        live = health.Watch(hpb.HealthCheckRequest(service="liveness"))
        self.assertEqual(next(live).status, hpb.HealthCheckResponse.SERVING)
        d.signal()
        self.assertEqual(next(stream).status, hpb.HealthCheckResponse.NOT_SERVING)
        self.assertEqual(d.wait(timeout=30), 0)
        later = []
        try:
            later = [m.status for m in live]
        except grpc.RpcError:
            pass  # the stream ends with the server
        self.assertNotIn(hpb.HealthCheckResponse.NOT_SERVING, later, "liveness stays SERVING through a drain")
        d.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
