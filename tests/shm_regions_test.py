"""Regions of a client's own memory (shared-memory protocol version 2, docs/shm-protocol.md
§7), on the CPU backend, whose device memory is host memory: a region is a memfd the client
hands over with SCM_RIGHTS. A GEMM reads A and its scales from regions and writes D into
one, right against the FP64 reference; a region is usable only on its own connection and
only while open; every bad id, offset, size, kind or message gets a clear error; a region
closed while a request uses it stays mapped until that request is done; gemmd unmaps a
dead client's regions; a version-1 client cannot name regions."""

import fcntl
import os
import struct
import sys
import time
import unittest

import numpy as np

import harness as H

sys.path.insert(0, os.path.join(os.path.dirname(H.repo_path("client/python/gemmd_shm.py"))))
import gemmd_shm as S  # noqa: E402


def memfd(name, data, size=None, seal=True):
    """A memfd holding data (grown to size): the client's "device memory", sealed against
    shrinking as gemmd requires."""
    fd = os.memfd_create(name, os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size or max(len(data), 1))
    os.pwrite(fd, data, 0)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    return fd


def gemmd_maps(d, name):
    """How many of gemmd's mappings come from the memfd called name."""
    with open("/proc/%d/maps" % d.proc.pid) as f:
        return sum("/memfd:%s " % name in line or line.rstrip().endswith("/memfd:" + name) for line in f)


