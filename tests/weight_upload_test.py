"""A large weight registered over gRPC costs gemmd the weight and the message, not copies of
them: RegisterWeight reads weight.data straight from gRPC's slices into the weight's own
buffer (daemon/register_wire.c). Registers a 256 MiB E4M3 weight in one message through
grpcio and fails if gemmd's peak resident memory (VmHWM) grew by more than 2.5x the weight
(2.7x under ASan): gRPC's slices and the weight's buffer are 2x (2.01x measured); copying
the message into one buffer, then protobuf-c's, then the weight's made it 3.02x
(2026-12-05, CPU). The weight is then used: a GEMM against it matches the FP64 reference."""

import os
import unittest

import numpy as np

import harness as H

ROWS, COLS = 16384, 16384  # 256 MiB of E4M3
# ASan's shadow adds an eighth of what is touched (2.27x measured under it).
PEAK_RATIO = 2.7 if "ASAN_OPTIONS" in os.environ else 2.5


def peak_rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/%d/status" % pid)


class WeightUpload(unittest.TestCase):
    def test_one_message_weight_is_copied_once(self):
        pb, _, _, _ = H.stubs()
        rng = np.random.default_rng(11)
        data = (rng.integers(0, 0x70, ROWS * COLS, dtype=np.uint8)
                | (rng.integers(0, 2, ROWS * COLS, dtype=np.uint8) << 7)).tobytes()
        with H.Gemmd("--cpu-threads", "1") as d:
            stub = d.stub()
            before = peak_rss(d.proc.pid)
            w = pb.Matrix(rows=ROWS, cols=COLS, dtype=H.DT_E4M3, data=data, scale_layout=H.SL_NONE)
            info = stub.RegisterWeight(iter([pb.RegisterWeightRequest(name="big", weight=w)]))
            grew = peak_rss(d.proc.pid) - before
            print("256 MiB weight in one message: gemmd's peak RSS grew %.0f MiB (%.2fx)" % (
                grew / 2**20, grew / len(data)))
            self.assertEqual(info.bytes, len(data))
            self.assertLessEqual(grew, PEAK_RATIO * len(data),
                                 "peak RSS grew %.2fx the weight" % (grew / len(data)))

            # The bytes arrived whole: D = A·Bᵀ matches the reference on B's first and last
            # rows (the whole of B in FP64 would be 2 GiB).
            a = H.make_matrix(pb, rng, 2, COLS, H.DT_E4M3, H.SL_NONE)
            r = stub.Gemm(pb.GemmRequest(a=a, weight_id=info.weight_id, out_dtype=H.DT_FP32))
            d_all = np.frombuffer(r.d.data, dtype=np.float32).reshape(2, ROWS)
            got = np.concatenate([d_all[:, :64], d_all[:, -64:]], axis=1)
            part = data[:64 * COLS] + data[-64 * COLS:]
            b = pb.Matrix(rows=128, cols=COLS, dtype=H.DT_E4M3, data=part, scale_layout=H.SL_NONE)
            want = H.reference(a, b)
            err = np.linalg.norm(got - want) / np.linalg.norm(want)
            self.assertLess(err, H.TOLERANCE[H.DT_FP32], "relative error %.3g" % err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
