"""Bearer tokens on gRPC (--grpc-token-file): every GemmService call without a valid
`authorization: Bearer <token>` is UNAUTHENTICATED, grpc.health.v1 stays open for probes,
the Python package sends the token, a rewritten file takes effect without a restart, and a
bad file stops gemmd at start with a message naming the option. Mutual TLS
(--tls-client-ca): gemmctl and grpcio with a certificate from the CA are served, without one
or with another they are not."""

import os
import time
import unittest

import grpc
import numpy as np

import harness as H

TOKEN = "tok-0123456789abcdef"
ROTATED = "tok-fedcba9876543210"


class GrpcAuth(unittest.TestCase):
    def setUp(self):
        self.pb, self.rpc, _, _ = H.stubs()
        self.path = os.path.join(H.tmpdir(), "tokens-%d" % time.monotonic_ns())
        with open(self.path, "w") as f:
            f.write("# gemmd tokens\n%s\n" % TOKEN)
        self.rng = np.random.default_rng()

    def test_calls_need_a_valid_token(self):
        pb = self.pb
        w = H.make_matrix(pb, self.rng, 16, 64, H.DT_E4M3, H.SL_NONE)
        a = H.make_matrix(pb, self.rng, 4, 64, H.DT_E4M3, H.SL_NONE)
        with H.Gemmd("--grpc-token-file", self.path) as d:
            stub = d.stub()
            good = [("authorization", "Bearer " + TOKEN)]
            calls = {
                "RegisterWeight": lambda md: stub.RegisterWeight(
                    iter([pb.RegisterWeightRequest(name="w", weight=w)]), metadata=md, timeout=10),
                "Gemm": lambda md: stub.Gemm(pb.GemmRequest(a=a, weight_name="w"), metadata=md, timeout=10),
                "GemmStream": lambda md: list(stub.GemmStream(iter([pb.GemmRequest(a=a, weight_name="w")]),
                                                             metadata=md, timeout=10)),
                "ListWeights": lambda md: stub.ListWeights(pb.ListWeightsRequest(), metadata=md, timeout=10),
                "GetStats": lambda md: stub.GetStats(pb.GetStatsRequest(), metadata=md, timeout=10),
            }
            for name, call in calls.items():
                for md in (None, [("authorization", "Bearer wrong-token-000000000")],
                           [("authorization", TOKEN)], [("authorization", "Bearer " + TOKEN[:-1])]):
                    with self.assertRaises(grpc.RpcError, msg="%s %s" % (name, md)) as e:
                        call(md)
                    self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED, name)
                    self.assertIn("--grpc-token-file", e.exception.details())
                call(good)  # RegisterWeight first: the others need its weight
            # Health stays open: Kubernetes' gRPC probes send no metadata.
            health = self.rpc.HealthStub(d.channel())
            self.assertEqual(health.Check(self.rpc.HealthCheckRequest(service=""), timeout=10).status, 1)
            # Nothing that was refused reached the daemon's work.
            _, body, _ = d.http("/metrics")
            self.assertIn('gemmd_requests_total{transport="grpc",code="OK"} 2', body.decode())

    def test_python_package_sends_the_token(self):
        import gemmd

        with H.Gemmd("--grpc-token-file", self.path) as d:
            w = self.rng.standard_normal((32, 128)).astype(np.float32)
            with gemmd.Client(d.address, token=TOKEN) as c:
                c.register_weight("w", w)
                out = c.gemm(self.rng.standard_normal((4, 128)).astype(np.float32), "w")
                self.assertEqual(out.shape, (4, 32))
            with gemmd.Client(d.address) as c:
                with self.assertRaises(gemmd.GemmdError) as e:
                    c.weights()
                self.assertEqual(e.exception.code, gemmd.StatusCode.UNAUTHENTICATED)

    def test_gemmctl_sends_the_token(self):
        import subprocess

        ctl = H.repo_path("client/gemmctl/gemmctl")
        with H.Gemmd("--grpc-token-file", self.path) as d:
            def run(*args):
                return subprocess.run([ctl, "--addr", d.address] + list(args), capture_output=True, text=True,
                                      timeout=60)
            p = run("--token-file", self.path, "gemm", "--m", "4", "--n", "32", "--k", "128", "--check")
            self.assertEqual(p.returncode, 0, p.stderr)
            p = run("gemm", "--m", "4", "--n", "32", "--k", "128")
            self.assertEqual(p.returncode, 1)
            self.assertIn("UNAUTHENTICATED", p.stderr)
            # A GEMM session's stream carries the token too.
            p = run("--token-file", self.path, "gemm", "--m", "4", "--n", "32", "--k", "128", "--session", "3")
            self.assertEqual(p.returncode, 0, p.stderr)
            p = run("gemm", "--m", "4", "--n", "32", "--k", "128", "--session", "2")
            self.assertEqual(p.returncode, 1)
            self.assertIn("UNAUTHENTICATED", p.stderr)
            p = run("--token-file", "/nonexistent/tokens", "info")
            self.assertEqual(p.returncode, 2)
            self.assertIn("--token-file", p.stderr)

    def test_rotation_without_restart(self):
        pb = self.pb
        with H.Gemmd("--grpc-token-file", self.path) as d:
            stub = d.stub()
            req = pb.ListWeightsRequest()
            stub.ListWeights(req, metadata=[("authorization", "Bearer " + TOKEN)], timeout=10)
            with open(self.path, "w") as f:
                f.write("%s\n" % ROTATED)
            later = time.time() + 10
            os.utime(self.path, (later, later))
            deadline = time.time() + 10
            while True:
                try:
                    stub.ListWeights(req, metadata=[("authorization", "Bearer " + ROTATED)], timeout=10)
                    break
                except grpc.RpcError as e:
                    self.assertEqual(e.code(), grpc.StatusCode.UNAUTHENTICATED)
                    self.assertLess(time.time(), deadline, "the new token was never accepted")
                    time.sleep(0.05)
            with self.assertRaises(grpc.RpcError) as e:
                stub.ListWeights(req, metadata=[("authorization", "Bearer " + TOKEN)], timeout=10)
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            # A broken rewrite keeps the current tokens.
            with open(self.path, "w") as f:
                f.write("short\n")
            later += 10
            os.utime(self.path, (later, later))
            time.sleep(0.5)
            stub.ListWeights(req, metadata=[("authorization", "Bearer " + ROTATED)], timeout=10)
            self.assertIn("previous tokens stay", d.log_text())

    def test_bad_file_stops_start(self):
        for text in ("", "short\n"):
            with open(self.path, "w") as f:
                f.write(text)
            d = H.Gemmd("--grpc-token-file", self.path, wait_ready=False)
            self.assertEqual(d.wait(timeout=30), 1)
            self.assertIn("--grpc-token-file", d.log_text())
            d.stop()


