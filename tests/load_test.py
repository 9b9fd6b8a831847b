"""32 concurrent gRPC clients, each on its own connection: every request answered exactly
once and correctly, and batches really form (batch_requests > 1)."""

import collections
import threading
import unittest

import grpc
import numpy as np

import harness as H


class Concurrency(unittest.TestCase):
    def test_32_clients_exactly_once(self):
        pb, _, _, _ = H.stubs()
        rng = np.random.default_rng()
        clients, per_client, k = 32, 25, 384
        with H.Gemmd() as d:
            stub = d.stub()
            weights = []
            for i in range(4):
                b = H.make_matrix(pb, rng, 96 + 32 * i, k, H.DT_E4M3, H.SL_128X128)
                info = stub.RegisterWeight(iter([pb.RegisterWeightRequest(name="load-%d" % i, weight=b)]))
                weights.append((info.weight_id, b))
            answers = collections.Counter()
            bad, batch_sizes, failures = [], [], []
            lock = threading.Lock()
            start = threading.Barrier(clients)

            def client(c):
                crng = np.random.default_rng(c)
                my = d.stub()  # its own channel: its own connection
                # Unary calls and a stream, mixed, with request ids unique across clients.
                reqs = []
                for j in range(per_client):
                    wid, b = weights[(c + j) % len(weights)]
                    a = H.make_matrix(pb, crng, int(crng.integers(1, 17)), k, H.DT_E4M3, H.SL_1X128)
                    reqs.append((pb.GemmRequest(request_id=c * 1000 + j, a=a, weight_id=wid,
                                                out_dtype=pb.DTYPE_FP32), b))
                start.wait()
                try:
                    half = per_client // 2
                    resps = [my.Gemm(r) for r, _ in reqs[:half]]
                    resps += list(my.GemmStream(iter([r for r, _ in reqs[half:]])))
                except grpc.RpcError as e:
                    with lock:
                        failures.append((c, e.code(), e.details()))
                    return
                by_id = {r.request_id: (r, b) for r, b in reqs}
                for resp in resps:
                    req, b = by_id[resp.request_id]
                    err = H.rel_error(H.decode_output(resp.d), H.reference(req.a, b))
                    with lock:
                        answers[resp.request_id] += 1
                        batch_sizes.append(resp.stats.batch_requests)
                        if resp.error_code != 0 or err > 1e-4:
                            bad.append((resp.request_id, resp.error_code, err))

            threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(failures, [])
            self.assertEqual(bad, [])
            expected = {c * 1000 + j for c in range(clients) for j in range(per_client)}
            self.assertEqual(set(answers), expected, "some request got no answer")
            self.assertEqual(max(answers.values()), 1, "some request was answered twice")
            self.assertGreater(max(batch_sizes), 1, "batches never formed")
            st = stub.GetStats(pb.GetStatsRequest())
            self.assertEqual(st.requests_total, clients * per_client)
            self.assertLess(st.batches_total, clients * per_client, "every request ran alone")
            self.assertEqual(st.inflight_requests, 0)
            self.assertEqual(st.queue_depth, 0)
            print("batches %d for %d requests; mean batch %.2f; largest %d" % (
                st.batches_total, st.requests_total, st.mean_batch_requests, max(batch_sizes)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
