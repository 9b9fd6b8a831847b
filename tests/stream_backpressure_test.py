"""A GemmStream client that sends and never reads cannot make gemmd hold its answers
without bound: past --stream-window requests (or --stream-queue-bytes of answers) in gemmd
or unsent, gemmd stops reading the stream, so HTTP/2 flow control holds the client.

400 requests of 512x16 against a 2048x16 weight (2 MB of BF16 answer each, 800 MB in all)
sent as fast as grpcio will, none read: gemmd's RSS must grow by less than 300 MB (the
window of 64 holds 128 MB). Then reading the stream gets every answer."""

import time
import unittest

import harness as H

M, N, K, COUNT = 512, 2048, 16, 400


class StreamBackpressure(unittest.TestCase):
    def test_unread_stream_is_bounded(self):
        pb, _, _, _ = H.stubs()
        with H.Gemmd() as d:
            stub = d.stub()
            stub.RegisterWeight(iter([pb.RegisterWeightRequest(
                name="wide", weight=pb.Matrix(rows=N, cols=K, dtype=pb.DTYPE_FP8_E4M3, data=bytes(N * K)))]))
            a = pb.Matrix(rows=M, cols=K, dtype=pb.DTYPE_FP8_E4M3, data=bytes(M * K))
            sent = []

            def requests():
                for i in range(COUNT):
                    sent.append(i)
                    yield pb.GemmRequest(request_id=i + 1, a=a, weight_name="wide")
            rss0 = d.rss_bytes()
            responses = stub.GemmStream(requests())
            peak, deadline = rss0, time.monotonic() + 6
            while time.monotonic() < deadline:
                peak = max(peak, d.rss_bytes())
                time.sleep(0.1)
            grown = (peak - rss0) >> 20
            self.assertLess(grown, 300, "gemmd grew by %d MB for a stream nobody reads (%d requests sent)"
                            % (grown, len(sent)))
            got = sorted(r.request_id for r in responses if r.error_code == 0)
            self.assertEqual(got, list(range(1, COUNT + 1)))


if __name__ == "__main__":
    unittest.main()
