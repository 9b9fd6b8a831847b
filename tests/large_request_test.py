"""Small requests beside a large one (docs/ARCHITECTURE.md, Scheduling): a large request
runs as pieces of its rows (--split-flops), and while pieces and small requests both wait,
--small-batches-per-piece batches of small requests run between two pieces. So a small
request waits behind at most one piece, never behind the whole large request.

On the CPU backend with one GEMM thread: one client sends 1x64x64 GEMMs back to back over
shared memory, first alone, then while another sends 2048x1024x1024 GEMMs (4.3 GFLOP, ~8
pieces of 256 rows). Fails if the small requests' p99 beside the large ones passes
3 x (one piece's time) + their p99 alone + 15 ms (scheduling on a loaded 2-CPU machine),
where one piece's time is the large request's time alone over its pieces. Also: split requests give the same D as the FP64
reference, over shared memory and over gRPC, and the large requests always finish."""

import os
import sys
import threading
import time
import unittest

import numpy as np

import harness as H

sys.path.insert(0, os.path.join(os.path.dirname(H.repo_path("client/python/gemmd_shm.py"))))
import gemmd_shm as S  # noqa: E402

SPLIT_FLOPS = os.environ.get("GEMMD_TEST_SPLIT_FLOPS", "500000000")
LM, LN, LK = 2048, 1024, 1024
PIECES = 8  # 500e6 / (2*1024*1024) = 238 rows, so pieces of the 256-row minimum
RATIO, SLACK_MS = 3.0, 15.0


def e4m3(rng, n):
    return (rng.integers(0, 0x70, n, dtype=np.uint8) | (rng.integers(0, 2, n, dtype=np.uint8) << 7)).tobytes()


