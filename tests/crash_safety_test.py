"""--weight-dir survives being killed at any moment (docs/bench/weights_io.md, issue 41).

50 times: a gemmd on one weight directory registers weights over gRPC one after another
(and unregisters an older one now and then) and is SIGKILLed a random few milliseconds in;
then it is started again on the same directory. Every registration that was answered must
come back, bit for bit (read from its file, whose layout weight_store.h gives); every
unregistration that was answered must stay gone; nothing else may appear but weights whose
registration was in flight, and those whole (an unregistration in flight may have taken
effect or not). A damaged file is skipped with a log line and
counted in gemmd_startup_files_skipped."""

import os
import random
import signal
import struct
import threading
import time
import unittest

import grpc
import numpy as np

import harness as H

ROUNDS = 50
HEADER = struct.Struct("<8sQIIIIIIQQ")  # magic, id, n, k, dtype, layout, name_len, reserved, n_scales, data_bytes


def read_file(path):
    """(name, data bytes) of a .gemmdw file."""
    with open(path, "rb") as f:
        raw = f.read()
    magic, wid, n, k, _, _, name_len, _, n_scales, data_bytes = HEADER.unpack_from(raw)
    assert magic == b"GEMMDW01"
    at = HEADER.size
    name = raw[at:at + name_len].decode()
    at += name_len + 4 * n_scales
    return wid, name, raw[at:at + data_bytes]


def startup_metric(d, name):
    _, body, _ = d.http("/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


class CrashSafety(unittest.TestCase):
    def test_kill_during_registration(self):
        pb, _, _, _ = H.stubs()
        rng = random.Random(41)
        wdir = os.path.join(H.tmpdir(), "crash-%d" % time.monotonic_ns())
        sent = {}           # name -> the bytes sent
        acknowledged = set()
        removed = set()     # answered unregistrations
        unsure = set()      # unregistrations in flight when gemmd was killed
        seq = [0]
        d = H.Gemmd("--weight-dir", wdir)
        for round_ in range(ROUNDS):
            stub = d.stub()
            stop = threading.Event()

            def work():
                while not stop.is_set():
                    seq[0] += 1
                    name = "w%d" % seq[0]
                    n = rng.choice((16, 64, 256))
                    data = np.random.default_rng(seq[0]).integers(0, 0x70, n * 1024, dtype=np.uint8).tobytes()
                    sent[name] = data
                    m = pb.Matrix(rows=n, cols=1024, dtype=H.DT_E4M3, data=data, scale_layout=H.SL_NONE)
                    try:
                        stub.RegisterWeight(iter([pb.RegisterWeightRequest(name=name, weight=m)]), timeout=10)
                        acknowledged.add(name)
                        if seq[0] % 3 == 0:
                            victim = sorted(acknowledged - removed)[0]
                            unsure.add(victim)  # killed mid-call, it may or may not be gone
                            stub.UnregisterWeight(pb.UnregisterWeightRequest(name=victim), timeout=10)
                            removed.add(victim)
                            unsure.discard(victim)
                    except grpc.RpcError:
                        return  # gemmd was killed: whatever was in flight is not acknowledged
            t = threading.Thread(target=work)
            t.start()
            time.sleep(rng.uniform(0.005, 0.08))
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait()
            stop.set()
            t.join(timeout=30)
            d.stop()
            d = H.Gemmd("--weight-dir", wdir)
            listed = {w.name: w.weight_id for w in d.stub().ListWeights(pb.ListWeightsRequest()).weights}
            missing = (acknowledged - removed - unsure) - set(listed)
            self.assertEqual(missing, set(), "round %d: acknowledged weights lost" % round_)
            back = set(listed) & removed
            self.assertEqual(back, set(), "round %d: unregistered weights came back" % round_)
            files = {}
            for f in os.listdir(wdir):
                if f.endswith(".gemmdw"):
                    wid, name, data = read_file(os.path.join(wdir, f))
                    files[name] = (wid, data)
            for name, wid in listed.items():
                self.assertIn(name, sent, "round %d: a weight no one sent: %s" % (round_, name))
                self.assertEqual(files[name][0], wid)
                self.assertEqual(files[name][1], sent[name], "round %d: %s is not what was sent" % (round_, name))
            # Registrations that were in flight and did complete count as acknowledged now;
            # unregistrations that were in flight took effect or did not, as the list says.
            acknowledged |= set(listed)
            removed |= unsure - set(listed)
            unsure.clear()
        self.assertGreater(len(acknowledged), ROUNDS, "too few registrations got through to test anything")
        print("%d rounds: %d weights acknowledged, %d unregistered, %d on disk at the end" % (
            ROUNDS, len(acknowledged), len(removed), len(listed)))

        # A damaged file: skipped with a log line and a metric, the others load.
        d.stop()
        victim = os.path.join(wdir, sorted(f for f in os.listdir(wdir) if f.endswith(".gemmdw"))[0])
        with open(victim, "r+b") as f:
            f.seek(-2, os.SEEK_END)
            last = f.read(2)
            f.seek(-2, os.SEEK_END)
            f.write(bytes(b ^ 0xFF for b in last))
        with H.Gemmd("--weight-dir", wdir) as d:
            self.assertIn("checksum mismatch", d.log_text())
            self.assertEqual(startup_metric(d, "gemmd_startup_files_skipped"), 1)
            self.assertEqual(len(d.stub().ListWeights(pb.ListWeightsRequest()).weights), len(listed) - 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
