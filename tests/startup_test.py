"""Start-up that does not hide the daemon, and checkpoints as operators have them.

- While --preload weights load (slowed with --test-load-delay-ms), gemmd already answers:
  /healthz 200, /readyz 503 "loading", grpc.health.v1 NOT_SERVING (but its "liveness"
  service SERVING), a GEMM UNAVAILABLE
  saying it is loading, gemmd_startup_* and GetStats showing progress; then it serves
  (gemmctl info shows what was loaded, weights ls each weight's source), and systemd's
  NOTIFY_SOCKET gets READY=1 only then (and STOPPING=1 at SIGTERM).
- SIGTERM while loading (--preload, or --weight-dir with its reader threads) stops it at
  once, exit 0.
- --preload takes a directory of shards and a safetensors index (every shard it names),
  --preload-filter keeps the tensors whose names match, --preload-prefix renames them.
- A --preload entry that cannot be read stops gemmd with exit code 1 after it listened; a
  filter that is not a regex is a configuration error (exit 2)."""

import json
import os
import socket
import subprocess
import time
import unittest

import grpc
import numpy as np

import harness as H

K = 128


def tmp_path(name):
    p = os.path.join(H.tmpdir(), "%s-%d" % (name, time.monotonic_ns()))
    os.makedirs(p)
    return p


def shard(path, names, rng, n=16):
    """A safetensors file of E4M3 N x K weights without scales (and a BF16 tensor that is
    not a weight)."""
    tensors = {name: ("F8_E4M3", (n, K), (rng.integers(0, 0x70, n * K, dtype=np.uint8)).tobytes())
               for name in names}
    tensors["norm"] = ("BF16", (K,), bytes(2 * K))
    H.write_safetensors(path, tensors)


def metrics(d):
    _, body, _ = d.http("/metrics")
    out = {}
    for line in body.decode().splitlines():
        if line.startswith("gemmd_startup_"):
            name, value = line.split()
            out[name] = float(value)
    return out