class LargeBesideSmall(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = H.Gemmd("--cpu-threads", "1", "--split-flops", SPLIT_FLOPS)
        cls.rng = np.random.default_rng(3)
        cls.b = e4m3(cls.rng, LN * LK)
        with S.Client(cls.d.shm_socket) as c:
            cls.small_w = c.register_weight("small", 64, 64, e4m3(cls.rng, 64 * 64), S.DTYPE_E4M3)
            cls.large_w = c.register_weight("large", LN, LK, cls.b, S.DTYPE_E4M3)

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def large_client(self):
        c = S.Client(self.d.shm_socket, arena_bytes=64 << 20)
        a = c.alloc(LM * LK)
        c.write(a, e4m3(self.rng, LM * LK))
        d = c.alloc(LM * LN * 2)
        return c, a, d

    def large_gemm(self, c, a, d):
        return c.gemm(m=LM, k=LK, a=(a, S.DTYPE_E4M3, S.LAYOUT_NONE, 0), weight_id=self.large_w,
                      d=d, d_capacity=LM * LN * 2)

    def small_latencies(self, seconds, stop=None):
        with S.Client(self.d.shm_socket, arena_bytes=1 << 20) as c:
            a = c.alloc(64)
            c.write(a, e4m3(self.rng, 64))
            d = c.alloc(128)
            out = []
            end = time.monotonic() + seconds
            while time.monotonic() < end and not (stop and stop.is_set()):
                t = time.monotonic()
                c.gemm(m=1, k=64, a=(a, S.DTYPE_E4M3, S.LAYOUT_NONE, 0), weight_id=self.small_w, d=d, d_capacity=128)
                out.append((time.monotonic() - t) * 1e3)
            return sorted(out)

    def test_small_requests_wait_for_one_piece_at_most(self):
        c, a, d = self.large_client()
        self.large_gemm(c, a, d)  # warm
        t = time.monotonic()
        for _ in range(3):
            self.large_gemm(c, a, d)
        large_ms = (time.monotonic() - t) * 1e3 / 3
        alone = self.small_latencies(1.0)
        done, stop = [], threading.Event()

        def large_loop():
            while not stop.is_set():
                self.large_gemm(c, a, d)
                done.append(1)
        th = threading.Thread(target=large_loop)
        th.start()
        time.sleep(0.05)
        beside = self.small_latencies(max(2.0, 6 * large_ms / 1e3))
        stop.set()
        th.join()
        c.close()
        p99_alone = alone[int(0.99 * (len(alone) - 1))]
        p99_beside = beside[int(0.99 * (len(beside) - 1))]
        bound = RATIO * large_ms / PIECES + p99_alone + SLACK_MS
        print("large %.1f ms alone; small p99 %.2f ms alone, %.2f ms beside (bound %.1f); %d small, %d large"
              % (large_ms, p99_alone, p99_beside, bound, len(beside), len(done)), file=sys.stderr)
        self.assertGreaterEqual(len(done), 2, "the large requests did not progress beside the small ones")
        self.assertLessEqual(p99_beside, bound,
                             "small requests' p99 %.1f ms beside %.0f ms large requests (alone %.2f ms): "
                             "bound %.1f ms (3 x one piece + alone + %g ms); %d small, %d large done"
                             % (p99_beside, large_ms, p99_alone, bound, SLACK_MS, len(beside), len(done)))

    def test_split_requests_are_exact(self):
        pb, _, _, _ = H.stubs()
        ref = H.decode(H.DT_E4M3, self.a_bytes(), LM, LK) @ H.decode(H.DT_E4M3, self.b, LN, LK).T
        c, a, d = self.large_client()
        c.write(a, self.a_bytes())
        r = self.large_gemm(c, a, d)
        self.assertEqual(r.d_bytes, LM * LN * 2)
        out = H.decode(pb.DTYPE_BF16, c.read(d, r.d_bytes), LM, LN)
        c.close()
        self.assertLess(H.output_error(out, ref, pb.DTYPE_BF16), 1e-2, "shm, split into pieces")
        resp = self.d.stub().Gemm(pb.GemmRequest(
            weight_id=self.large_w, out_dtype=pb.DTYPE_BF16,
            a=pb.Matrix(rows=LM, cols=LK, dtype=pb.DTYPE_FP8_E4M3, data=self.a_bytes())))
        self.assertEqual((resp.d.rows, resp.d.cols), (LM, LN))
        out = H.decode(pb.DTYPE_BF16, resp.d.data, LM, LN)
        self.assertLess(H.output_error(out, ref, pb.DTYPE_BF16), 1e-2, "gRPC, split into pieces")

    def test_drain_finishes_a_split_request(self):
        """SIGTERM while a split request's pieces run: every piece runs, the request is
        answered whole and right, and gemmd exits 0."""
        pb, _, _, _ = H.stubs()
        with H.Gemmd("--cpu-threads", "1", "--split-flops", SPLIT_FLOPS) as d:
            stub = d.stub()
            stub.RegisterWeight(iter([pb.RegisterWeightRequest(
                name="w", weight=pb.Matrix(rows=LN, cols=LK, dtype=pb.DTYPE_FP8_E4M3, data=self.b))]))
            fut = stub.Gemm.future(pb.GemmRequest(
                weight_name="w", a=pb.Matrix(rows=LM, cols=LK, dtype=pb.DTYPE_FP8_E4M3, data=self.a_bytes())))
            d.wait_inflight(1, [fut])
            d.signal()
            resp = fut.result(timeout=120)
            self.assertEqual(d.wait(timeout=60), 0)
        ref = H.decode(H.DT_E4M3, self.a_bytes(), LM, LK) @ H.decode(H.DT_E4M3, self.b, LN, LK).T
        out = H.decode(pb.DTYPE_BF16, resp.d.data, LM, LN)
        self.assertLess(H.output_error(out, ref, pb.DTYPE_BF16), 1e-2)

    def a_bytes(self):
        if not hasattr(self, "_a"):
            self._a = e4m3(np.random.default_rng(11), LM * LK)
        return self._a


if __name__ == "__main__":
    unittest.main()
