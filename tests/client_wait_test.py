"""Clients leave the cores to gemmd while answers come slowly: a waiter spins for an
answer only while answers have been coming within its spin budget ($GEMMD_SHM_SPIN_US over
shared memory, $GEMMD_GRPC_SPIN_US for libgemmclient's synchronous gRPC calls) on average,
and sleeps at once otherwise. Spinning beyond the free
cores slowed gemmd itself (32 C workers on the H200: 82.8-89.0k req/s spinning for answers
that took up to twice the budget, 100.6-129.3k sleeping; docs/bench/serving.md).

gemmd holds every batch for 3 ms (--max-batch-delay-us) and the clients' budget is 2 ms, so
every answer takes 1.5 budgets: a client that still spun here would spend two thirds of its
wall time on a core. Checked for libgemmclient (gemmctl bench, synchronous GEMMs over shm
and over gRPC) and the gemmd package's one-thread worker (gemmd.Client.gemm); that
libgemmclient's gRPC calls do spin for answers within a larger budget; and that
libgemmclient sleeps for answers within its budget while gemmd's header says the host is
crowded."""

import os
import resource
import subprocess
import sys
import threading
import time
import unittest

import harness as H

BUDGET_US = 2000
HOLD_US = 3000
# The share of wall time a client may spend on a core while it waits for slow answers. On
# the 2-CPU build machine (2026-12-06): gemmctl 0.018 sleeping, 0.24 spinning (a spinning
# client slows gemmd there, so answers pass twice the budget now and then and it sleeps);
# the package 0.07 sleeping (its Python per call), 0.57 spinning.
MAX_CPU_SHARE_C = 0.12
MAX_CPU_SHARE_PACKAGE = 0.25
# While crowded a client that ignores the header spins for every answer: a whole core (1.00,
# measured with the check removed). Sleeping, gemmctl took 0.01, and 0.14 once while the rest
# of `bazel test //...` shared the machine's two cores (2026-12-07).
MAX_CPU_SHARE_CROWDED = 0.4
# gRPC: answers held 8 ms against a 6 ms budget (longer than the shm case's, because under
# ASan gemmctl's own CPU per gRPC call is large: 0.14 of a core sleeping for 3 ms answers).
# Sleeping, gemmctl took 0.06 (0.10 under ASan); with the average's check removed, 0.68
# (2026-12-07). The spinning case's budget, 200 ms, is far above the 8 ms answers because
# CI's load can make them several times slower (p90 31 ms once); there gemmctl took 0.99 of
# a core alone, 0.88 under ASan.
GRPC_HOLD_US = 8000
GRPC_BUDGET_US = 6000
GRPC_SPIN_BUDGET_US = 200000
MAX_CPU_SHARE_GRPC = 0.3
MIN_CPU_SHARE_SPINNING = 0.3


def child_cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


PACKAGE_WORKER = """
import resource, sys, time
sys.path.insert(0, %r)
import numpy as np
import gemmd
c = gemmd.Client(%r)
w = c.register_weight("wait-w-" + str(id(c)), np.ones((16, 64), np.float32))
a = np.ones((1, 64), np.float32)
for _ in range(20):
    c.gemm(a, w)
r0, t0, n = resource.getrusage(resource.RUSAGE_SELF), time.monotonic(), 0
while time.monotonic() - t0 < 1.5:
    c.gemm(a, w)
    n += 1
r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
print(n, (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / (t1 - t0))
c.close()
"""


def bench(test, addr, transport, env):
    """gemmctl bench's share of a core over 1.5 s of synchronous GEMMs, and its output."""
    cpu0, t0 = child_cpu_seconds(), time.monotonic()
    p = subprocess.run([H.repo_path("client/gemmctl/gemmctl"), "--addr", addr,
                        "bench", "--transport", transport, "--shape", "1x16x64", "--duration", "1.5",
                        "--warmup", "0.2", "--quiet"], capture_output=True, text=True, timeout=60, env=env)
    test.assertEqual(p.returncode, 0, p.stderr)
    return (child_cpu_seconds() - cpu0) / (time.monotonic() - t0), p.stdout