def openssl(*args, cwd):
    import subprocess
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(tmp):
    """A CA; a server certificate for localhost and 127.0.0.1 and a client certificate, both
    signed by it; and a self-signed client certificate no CA vouches for."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-days", "1", "-subj", "/CN=gemmd-test-ca", cwd=tmp)
    for name, cn, ext in (("server", "localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
                          ("client", "worker-1", "extendedKeyUsage=clientAuth")):
        with open(os.path.join(tmp, name + ".ext"), "w") as f:
            f.write(ext + "\n")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out", name + ".csr",
                "-subj", "/CN=" + cn, cwd=tmp)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", name + ".pem", "-days", "1", "-extfile", name + ".ext", cwd=tmp)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "rogue.key", "-out", "rogue.pem",
            "-days", "1", "-subj", "/CN=rogue", cwd=tmp)
    return {k: os.path.join(tmp, k) for k in ("ca.pem", "server.pem", "server.key", "client.pem",
                                              "client.key", "rogue.pem", "rogue.key")}


class MutualTls(unittest.TestCase):
    """--tls-client-ca: only clients with a certificate from that CA are served; gemmctl (and
    so libgemmclient) and grpcio present theirs."""

    def test_client_certificates(self):
        import subprocess

        tmp = os.path.join(H.tmpdir(), "mtls-%d" % time.monotonic_ns())
        os.makedirs(tmp)
        pki = make_pki(tmp)
        ctl = H.repo_path("client/gemmctl/gemmctl")
        with H.Gemmd("--tls-cert", pki["server.pem"], "--tls-key", pki["server.key"],
                     "--tls-client-ca", pki["ca.pem"]) as d:
            addr = "127.0.0.1:%d" % d.grpc_port  # the certificate names it; no DNS lookup

            def run(*args):
                return subprocess.run([ctl, "--addr", addr, "--timeout-ms", "10000", "--tls-ca", pki["ca.pem"]]
                                      + list(args), capture_output=True, text=True, timeout=60)
            p = run("--tls-cert", pki["client.pem"], "--tls-key", pki["client.key"],
                    "gemm", "--m", "4", "--n", "32", "--k", "128", "--check")
            self.assertEqual(p.returncode, 0, p.stderr)
            for extra in ([], ["--tls-cert", pki["rogue.pem"], "--tls-key", pki["rogue.key"]]):
                p = run(*(extra + ["info"]))
                self.assertEqual(p.returncode, 1, "served without a certificate from the CA: %s" % extra)
                self.assertIn("UNAVAILABLE", p.stderr)
            p = run("--tls-cert", pki["client.pem"], "info")
            self.assertEqual(p.returncode, 1)
            self.assertIn("go together", p.stderr)

            def read(name):
                with open(pki[name], "rb") as f:
                    return f.read()
            creds = grpc.ssl_channel_credentials(root_certificates=read("ca.pem"),
                                                 private_key=read("client.key"),
                                                 certificate_chain=read("client.pem"))
            with grpc.secure_channel(addr, creds) as ch:
                r = self.rpc_stub(ch).ListWeights(self.pb.ListWeightsRequest(), timeout=10)
                self.assertIsNotNone(r)
            with grpc.secure_channel(addr, grpc.ssl_channel_credentials(root_certificates=read("ca.pem"))) as ch:
                with self.assertRaises(grpc.RpcError) as e:
                    self.rpc_stub(ch).ListWeights(self.pb.ListWeightsRequest(), timeout=10)
                self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)

    def setUp(self):
        self.pb, rpc, _, _ = H.stubs()
        self.rpc_stub = rpc.GemmServiceStub


if __name__ == "__main__":
    unittest.main(verbosity=2)
