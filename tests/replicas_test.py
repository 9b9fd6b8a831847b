"""Many replicas behind the clients' balancing (docs/deploy.md): three gemmd on loopback
(CPU backend), each with its own --weight-dir, one address for all of them.

While the C client (gemmctl bench over libgemmclient) and the Python package drive load,
one replica is SIGKILLed and, a second later, started again on the same port and weight
directory. GEMMs are pure, so the clients send a request that met a dead replica to the
next one: every request must be answered exactly once, OK, with the right D (the Python
workers check theirs against numpy), and the restarted replica must serve again. The
throughput dip and the time until the restarted replica answered again are printed.
Then a GEMM session (one GemmStream per worker) across a restart of its one gemmd."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

import numpy as np

import harness as H

M, N, K = 8, 256, 256
SECONDS = 9.0
KILL_AT, RESTART_AT = 3.0, 4.0
PY_WORKERS = 3


def ok_count(d):
    try:
        _, body, _ = d.http("/metrics", timeout=2)
    except OSError:
        return None
    for line in body.decode().splitlines():
        if line.startswith('gemmd_requests_total{transport="grpc",code="OK"}'):
            return int(float(line.split()[-1]))
    return 0


class Replicas(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pb, _, _, _ = H.stubs()

    def test_kill_and_restart_one_of_three(self):
        sys.path.insert(0, H.package_path())
        import gemmd

        tmp = os.path.join(H.tmpdir(), "replicas-%d" % time.monotonic_ns())
        os.makedirs(tmp)
        dirs = [os.path.join(tmp, "r%d" % i) for i in range(3)]
        reps = [H.Gemmd("--weight-dir", d, "--cpu-threads", "1") for d in dirs]
        try:
            address = ",".join(r.address for r in reps)
            rng = np.random.default_rng(7)
            w = rng.standard_normal((N, K)).astype(np.float32)
            client = gemmd.Client(address, timeout=30)
            info = client.register_weight("w", w)
            qw = gemmd.dequantize(gemmd.quantize(w, "128x128")).astype(np.float64)

            # Load: the C client (gemmctl bench: its own weight, registered on all three)
            # and Python workers, each request checked.
            out = os.path.join(tmp, "bench.json")
            bench = subprocess.Popen(
                [H.repo_path("client/gemmctl/gemmctl"), "--addr", address, "bench", "--concurrency", "2",
                 "--shape", "%dx%dx%d" % (M, N, K), "--duration", str(SECONDS), "--warmup", "0", "--json", out],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            t0 = time.time()
            stop = t0 + SECONDS
            done_at, failures, sent = [], [], [0]
            lock = threading.Lock()

            def worker(seed):
                r = np.random.default_rng(seed)
                while time.time() < stop:
                    a = r.standard_normal((M, K)).astype(np.float32)
                    with lock:
                        sent[0] += 1
                    try:
                        d = client.gemm(a, info, out_dtype="fp32")
                    except gemmd.GemmdError as e:
                        with lock:
                            failures.append(str(e))
                        continue
                    ref = gemmd.dequantize(gemmd.quantize(a, "1x128")).astype(np.float64) @ qw.T
                    err = np.linalg.norm(d - ref) / np.linalg.norm(ref)
                    with lock:
                        done_at.append(time.time() - t0)
                        if not err < 1e-4:
                            failures.append("relative error %.3g" % err)

            threads = [threading.Thread(target=worker, args=(s,)) for s in range(PY_WORKERS)]
            for t in threads:
                t.start()
            time.sleep(KILL_AT)
            victim = reps[1]
            port = victim.grpc_port
            victim.proc.send_signal(signal.SIGKILL)
            victim.proc.wait()
            killed = time.time() - t0
            time.sleep(RESTART_AT - KILL_AT)
            reps[1] = H.Gemmd("--weight-dir", dirs[1], "--cpu-threads", "1", "--grpc-listen", "127.0.0.1:%d" % port)
            restarted = time.time() - t0
            back = None
            while time.time() < stop:
                if back is None and (ok_count(reps[1]) or 0) > 0:
                    back = time.time() - t0
                time.sleep(0.05)
            for t in threads:
                t.join(timeout=60)
            stdout, stderr = bench.communicate(timeout=120)
            self.assertEqual(bench.returncode, 0, stdout + stderr)
            with open(out) as f:
                row = json.load(f)[0]

            # Throughput, in 250 ms bins: before the kill, while one replica was away, after.
            bins = np.bincount((np.array(done_at) / 0.25).astype(int), minlength=int(SECONDS / 0.25) + 1) * 4
            before = bins[2:int(KILL_AT / 0.25)].mean()
            dip = bins[int(KILL_AT / 0.25):int(RESTART_AT / 0.25) + 1].min()
            print("python: %d requests sent, %d answered, %d failed; C bench: %d requests, %d errors" % (
                sent[0], len(done_at), len(failures), row["requests"], row["errors"]))
            print("killed at %.2f s, restarted at %.2f s, the restarted replica answered again at %s" % (
                killed, restarted, "%.2f s (%.2f s after its restart)" % (back, back - restarted) if back else "never"))
            print("python throughput: %.0f req/s before, lowest 250 ms bin while one was down %.0f req/s (%.0f%%)" % (
                before, dip, 100 * dip / max(before, 1)))
            self.assertEqual(failures, [])
            self.assertEqual(len(done_at), sent[0], "every request answered once")
            self.assertEqual(row["errors"], 0, row)
            self.assertGreater(row["requests"], 0)
            self.assertIsNotNone(back, "the restarted replica never served again")
            client.close()
        finally:
            for r in reps:
                r.stop()

    def test_session_outlives_a_restart(self):
        """A GEMM session (libgemmclient; the C serving worker's c-stream client) keeps one
        GemmStream open. gemmd is SIGKILLed under it and started again on the same port and
        weight directory: the session replaces its broken stream, and the restarted gemmd
        answers the same worker's requests."""
        sys.path.insert(0, H.package_path())
        import gemmd

        wdir = os.path.join(H.tmpdir(), "session-restart-%d" % time.monotonic_ns())
        d = H.Gemmd("--weight-dir", wdir, "--cpu-threads", "1")
        worker = None
        try:
            client = gemmd.Client(d.address, timeout=30)
            info = client.register_weight("w", np.random.default_rng(3).standard_normal((N, K)).astype(np.float32))
            client.close()
            port = d.grpc_port
            worker = subprocess.Popen(
                [H.repo_path("tools/bench/serving_worker"), "session:127.0.0.1:%d" % port, str(M), str(K),
                 str(info.weight_id), "-", "6"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.assertEqual(worker.stdout.readline().strip(), "ready", worker.stderr.read() if worker.poll() else "")
            worker.stdin.write("%.6f\n" % time.time())
            worker.stdin.flush()
            time.sleep(1.5)
            self.assertGreater(ok_count(d), 3, "the session served before the kill")
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait()
            d.stop()
            d = H.Gemmd("--weight-dir", wdir, "--cpu-threads", "1", "--grpc-listen", "127.0.0.1:%d" % port)
            restored = {w.name: w.weight_id for w in d.stub().ListWeights(self.pb.ListWeightsRequest()).weights}
            self.assertEqual(restored.get("w"), info.weight_id, restored)
            stdout, stderr = worker.communicate(timeout=60)
            self.assertEqual(worker.returncode, 0, stderr)
            row = json.loads(stdout.strip().splitlines()[-1])
            served_after = ok_count(d)
            print("session worker: %d requests answered, %d failed (while gemmd was down); %d answered by the "
                  "restarted gemmd" % (row["requests"], row["errors"], served_after))
            self.assertGreater(served_after, 0, "the session never served again: " + row["first_error"])
        finally:
            if worker is not None and worker.poll() is None:
                worker.kill()
            d.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
