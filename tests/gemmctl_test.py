"""gemmctl and libgemmclient against the real gemmd: info, stats, weights add/ls/rm from
files, one-off GEMMs checked against FP64 (the client's own check, then the tests' numpy
reference on the same registered weight through grpcio), GemmStream, bench with JSON, ping,
errors; and one client balancing over two gemmd."""

import json
import os
import subprocess
import time
import unittest

import numpy as np

import harness as H


def gemmctl(d, *args, check=True, timeout=120, addr=None):
    p = subprocess.run([H.repo_path("client/gemmctl/gemmctl"), "--addr", addr or d.address] + list(args),
                       capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError("gemmctl %s exited %d:\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


class Gemmctl(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = H.Gemmd()
        cls.pb, _, _, _ = H.stubs()
        cls.rng = np.random.default_rng()
        cls.tmp = os.path.join(H.tmpdir(), "gemmctl-%d" % time.monotonic_ns())
        os.makedirs(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def test_info_stats_ping(self):
        p = gemmctl(self.d, "info")
        self.assertIn("SERVING", p.stdout)
        self.assertIn("backend      " + H.BACKEND, p.stdout)
        st = json.loads(gemmctl(self.d, "stats", "--json").stdout)
        self.assertEqual(st["backend"], H.BACKEND)
        self.assertTrue(st["ready"])
        p = gemmctl(self.d, "ping", "--count", "50")
        self.assertRegex(p.stdout, r"50 health checks, round trip p50 [0-9.]+ us")

    def test_weights_from_files_and_gemm(self):
        pb = self.pb
        n, k = 130, 300
        b = H.make_matrix(pb, self.rng, n, k, H.DT_E4M3, H.SL_128X128)
        data, scales = os.path.join(self.tmp, "w.bin"), os.path.join(self.tmp, "w.scales")
        with open(data, "wb") as f:
            f.write(b.data)
        with open(scales, "wb") as f:
            f.write(np.asarray(b.scales, np.float32).tobytes())
        gemmctl(self.d, "weights", "add", "ctl-w", "--file", data, "--shape", "%dx%d" % (n, k),
                "--dtype", "e4m3", "--layout", "128x128", "--scales", scales)
        listed = json.loads(gemmctl(self.d, "weights", "ls", "--json").stdout)
        mine = [w for w in listed if w["name"] == "ctl-w"]
        self.assertEqual(len(mine), 1)
        self.assertEqual((mine[0]["n"], mine[0]["k"]), (n, k))
        self.assertEqual(mine[0]["scale_layout"], "SCALE_LAYOUT_BLOCK_128X128")
        # The weight as gemmd holds it gives what the tests' own reference says, over grpcio.
        a = H.make_matrix(pb, self.rng, 5, k, H.DT_E4M3, H.SL_1X128)
        r = self.d.stub().Gemm(pb.GemmRequest(a=a, weight_name="ctl-w", out_dtype=pb.DTYPE_FP32))
        self.assertLessEqual(H.rel_error(H.decode_output(r.d), H.reference(a, b)), 1e-4)
        p = gemmctl(self.d, "gemm", "--m", "4", "--k", str(k), "--weight", "ctl-w")
        self.assertIn("4x%d DTYPE_BF16" % n, p.stdout)
        gemmctl(self.d, "weights", "rm", "ctl-w")
        p = gemmctl(self.d, "weights", "rm", "ctl-w", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("NOT_FOUND", p.stderr)

    def test_gemm_check_every_dtype(self):
        for adt in ("e4m3", "e5m2", "bf16", "fp16", "fp32"):
            for bdt, layout in (("e4m3", "128x128"), ("e5m2", "row"), ("bf16", "none"), ("fp32", "none")):
                for out in ("bf16", "fp32"):
                    gemmctl(self.d, "gemm", "--m", "7", "--n", "129", "--k", "1000", "--a-dtype", adt,
                            "--b-dtype", bdt, "--b-layout", layout, "--out", out, "--check",
                            "--seed", str(int(self.rng.integers(1 << 30))))

    def test_bench_json(self):
        out = os.path.join(self.tmp, "bench.json")
        p = gemmctl(self.d, "bench", "--concurrency", "4", "--shape", "1x128x128,8x256x512",
                    "--duration", "1", "--warmup", "0.2", "--json", out)
        with open(out) as f:
            rows = json.load(f)
        self.assertEqual(len(rows), 2)
        for row in rows:
            self.assertGreater(row["requests"], 0)
            self.assertEqual(row["errors"], 0)
        self.assertIn("p50", p.stdout)
        # The temporary weights are gone.
        names = [w["name"] for w in json.loads(gemmctl(self.d, "weights", "ls", "--json").stdout)]
        self.assertFalse([n for n in names if n.startswith("bench-")], names)

    def many_requests(self, flag, n, answered, refused):
        """gemmctl gemm FLAG N, over gRPC and shm: `answered` is printed and D checked. Then
        FLAG 3 against an unknown weight: `refused` is printed, each request NOT_FOUND."""
        for addr in (self.d.address, "unix://" + self.d.shm_socket):
            p = gemmctl(self.d, "gemm", "--m", "4", "--n", "64", "--k", "256", "--out", "fp32", "--check",
                        flag, str(n), addr=addr)
            self.assertIn(answered, p.stdout, addr)
            self.assertRegex(p.stdout, r"check .*: ok", addr)
        p = gemmctl(self.d, "gemm", "--m", "4", "--k", "256", "--weight", "no-such-weight", flag, "3", check=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn(refused, p.stdout)
        self.assertIn("NOT_FOUND", p.stderr)

    def test_gemm_stream(self):
        """GemmStream (libgemmclient's stream API): 50 requests on one stream, each answered
        once, checked; over shm the same API. A request the server refuses gets its own
        error and the stream goes on."""
        self.many_requests("--stream", 50, "50 requests sent, 50 answered (0 failed)",
                           "3 requests sent, 3 answered (3 failed)")

    def test_gemm_session(self):
        """A GEMM session (libgemmclient: synchronous GEMMs on one GemmStream): 30 requests one
        after another, each answered with its own id and the same checked D; over shm the same
        API. A refused request gets its own error, and the session sends the next."""
        self.many_requests("--session", 30, "30 requests, 30 answered OK, 0 failed",
                           "3 requests, 0 answered OK, 3 failed")
        p = gemmctl(self.d, "gemm", "--m", "4", "--n", "64", "--k", "256", "--stream", "2", "--session", "2",
                    check=False)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        # bench --session: every thread on its own session, over gRPC and shm.
        for addr, transport in ((self.d.address, "grpc"), ("unix://" + self.d.shm_socket, "shm")):
            p = gemmctl(self.d, "bench", "--concurrency", "4", "--shape", "1x128x128", "--duration", "0.5",
                        "--warmup", "0.1", "--session", "--transport", transport, "--json", "-", addr=addr)
            row = json.loads(p.stdout)[0]
            self.assertTrue(row["session"], row)
            self.assertEqual(row["errors"], 0, row)
            self.assertGreater(row["requests"], 0, row)

    def test_shared_memory_transport(self):
        """The same library calls over unix://: weights, checked GEMMs, bench."""
        shm = "unix://" + self.d.shm_socket
        n, k = 64, 256
        pb = self.pb
        b = H.make_matrix(pb, self.rng, n, k, H.DT_E4M3, H.SL_NONE)
        data = os.path.join(self.tmp, "shm-w.bin")
        with open(data, "wb") as f:
            f.write(b.data)
        gemmctl_at = lambda *a, **kw: gemmctl(self.d, *a, **kw)  # noqa: E731
        p = subprocess.run([H.repo_path("client/gemmctl/gemmctl"), "--addr", shm, "weights", "add", "shm-w",
                            "--file", data, "--shape", "%dx%d" % (n, k), "--dtype", "e4m3"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        names = [w["name"] for w in json.loads(gemmctl_at("weights", "ls", "--json").stdout)]
        self.assertIn("shm-w", names)
        for adt in ("e4m3", "bf16", "fp32"):
            for out in ("bf16", "fp32"):
                p = subprocess.run([H.repo_path("client/gemmctl/gemmctl"), "--addr", shm, "gemm", "--m", "5",
                                    "--n", "129", "--k", "300", "--a-dtype", adt, "--out", out, "--check"],
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        # libgemmclient's regions: A, its scales and D in a memfd that gemmd maps (CPU backend),
        # the same D as through the arena, and within the FP64 check.
        if "cuda" not in H.EXTRA_ARGS:
            for adt, layout in (("e4m3", "1x128"), ("e5m2", "row"), ("bf16", "none"), ("fp16", "none")):
                args = ["gemm", "--m", "6", "--n", "130", "--k", "384", "--a-dtype", adt, "--a-layout", layout,
                        "--out", "fp32", "--check", "--seed", "7"]
                arena = gemmctl(self.d, *args, addr=shm).stdout
                region = gemmctl(self.d, *(args + ["--in-region"]), addr=shm).stdout
                self.assertIn("check      relative", region)
                checksum = [line for line in arena.splitlines() if line.startswith("checksum")]
                self.assertEqual(checksum, [line for line in region.splitlines() if line.startswith("checksum")])
        p = gemmctl(self.d, "gemm", "--m", "2", "--n", "8", "--k", "128", "--in-region", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("UNIMPLEMENTED: regions are a shared-memory feature", p.stderr)
        p = subprocess.run([H.repo_path("client/gemmctl/gemmctl"), "--addr", shm, "gemm", "--m", "3", "--k",
                            str(k), "--weight", "shm-w"], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("3x%d DTYPE_BF16" % n, p.stdout)
        out = os.path.join(self.tmp, "shm-bench.json")
        p = subprocess.run([H.repo_path("client/gemmctl/gemmctl"), "--addr", shm, "bench", "--transport", "shm",
                            "--concurrency", "2", "--shape", "1x16x16", "--duration", "1", "--warmup",
                            "0.2", "--json", out], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            row = json.load(f)[0]
        self.assertGreater(row["requests"], 100)
        self.assertEqual(row["errors"], 0)
        p = subprocess.run([H.repo_path("client/gemmctl/gemmctl"), "--addr", shm, "weights", "rm", "shm-w"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        # What shared memory does not carry says so.
        p = subprocess.run([H.repo_path("client/gemmctl/gemmctl"), "--addr", shm, "stats"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1)
        self.assertIn("UNIMPLEMENTED", p.stderr)

    def test_errors_are_one_line(self):
        p = gemmctl(self.d, "gemm", "--m", "1", "--k", "16", "--weight", "absent", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr.strip(), "gemmctl: NOT_FOUND: no weight named 'absent' is registered")
        p = subprocess.run([H.repo_path("client/gemmctl/gemmctl"), "--addr", "127.0.0.1:1", "info"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1)
        self.assertIn("UNAVAILABLE", p.stderr)


def ok_requests(d):
    """gemmd_requests_total of OK gRPC requests, from /metrics."""
    _, body, _ = d.http("/metrics")
    for line in body.decode().splitlines():
        if line.startswith('gemmd_requests_total{transport="grpc",code="OK"}'):
            return int(float(line.split()[-1]))
    return 0


class Balancing(unittest.TestCase):
    """One client, several gemmd (--addr A,B): GEMMs go to each in turn, a weight is
    registered on all of them (each numbers it itself; the client sends each the id it
    knows), and a gemmd that is down is stepped over."""

    def test_two_endpoints(self):
        pb, _, _, _ = H.stubs()
        rng = np.random.default_rng()
        a, b = H.Gemmd(), H.Gemmd()
        try:
            # b holds another weight first, so the benchmark's weight gets another id there;
            # its K differs, so a request sent with a's id would be refused.
            b.stub().RegisterWeight(iter([pb.RegisterWeightRequest(
                name="b-only", weight=H.make_matrix(pb, rng, 16, 128, H.DT_E4M3, H.SL_NONE))]))
            both = "%s,%s" % (a.address, b.address)
            out = os.path.join(H.tmpdir(), "balance-%d.json" % time.monotonic_ns())
            gemmctl(a, "bench", "--concurrency", "4", "--shape", "4x64x256", "--duration", "1",
                    "--warmup", "0.2", "--json", out, addr=both)
            with open(out) as f:
                row = json.load(f)[0]
            self.assertEqual(row["errors"], 0)
            served = ok_requests(a), ok_requests(b)
            self.assertGreaterEqual(min(served), 0.3 * sum(served), "each endpoint's share: %s" % (served,))
            names = lambda d: sorted(w["name"] for w in json.loads(gemmctl(d, "weights", "ls", "--json").stdout))  # noqa: E731
            self.assertEqual((names(a), names(b)), ([], ["b-only"]), "the bench's weight left both")

            # b goes away: GEMMs that would have gone to it go to a; a registration, which
            # must reach every endpoint, is refused, names b and leaves nothing on a.
            self.assertEqual(b.stop(), 0)
            before = ok_requests(a)
            gemmctl(a, "bench", "--concurrency", "2", "--shape", "4x64x256", "--inline", "--duration", "1",
                    "--warmup", "0", "--json", out, addr=both)
            with open(out) as f:
                row = json.load(f)[0]
            self.assertEqual(row["errors"], 0)
            self.assertGreater(ok_requests(a) - before, 0)
            data = os.path.join(H.tmpdir(), "bal-w-%d.bin" % time.monotonic_ns())
            with open(data, "wb") as f:
                f.write(bytes(64 * 256))
            p = gemmctl(a, "weights", "add", "w", "--file", data, "--shape", "64x256", "--dtype", "e4m3",
                        addr=both, check=False)
            self.assertEqual(p.returncode, 1)
            self.assertIn("UNAVAILABLE", p.stderr)
            self.assertIn(b.address, p.stderr)
            self.assertEqual(names(a), [])
        finally:
            a.stop()
            b.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
