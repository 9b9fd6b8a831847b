"""The metrics port: /metrics passes `promtool check metrics` and counts what happened;
/healthz, /readyz (also while draining) and /stats (JSON of ServerStats)."""

import json
import threading
import time
import unittest

import grpc
import numpy as np

import harness as H


def samples(text):
    """{'name{labels}': value} of a Prometheus exposition."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


class Metrics(unittest.TestCase):
    def test_promtool_and_counts(self):
        pb, _, _, _ = H.stubs()
        rng = np.random.default_rng()
        with H.Gemmd() as d:
            status, body, ctype = d.http("/metrics")
            self.assertEqual(status, 200)
            self.assertIn("text/plain", ctype)
            rc, out = H.promtool_check(body)
            self.assertEqual(rc, 0, out)
            stub = d.stub()
            a = H.make_matrix(pb, rng, 4, 64, H.DT_E4M3, H.SL_NONE)
            b = H.make_matrix(pb, rng, 8, 64, H.DT_E4M3, H.SL_NONE)
            for _ in range(6):
                stub.Gemm(pb.GemmRequest(a=a, b=b))
            for _ in range(2):
                with self.assertRaises(grpc.RpcError):
                    stub.Gemm(pb.GemmRequest(a=a, weight_id=99))
            stub.RegisterWeight(iter([pb.RegisterWeightRequest(name="m", weight=b)]))
            status, body, _ = d.http("/metrics")
            rc, out = H.promtool_check(body)
            self.assertEqual(rc, 0, out)
            s = samples(body.decode())
            self.assertEqual(s['gemmd_requests_total{transport="grpc",code="OK"}'], 6)
            self.assertEqual(s['gemmd_requests_total{transport="grpc",code="NOT_FOUND"}'], 2)
            self.assertEqual(s['gemmd_request_duration_seconds_count{transport="grpc"}'], 8)
            self.assertEqual(s['gemmd_request_duration_seconds_bucket{transport="grpc",le="+Inf"}'], 8)
            self.assertEqual(s["gemmd_queue_duration_seconds_count"], 6)
            self.assertEqual(s["gemmd_batches_total"], 6)
            self.assertEqual(s["gemmd_batch_duration_seconds_count"], 6)
            self.assertEqual(s["gemmd_batch_requests_count"], 6)
            self.assertEqual(s["gemmd_flops_total"], 6 * 2 * 4 * 8 * 64)
            self.assertEqual(s["gemmd_output_bytes_total"], 6 * 4 * 8 * 2)
            self.assertEqual(s["gemmd_weights"], 1)
            self.assertEqual(s["gemmd_weight_bytes"], 8 * 64)
            self.assertEqual(s["gemmd_queue_depth"], 0)
            self.assertEqual(s["gemmd_inflight_requests"], 0)
            self.assertEqual(s["gemmd_up"], 1)
            self.assertEqual(s["gemmd_shm_clients"], 0)
            build = [k for k in s if k.startswith("gemmd_build_info{")]
            self.assertEqual(len(build), 1)
            self.assertIn('backend="%s"' % H.BACKEND, build[0])
            for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
                         "process_max_fds", "process_start_time_seconds", "gemmd_graph_replays_total",
                         "gemmd_graph_captures_total", "gemmd_input_bytes_total",
                         "gemmd_device_memory_used_bytes"):
                self.assertIn(name, s)
            self.assertGreater(s["process_resident_memory_bytes"], 0)
            self.assertLess(abs(s["process_start_time_seconds"] - time.time()), 120)
            # Where batch time goes: every stage present, each batch counted once, the
            # device (compute) share positive, none negative.
            self.assertEqual(s["gemmd_batch_stage_batches_total"], 6)
            stages = {k: v for k, v in s.items() if k.startswith("gemmd_batch_stage_seconds_total{")}
            self.assertEqual(sorted(stages), sorted('gemmd_batch_stage_seconds_total{stage="%s"}' % n for n in (
                "to_engine", "host_staging", "device", "completion_notice", "to_finisher", "to_loop",
                "answer")))
            self.assertTrue(all(v >= 0 for v in stages.values()), stages)
            self.assertGreater(stages['gemmd_batch_stage_seconds_total{stage="device"}'], 0)
            # The GEMM kernels' own time is part of the device stage: timed on the GPU
            # (events inside the batch's graph), 0 on the CPU backend.
            gemm = s["gemmd_batch_gemm_seconds_total"]
            self.assertLessEqual(gemm, stages['gemmd_batch_stage_seconds_total{stage="device"}'])
            if H.BACKEND == "cuda":
                self.assertGreater(gemm, 0)
            else:
                self.assertEqual(gemm, 0)


class Endpoints(unittest.TestCase):
    def test_health_ready_stats(self):
        pb, _, _, _ = H.stubs()
        rng = np.random.default_rng()
        d = H.Gemmd()
        self.assertEqual(d.http("/healthz")[0], 200)
        self.assertEqual(d.http("/readyz")[0], 200)
        self.assertEqual(d.http("/nope")[0], 404)
        stub = d.stub()
        a = H.make_matrix(pb, rng, 2, 32, H.DT_E4M3, H.SL_NONE)
        b = H.make_matrix(pb, rng, 3, 32, H.DT_E4M3, H.SL_NONE)
        stub.Gemm(pb.GemmRequest(a=a, b=b))
        status, body, ctype = d.http("/stats")
        self.assertEqual(status, 200)
        self.assertEqual(ctype, "application/json")
        st = json.loads(body)
        grpc_st = stub.GetStats(pb.GetStatsRequest())
        self.assertEqual(st["backend"], grpc_st.backend)
        self.assertEqual(st["requests_total"], 1)
        self.assertEqual(st["batches_total"], grpc_st.batches_total)
        self.assertEqual(st["ready"], True)
        self.assertEqual(st["requests_by_code"], [{"transport": "grpc", "code": "OK", "count": 1}])
        self.assertEqual(st["request_latency"]["count"], 1)
        # While draining: alive, not ready. Seeing it needs a GEMM that outlasts the
        # checks: 4096^3 takes the CPU seconds, the GPU well under the 0.2 s we wait.
        if H.BACKEND == "cuda":
            d.stop()
            return
        w = H.make_matrix(pb, rng, 4096, 4096, H.DT_E4M3, H.SL_NONE)
        stub.RegisterWeight(iter([pb.RegisterWeightRequest(name="big", weight=w)]))
        fut = stub.Gemm.future(pb.GemmRequest(a=H.make_matrix(pb, rng, 4096, 4096, 1, 0), weight_name="big"))
        # Signalled once the daemon holds the 16 MB request: one still arriving at SIGTERM is
        # refused as new work (a fixed 0.3 s wait failed so in a clean-clone CI run).
        d.wait_inflight(1, [fut])
        d.signal()
        time.sleep(0.2)
        self.assertEqual(d.http("/healthz")[0], 200)
        status, body, _ = d.http("/readyz")
        self.assertEqual((status, body), (503, b"draining\n"))
        self.assertTrue(json.loads(d.http("/stats")[1])["draining"])
        fut.result(timeout=120)
        self.assertEqual(d.wait(timeout=60), 0)
        d.stop()


class HttpBounds(unittest.TestCase):
    """A client that trickles its request head, or opens connections and says nothing,
    holds nothing for long: the head must be in by --http-head-timeout-ms after connecting,
    and past --http-max-connections a connection is closed as it comes."""

    def test_trickled_head_is_cut_off(self):
        import socket
        with H.Gemmd("--http-head-timeout-ms", "1000") as d:
            s = socket.create_connection(("127.0.0.1", d.metrics_port))
            t0 = time.monotonic()
            closed_after = None
            for ch in b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 40:
                try:
                    s.send(bytes([ch]))
                except OSError:
                    closed_after = time.monotonic() - t0
                    break
                s.settimeout(0.1)
                try:
                    if s.recv(1) == b"":
                        closed_after = time.monotonic() - t0
                        break
                except socket.timeout:
                    pass
            s.close()
            self.assertIsNotNone(closed_after, "a head trickled in over %.1f s was never cut off"
                                 % (time.monotonic() - t0))
            self.assertLess(closed_after, 3.0)
            self.assertEqual(d.http("/healthz")[0], 200)

    def test_connections_past_the_bound_are_closed(self):
        import socket
        with H.Gemmd("--http-max-connections", "8") as d:
            held = [socket.create_connection(("127.0.0.1", d.metrics_port)) for _ in range(20)]
            closed = 0
            for s in held:
                s.settimeout(1.0)
                try:
                    closed += s.recv(1) == b""
                except socket.timeout:
                    pass
                except OSError:
                    closed += 1
            self.assertEqual(closed, 12, "%d of 20 idle connections were closed with a bound of 8" % closed)
            for s in held:
                s.close()
            deadline = time.time() + 5
            while True:  # gemmd sees the closes as they come; then it serves again
                try:
                    if d.http("/healthz")[0] == 200:
                        break
                except OSError:
                    pass
                self.assertLess(time.time(), deadline, "/healthz not served after the idle ones left")
                time.sleep(0.05)


if __name__ == "__main__":
    unittest.main(verbosity=2)