class SlowAnswers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = H.Gemmd("--max-batch-delay-us", str(HOLD_US))
        cls.env = dict(os.environ, GEMMD_SHM_SPIN_US=str(BUDGET_US))

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def test_c_client_sleeps(self):
        share, out = bench(self, "unix://" + self.d.shm_socket, "shm", self.env)
        self.assertLess(share, MAX_CPU_SHARE_C, "gemmctl used %.2f of a core waiting on %d µs answers:\n%s"
                        % (share, HOLD_US, out))

    def test_package_sleeps(self):
        script = PACKAGE_WORKER % (H.package_path(), "unix://" + self.d.shm_socket)
        p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=self.env)
        self.assertEqual(p.returncode, 0, p.stderr)
        n, share = p.stdout.split()
        self.assertGreater(int(n), 50)  # answers came (each after ~3 ms)
        self.assertLess(float(share), MAX_CPU_SHARE_PACKAGE, "the package used %s of a core waiting on %d µs answers"
                        % (share, HOLD_US))


class GrpcSlowAnswers(unittest.TestCase):
    """libgemmclient's synchronous gRPC calls: they sleep for answers slower than their
    budget and spin for answers within it."""

    @classmethod
    def setUpClass(cls):
        cls.d = H.Gemmd("--max-batch-delay-us", str(GRPC_HOLD_US))
        cls.addr = "127.0.0.1:%d" % cls.d.grpc_port

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def test_c_grpc_client_sleeps(self):
        share, out = bench(self, self.addr, "grpc", dict(os.environ, GEMMD_GRPC_SPIN_US=str(GRPC_BUDGET_US)))
        self.assertLess(share, MAX_CPU_SHARE_GRPC, "gemmctl over gRPC used %.2f of a core waiting on %d µs "
                        "answers:\n%s" % (share, GRPC_HOLD_US, out))

    def test_c_grpc_client_spins_within_budget(self):
        share, out = bench(self, self.addr, "grpc", dict(os.environ, GEMMD_GRPC_SPIN_US=str(GRPC_SPIN_BUDGET_US)))
        self.assertGreater(share, MIN_CPU_SHARE_SPINNING, "gemmctl over gRPC used only %.2f of a core "
                           "waiting on %d µs answers with a %d µs budget:\n%s"
                           % (share, GRPC_HOLD_US, GRPC_SPIN_BUDGET_US, out))


class Crowded(unittest.TestCase):
    """Answers within the budget (held 1 ms), but gemmd's header says crowded: with
    --shm-spinning-clients 1 and another client busy, libgemmclient sleeps anyway (on the
    build machine: 0.01 of a core; 1.00 with the client's crowded check removed)."""

    def test_c_client_sleeps_when_crowded(self):
        sys.path.insert(0, os.path.dirname(H.repo_path("client/python/gemmd_shm.py")))
        import gemmd_shm as S
        with H.Gemmd("--max-batch-delay-us", "1000", "--shm-spinning-clients", "1") as d:
            with S.Client(d.shm_socket) as other:
                stop = threading.Event()

                def keep_busy():  # an entry every ~0.5 ms (a query of no weight): busy
                    rid = 1
                    while not stop.is_set():
                        other.submit(S.weight_info_sqe(rid, weight_id=424242))
                        other.wait(rid)
                        rid += 1
                        time.sleep(0.0005)
                t = threading.Thread(target=keep_busy)
                t.start()
                try:
                    cpu0, t0 = child_cpu_seconds(), time.monotonic()
                    p = subprocess.run([H.repo_path("client/gemmctl/gemmctl"), "--addr", "unix://" + d.shm_socket,
                                        "bench", "--transport", "shm", "--shape", "1x16x64", "--duration", "1.5",
                                        "--warmup", "0.2", "--quiet"], capture_output=True, text=True, timeout=60,
                                       env=dict(os.environ, GEMMD_SHM_SPIN_US=str(BUDGET_US)))
                    share = (child_cpu_seconds() - cpu0) / (time.monotonic() - t0)
                finally:
                    stop.set()
                    t.join()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertLess(share, MAX_CPU_SHARE_CROWDED, "gemmctl used %.2f of a core waiting while crowded:\n%s"
                        % (share, p.stdout))


if __name__ == "__main__":
    unittest.main()
