"""Connecting never stalls serving (docs/shm-protocol.md, HELLO): 16 shared-memory client
processes send small GEMMs back to back while 16 more clients connect, disconnect and
connect again. Pinning a CUDA arena takes ~100 ms on the H200 (cudaHostRegister of 256 MiB);
--test-shm-pin-delay-us makes each pin take 300 ms on the CPU backend too, so a gemmd that
pinned on its loop would hold every connected client up for that long per connect.

Fails if, during the churn, any connected client's p99 round trip passes 3x its own p99
before the churn plus 40 ms (the churning clients themselves take CPU from a loaded 2-CPU
machine: p99s of 10 ms were seen there; a pin on the loop stalls for 300 ms a connect),
or if a HELLO takes 100 ms or more (200 ms under AddressSanitizer). The window opens once
every worker has connected and been answered. Also: the arena budget (--shm-arenas-bytes)
refuses a HELLO past it, with a message that names the option."""

import json
import os
import subprocess
import sys
import threading
import time
import unittest

import numpy as np

import harness as H

sys.path.insert(0, os.path.join(os.path.dirname(H.repo_path("client/python/gemmd_shm.py"))))
import gemmd_shm as S  # noqa: E402

PIN_DELAY_US = 300000
WORKERS = 16
CHURNERS = 16
RATIO = 3.0
SLACK_MS = 40.0
# Under AddressSanitizer gemmd runs 2-3x slower, and 16 churning threads share the test's
# GIL: 121 ms was seen there. A pin on the loop would still show: 300 ms per connect.
HELLO_MAX_MS = 200.0 if "ASAN_OPTIONS" in os.environ else 100.0


def worker(sock, weight_id):
    """One connected client: connects, sends one GEMM, says "ready" and waits for the
    window's times on stdin; then 1x64x64 GEMMs back to back, and prints its round trips
    (ms) before and during the churn as JSON."""
    c = S.Client(sock, arena_bytes=1 << 20)
    a = c.alloc(64)
    c.write(a, bytes(64))
    d = c.alloc(4096)

    def gemm():
        c.gemm(m=1, k=64, a=(a, S.DTYPE_E4M3, S.LAYOUT_NONE, 0), weight_id=weight_id, d=d, d_capacity=4096)
    gemm()
    print("ready", flush=True)
    start_at, churn_at, end_at = (float(x) for x in sys.stdin.readline().split())
    base, churn = [], []
    while True:
        now = time.time()
        if now >= end_at:
            break
        t = time.monotonic()
        gemm()
        ms = (time.monotonic() - t) * 1e3
        if start_at <= now < churn_at:
            base.append(ms)
        elif now >= churn_at:
            churn.append(ms)
    c.close()
    print(json.dumps({"base": base, "churn": churn}))


def p99(values):
    v = sorted(values)
    return v[min(len(v) - 1, int(0.99 * len(v)))]