class Regions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = H.Gemmd()
        cls.pb, _, _, _ = H.stubs()
        cls.rng = np.random.default_rng()

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def test_gemm_reads_and_writes_regions(self):
        pb = self.pb
        m, n, k = 5, 130, 300
        with S.Client(self.d.shm_socket, version=2) as c:
            b, wid = H.shm_weight(c, self.pb, self.rng, "regions-w", n, k)
            for adt, layout, out in ((H.DT_E4M3, H.SL_1X128, pb.DTYPE_FP32), (H.DT_BF16, H.SL_NONE, pb.DTYPE_BF16),
                                     (H.DT_E5M2, H.SL_ROW, pb.DTYPE_FP16)):
                a = H.make_matrix(pb, self.rng, m, k, adt, layout)
                scales = struct.pack("<%df" % len(a.scales), *a.scales)
                # A at 4096 of region 1, its scales at 64 of region 2, D at 256 of region 2.
                fa = memfd("gemmd-a", bytes(4096) + a.data)
                fs = memfd("gemmd-sd", bytes(64) + scales, 1 << 20)
                ra, rs = c.open_region_fd(fa, 4096 + len(a.data)), c.open_region_fd(fs, 1 << 20)
                d_bytes = m * n * {pb.DTYPE_FP32: 4}.get(out, 2)
                comp = c.gemm(m=m, k=k, a=(4096, adt, layout, 64 if len(a.scales) else 0), weight_id=wid,
                              d=256, d_capacity=d_bytes, out_dtype=out, regions=(ra, rs if len(a.scales) else 0, rs))
                self.assertEqual(comp.d_bytes, d_bytes)
                got = H.decode_output(pb.Matrix(rows=m, cols=n, dtype=out, data=os.pread(fs, d_bytes, 256)))
                self.assertLessEqual(H.output_error(got, H.reference(a, b), out), 1e-2 if out != pb.DTYPE_FP32 else 1e-4)
                c.close_region(ra)
                c.close_region(rs)
                os.close(fa)
                os.close(fs)
            # The arena still works beside them, in the same session.
            a = H.make_matrix(pb, self.rng, m, k, H.DT_E4M3, H.SL_1X128)
            off, s_off, d_off = c.alloc(len(a.data)), c.alloc(4 * len(a.scales)), c.alloc(m * n * 4)
            c.write(off, a.data)
            c.write(s_off, struct.pack("<%df" % len(a.scales), *a.scales))
            comp = c.gemm(m=m, k=k, a=(off, H.DT_E4M3, H.SL_1X128, s_off), weight_id=wid, d=d_off,
                          d_capacity=m * n * 4, out_dtype=pb.DTYPE_FP32)
            got = H.decode_output(pb.Matrix(rows=m, cols=n, dtype=pb.DTYPE_FP32, data=c.read(d_off, comp.d_bytes)))
            self.assertLessEqual(H.rel_error(got, H.reference(a, b)), 1e-4)

    def test_bad_regions_get_clear_errors(self):
        with S.Client(self.d.shm_socket, version=2) as c, S.Client(self.d.shm_socket, version=2) as other:
            _b, wid = H.shm_weight(c, self.pb, self.rng, "regions-bad", 16, 128)
            fd = memfd("gemmd-bad", bytes(8192))

            def refused(fn, code, words):
                with self.assertRaises(S.ShmError) as e:
                    fn()
                self.assertEqual(e.exception.code, code, str(e.exception))
                self.assertIn(words, str(e.exception))

            refused(lambda: c.open_region_fd(fd, 8193), 3, "does not fit")
            # A file the client could shrink under gemmd's mapping (a read past its end would
            # be SIGBUS in gemmd): refused unless sealed against shrinking.
            unsealed = memfd("gemmd-unsealed", bytes(8192), seal=False)
            refused(lambda: c.open_region_fd(unsealed, 8192), 3, "F_SEAL_SHRINK")
            os.close(unsealed)
            with open(os.path.join(H.tmpdir(), "plain-region-%d" % os.getpid()), "wb+") as f:
                f.truncate(8192)
                refused(lambda: c.open_region_fd(f.fileno(), 8192), 3, "F_SEAL_SHRINK")
            refused(lambda: c.open_region_fd(fd, 0), 3, "does not fit")
            refused(lambda: c.control(S.CTL_REGION_OPEN, S.REGION_FD, 4096), 3, "needs its fd")
            refused(lambda: c.control(S.CTL_REGION_OPEN, S.REGION_CUDA_IPC, 4096, handle=bytes(64)), 12, "CUDA")
            refused(lambda: c.control(S.CTL_REGION_OPEN, 7, 4096, fd=fd), 3, "kind 7")
            refused(lambda: c.control(9), 3, "unknown control op")
            refused(lambda: c.close_region(77), 5, "not open")
            # A reply that no waiting call asked for (as when an earlier one timed out) is
            # dropped by its tag, not taken for the next call's answer.
            c.sock.send(S.CTL.pack(S.CTL_REGION_CLOSE, 0, 0, 999999, 77, 0, b""))
            c.close_region(c.open_region_fd(fd, 4096))
            rid = c.open_region_fd(fd, 8192)
            with self.assertRaises(PermissionError):  # the seal holds: the mapping stays whole
                os.ftruncate(fd, 0)

            def gemm(client, regions, a_off=0, d_off=4096, m=2):
                return client.gemm(m=m, k=128, a=(a_off, H.DT_E4M3, H.SL_NONE, 0), weight_id=wid, d=d_off,
                                   d_capacity=m * 16 * 2, regions=regions)
            self.assertEqual(gemm(c, (rid, 0, rid)).status, 0)
            refused(lambda: gemm(c, (rid, 0, rid), a_off=8192 - 128), 3, "outside region %d" % rid)
            refused(lambda: gemm(c, (rid, 0, rid), d_off=8192 - 8), 3, "inside region %d" % rid)
            refused(lambda: gemm(c, (rid + 5, 0, 0)), 3, "region %d is not open" % (rid + 5))
            # Another connection cannot name it: ids are the connection's own.
            _b2, wid2 = H.shm_weight(other, self.pb, self.rng, "regions-other", 16, 128)
            with self.assertRaises(S.ShmError) as e:
                other.gemm(m=2, k=128, a=(0, H.DT_E4M3, H.SL_NONE, 0), weight_id=wid2, d=4096, d_capacity=64,
                           regions=(rid, 0, 0))
            self.assertIn("not open on this connection", str(e.exception))
            # Closed: no later entry may name it.
            c.close_region(rid)
            refused(lambda: gemm(c, (rid, 0, rid)), 3, "not open")
            refused(lambda: c.close_region(rid), 5, "not open")
            # A bounded number at once.
            ids = [c.open_region_fd(fd, 4096) for _ in range(32)]
            refused(lambda: c.open_region_fd(fd, 4096), 8, "32 regions")
            for i in ids:
                c.close_region(i)
            os.close(fd)
            # Only GEMM entries name regions.
            bad = bytearray(S.unregister_sqe(99, wid))
            bad[88] = 1
            c.submit(bytes(bad))
            comp = c.wait(99)
            self.assertEqual((comp.status, comp.message), (3, "only GEMM entries name regions"))

    def test_version_1_cannot_name_regions(self):
        with S.Client(self.d.shm_socket) as c:
            _b, wid = H.shm_weight(c, self.pb, self.rng, "regions-v1", 16, 128)
            rid, raw = c.gemm_entry(m=1, k=128, a=(c.alloc(128), H.DT_E4M3, H.SL_NONE, 0), weight_id=wid,
                                    d=c.alloc(32), d_capacity=32, regions=(1, 0, 0))
            c.submit(raw)
            comp = c.wait(rid)
            self.assertEqual((comp.status, comp.message), (3, "entry reserved bytes must be 0"))

    def test_region_lives_until_its_requests_are_done_and_dies_with_its_client(self):
        pb = self.pb
        m, n, k = 256, 512, 4096  # 1 GFLOP: the CPU backend is still at it when the close comes
        with S.Client(self.d.shm_socket, version=2) as c:
            b, wid = H.shm_weight(c, self.pb, self.rng, "regions-life", n, k)
            a = H.make_matrix(pb, self.rng, m, k, H.DT_E4M3, H.SL_NONE)
            name = "gemmd-life-%d" % os.getpid()
            fd = memfd(name, a.data, len(a.data) + m * n * 4)
            rid = c.open_region_fd(fd, len(a.data) + m * n * 4)
            self.assertEqual(gemmd_maps(self.d, name), 1)
            req = c.gemm_async(m=m, k=k, a=(0, H.DT_E4M3, H.SL_NONE, 0), weight_id=wid, d=len(a.data),
                               d_capacity=m * n * 4, out_dtype=pb.DTYPE_FP32, regions=(rid, 0, rid))
            c.close_region(rid)  # while the GEMM may still run
            comp = c.wait(req)
            self.assertEqual(comp.status, 0, comp.message)
            got = H.decode_output(pb.Matrix(rows=m, cols=n, dtype=pb.DTYPE_FP32,
                                            data=os.pread(fd, m * n * 4, len(a.data))))
            self.assertLessEqual(H.rel_error(got, H.reference(a, b)), 1e-4)
            deadline = time.monotonic() + 5
            while gemmd_maps(self.d, name) and time.monotonic() < deadline:
                time.sleep(0.02)
            self.assertEqual(gemmd_maps(self.d, name), 0, "a closed region stayed mapped")
            os.close(fd)
        # A client that goes away with regions open: gemmd unmaps them.
        name = "gemmd-dead-%d" % os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                c = S.Client(self.d.shm_socket, version=2)
                fd = memfd(name, bytes(1 << 20))
                c.open_region_fd(fd, 1 << 20)
                c.open_region_fd(fd, 4096)
            finally:
                os._exit(0)  # no close: the kernel closes the socket
        os.waitpid(pid, 0)
        deadline = time.monotonic() + 5
        while gemmd_maps(self.d, name) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual(gemmd_maps(self.d, name), 0, "a dead client's regions stayed mapped")
        with S.Client(self.d.shm_socket) as c:  # and gemmd serves on
            self.assertGreater(c.weight_info(name="regions-life")[0], 0)


if __name__ == "__main__":
    unittest.main()
