"""--max-batch-delay-us holds a partial batch for the time it names, to the microsecond: a
lone request waits the delay and no more, and concurrent requests gather into one batch.

libuv's timers count whole milliseconds, so a wait built on them ends at least a
millisecond late (a 300 µs delay gave a p50 round trip of 1.31 ms on the 2-CPU build
machine); gemmd's wait is a timerfd (daemon/server.c, arm_batch_delay)."""

import json
import subprocess
import unittest

import harness as H

DELAY_US = 300
# A lone request's round trip: the delay plus the shared-memory round trip of a tiny GEMM
# (about 45 µs on the build machine, more under ASan and beside other work); a wait rounded
# to the next millisecond is 1000 µs or more.
MAX_OVER_DELAY_US = 450


def bench(addr, concurrency):
    p = subprocess.run([H.repo_path("client/gemmctl/gemmctl"), "--addr", addr, "bench",
                        "--transport", "shm", "--shape", "1x16x64", "--concurrency", str(concurrency),
                        "--duration", "1.5", "--warmup", "0.3", "--quiet", "--json", "-"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)[0]


class BatchDelay(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = H.Gemmd("--max-batch-delay-us", str(DELAY_US))
        cls.addr = "unix://" + cls.d.shm_socket

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def test_a_lone_request_waits_the_delay_and_no_more(self):
        r = bench(self.addr, 1)
        self.assertEqual(r["errors"], 0)
        self.assertGreaterEqual(r["server_queue_us"], DELAY_US * 0.95, r)
        self.assertGreaterEqual(r["p50_us"], DELAY_US, r)
        self.assertLess(r["p50_us"], DELAY_US + MAX_OVER_DELAY_US,
                        "a %d µs batch delay took p50 %.1f µs a round trip: %s" % (DELAY_US, r["p50_us"], r))

    def test_concurrent_requests_gather_into_one_batch(self):
        r = bench(self.addr, 4)
        self.assertEqual(r["errors"], 0)
        self.assertGreater(r["batch_requests"], 3.0, r)
        self.assertLess(r["p50_us"], DELAY_US + MAX_OVER_DELAY_US, r)


if __name__ == "__main__":
    unittest.main()