class Loading(unittest.TestCase):
    def setUp(self):
        self.pb, self.rpc, _, _ = H.stubs()
        self.rng = np.random.default_rng()
        self.dir = tmp_path("startup")
        self.file = os.path.join(self.dir, "model.safetensors")
        shard(self.file, ["w0", "w1", "w2", "w3"], self.rng)

    def test_answers_while_loading_then_serves(self):
        pb = self.pb
        sock_path = "/tmp/gemmd-notify-%d-%d.sock" % (os.getpid(), time.monotonic_ns())  # sun_path is short
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(sock_path)
        notify.settimeout(0.05)
        env = dict(os.environ, NOTIFY_SOCKET=sock_path)
        d = H.Gemmd("--preload", self.file, "--test-load-delay-ms", "400", env=env, wait_ready=False)
        try:
            d.wait_listening()
            self.assertEqual(d.http("/healthz")[0], 200)
            status, body, _ = d.http("/readyz")
            self.assertEqual((status, body), (503, b"loading\n"))
            health = self.rpc.HealthStub(d.channel())
            self.assertEqual(health.Check(self.rpc.HealthCheckRequest(service=""), timeout=10).status, 2)
            # The liveness service a Kubernetes livenessProbe asks: alive while loading.
            self.assertEqual(health.Check(self.rpc.HealthCheckRequest(service="liveness"), timeout=10).status, 1)
            a = H.make_matrix(pb, self.rng, 2, K, H.DT_E4M3, H.SL_NONE)
            with self.assertRaises(grpc.RpcError) as e:
                d.stub().Gemm(pb.GemmRequest(a=a, weight_name="w0"), timeout=10)
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)
            self.assertIn("loading its weights", e.exception.details())
            m = metrics(d)
            self.assertEqual((m["gemmd_startup_loading"], m["gemmd_startup_files"]), (1, 1))
            st = d.stub().GetStats(pb.GetStatsRequest(), timeout=10)
            self.assertEqual((st.ready, st.loading, st.startup_files), (False, True, 1))
            self.assertLess(m["gemmd_startup_weights_loaded"], 4)
            with self.assertRaises(socket.timeout):
                notify.recv(4096)  # not ready yet: nothing said

            d.wait_serving()
            self.assertEqual(d.http("/readyz")[0], 200)
            self.assertEqual(health.Check(self.rpc.HealthCheckRequest(service=""), timeout=10).status, 1)
            r = d.stub().Gemm(pb.GemmRequest(a=a, weight_name="w3", out_dtype=pb.DTYPE_FP32), timeout=10)
            self.assertEqual((r.d.rows, r.d.cols), (2, 16))
            m = metrics(d)
            self.assertEqual((m["gemmd_startup_loading"], m["gemmd_startup_files_loaded"],
                              m["gemmd_startup_weights_loaded"], m["gemmd_startup_weight_bytes_loaded"]),
                             (0, 1, 4, 4 * 16 * K))
            st = d.stub().GetStats(pb.GetStatsRequest(), timeout=10)
            self.assertEqual((st.ready, st.loading, st.startup_files_loaded, st.startup_weights_loaded),
                             (True, False, 1, 4))
            self.assertEqual({w.source for w in d.stub().ListWeights(pb.ListWeightsRequest()).weights},
                             {"preloaded"})
            ctl = H.repo_path("client/gemmctl/gemmctl")
            info = subprocess.run([ctl, "--addr", d.address, "info"], capture_output=True, text=True, timeout=30)
            self.assertIn("startup      loaded: 1 of 1 weight files, 4 weights", info.stdout)
            listing = subprocess.run([ctl, "--addr", d.address, "weights", "ls"], capture_output=True, text=True,
                                     timeout=30).stdout
            self.assertEqual(listing.count(" preloaded"), 4, listing)
            notify.settimeout(5)
            said = notify.recv(4096).decode()
            self.assertIn("READY=1", said)
            self.assertIn("STATUS=serving, 4 weights", said)
            d.proc.send_signal(15)
            self.assertIn("STOPPING=1", notify.recv(4096).decode())
            self.assertEqual(d.wait(timeout=30), 0)
        finally:
            d.stop()
            notify.close()
            os.unlink(sock_path)

    def sigterm_while_loading(self, *args, settle=0.0):
        """SIGTERM to a gemmd started with args once it listens (and settle s more): it
        exits 0 within 5 s. Its log."""
        d = H.Gemmd(*args, wait_ready=False)
        try:
            d.wait_listening()
            time.sleep(settle)
            t0 = time.time()
            d.proc.send_signal(15)
            self.assertEqual(d.wait(timeout=30), 0)
            self.assertLess(time.time() - t0, 5, "the loader should stop and skip what is left")
            return d.log_text()
        finally:
            d.stop()

    def test_sigterm_while_loading(self):
        log = self.sigterm_while_loading("--preload", self.file, "--test-load-delay-ms", "2000")
        self.assertNotIn('msg="serving"', log)

    def test_sigterm_while_restoring(self):
        """The same for --weight-dir, whose files several threads read ahead."""
        pb = self.pb
        wdir = os.path.join(self.dir, "weights")
        with H.Gemmd("--weight-dir", wdir) as d:
            for i in range(12):
                w = H.make_matrix(pb, self.rng, 16, K, H.DT_E4M3, H.SL_NONE)
                d.stub().RegisterWeight(iter([pb.RegisterWeightRequest(name="r%d" % i, weight=w)]))
        log = self.sigterm_while_loading("--weight-dir", wdir, "--test-load-delay-ms", "1000", settle=0.3)
        self.assertIn("readers=", log)
        with H.Gemmd("--weight-dir", wdir) as d:  # and nothing was lost
            self.assertEqual(len(d.stub().ListWeights(pb.ListWeightsRequest()).weights), 12)

    def test_unreadable_preload_stops_with_1(self):
        d = H.Gemmd("--preload", os.path.join(self.dir, "missing.safetensors"), wait_ready=False)
        try:
            d.wait_listening()
            self.assertEqual(d.wait(timeout=30), 1)
            self.assertIn("start-up weights could not be loaded", d.log_text())
        finally:
            d.stop()

    def test_bad_filter_is_a_config_error(self):
        d = H.Gemmd("--preload-filter", "layers.(", wait_ready=False)
        try:
            self.assertEqual(d.wait(timeout=30), 2)
            self.assertIn("preload-filter", d.log_text())
        finally:
            d.stop()


class Checkpoints(unittest.TestCase):
    def test_directory_index_filter_prefix(self):
        pb, _, _, _ = H.stubs()
        rng = np.random.default_rng()
        model = tmp_path("ckpt")
        shard(os.path.join(model, "model-00001-of-00002.safetensors"), ["layers.0.q", "layers.0.k"], rng)
        shard(os.path.join(model, "model-00002-of-00002.safetensors"), ["layers.1.q", "layers.1.k"], rng)
        index = os.path.join(model, "model.safetensors.index.json")
        with open(index, "w") as f:
            json.dump({"metadata": {"total_size": 0},
                       "weight_map": {"layers.0.q": "model-00001-of-00002.safetensors",
                                      "layers.0.k": "model-00001-of-00002.safetensors",
                                      "layers.1.q": "model-00002-of-00002.safetensors",
                                      "layers.1.k": "model-00002-of-00002.safetensors",
                                      "norm": "model-00002-of-00002.safetensors"}}, f)

        def names(*args):
            with H.Gemmd(*args) as d:
                listed = sorted(w.name for w in d.stub().ListWeights(pb.ListWeightsRequest()).weights)
                self.assertEqual(metrics(d)["gemmd_startup_files"], 2)
                return listed
        everything = ["layers.0.k", "layers.0.q", "layers.1.k", "layers.1.q"]
        self.assertEqual(names("--preload", model), everything)
        self.assertEqual(names("--preload", index), everything)
        self.assertEqual(names("--preload", index, "--preload-filter", r"\.q$", "--preload-prefix", "v3/"),
                         ["v3/layers.0.q", "v3/layers.1.q"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