class ConnectChurn(unittest.TestCase):
    def test_connecting_clients_do_not_stall_connected_ones(self):
        # A long HELLO deadline: 16 worker processes starting at once on 2 CPUs (more so
        # under a sanitizer) can be descheduled between connect and HELLO.
        with H.Gemmd("--test-shm-pin-delay-us", str(PIN_DELAY_US), "--cpu-threads", "1",
                     "--shm-hello-timeout-ms", "30000") as g:
            with S.Client(g.shm_socket, arena_bytes=1 << 20) as c:
                wid = c.register_weight("w", 64, 64, bytes(64 * 64), S.DTYPE_E4M3)
            procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "worker", g.shm_socket, str(wid)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for _ in range(WORKERS)]
            # The window opens once every worker is connected and has been answered (its
            # arena's first piece pinned on the pool, PIN_DELAY_US each), whatever that took.
            for p in procs:
                line = p.stdout.readline()
                self.assertEqual(line.strip(), "ready", p.stderr.read() if not line else line)
            start_at = time.time() + 1.0 + WORKERS * PIN_DELAY_US / 1e6 / 4
            churn_at, end_at = start_at + 2.0, start_at + 4.0
            for p in procs:
                p.stdin.write("%r %r %r\n" % (start_at, churn_at, end_at))
                p.stdin.flush()
            hello_ms, errors = [], []

            def churn():
                while time.time() < end_at - 0.3:
                    t = time.monotonic()
                    try:
                        cc = S.Client(g.shm_socket, arena_bytes=1 << 20)
                    except Exception as e:  # noqa: BLE001 - reported below
                        errors.append(str(e))
                        return
                    hello_ms.append((time.monotonic() - t) * 1e3)
                    time.sleep(0.2)
                    cc.close()
            time.sleep(max(0.0, churn_at - time.time()))
            threads = [threading.Thread(target=churn) for _ in range(CHURNERS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            results = []
            for p in procs:
                out, err = p.communicate(timeout=60)
                self.assertEqual(p.returncode, 0, err)
                results.append(json.loads(out.strip().splitlines()[-1]))
        self.assertEqual(errors, [])
        self.assertGreaterEqual(len(hello_ms), CHURNERS)
        if os.environ.get("GEMMD_TSAN"):  # under ThreadSanitizer only the races are checked
            return
        for i, r in enumerate(results):
            self.assertGreater(len(r["base"]), 20, "worker %d barely ran before the churn" % i)
            self.assertGreater(len(r["churn"]), 20, "worker %d barely ran during the churn" % i)
            base, churn = p99(r["base"]), p99(r["churn"])
            self.assertLessEqual(churn, RATIO * base + SLACK_MS,
                                 "worker %d: p99 %.2f ms during the churn against %.2f ms before it "
                                 "(bound %.1fx + %.0f ms); %d HELLOs, slowest %.1f ms"
                                 % (i, churn, base, RATIO, SLACK_MS, len(hello_ms), max(hello_ms)))
        self.assertLess(max(hello_ms), HELLO_MAX_MS,
                        "a HELLO took %.1f ms while others connected (p50 %.1f ms)"
                        % (max(hello_ms), float(np.median(hello_ms))))

    def test_arena_budget_refuses_past_it(self):
        with H.Gemmd("--shm-arenas-bytes", "3M") as g:
            kept = [S.Client(g.shm_socket, arena_bytes=1 << 20) for _ in range(3)]
            with self.assertRaises(S.ShmError) as cm:
                S.Client(g.shm_socket, arena_bytes=1 << 20)
            self.assertEqual(cm.exception.code, 8)
            self.assertIn("--shm-arenas-bytes", cm.exception.message)
            kept.pop().close()
            # The closed client's bytes come back once gemmd has seen it go.
            deadline = time.time() + 10
            while True:
                try:
                    S.Client(g.shm_socket, arena_bytes=1 << 20).close()
                    break
                except S.ShmError:
                    self.assertLess(time.time(), deadline, "the closed arena's bytes never came back")
                    time.sleep(0.05)
            for c in kept:
                c.close()


    @unittest.skipIf(os.getuid() != 0, "needs root to connect as another uid")
    def test_arena_budget_per_uid(self):
        with H.Gemmd("--shm-arenas-bytes-per-uid", "2M", "--shm-allow-uids", "65534") as g:
            kept = [S.Client(g.shm_socket, arena_bytes=1 << 20) for _ in range(2)]
            with self.assertRaises(S.ShmError) as cm:
                S.Client(g.shm_socket, arena_bytes=1 << 20)
            self.assertEqual(cm.exception.code, 8)
            self.assertIn("--shm-arenas-bytes-per-uid", cm.exception.message)
            # Another uid still has its own 2 MB.
            self.assertEqual(H.as_nobody(lambda: S.Client(g.shm_socket, arena_bytes=1 << 20).close()), "None")
            for c in kept:
                c.close()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], int(sys.argv[3]))
    else:
        unittest.main()
