"""Device-resident operands on the CUDA backend (shared-memory protocol version 2, §7): a
client process holding torch CUDA tensors hands gemmd their CUDA IPC handles as regions
and names them in GEMM entries for A, A's scales and D, so that no byte of them crosses
PCIe. Results against the FP64 reference for FP8 A with 1×128 scales (E4M3, E5M2; BF16,
FP16 and FP32 out) and raw BF16/FP32 A quantized on the GPU; a region that claims more
than its allocation, an A in device memory gemmd would have to read on the host, and a
client that dies with regions open get clear errors or are cleaned up, and gemmd serves
on. Tag gpu: CI builds it, the GPU machine runs it (tools/gpu/gpu_suite.sh suites with
GEMMD_SUITES=cuda_regions_test); it needs torch with CUDA."""

import os
import subprocess
import sys
import threading
import unittest

import numpy as np

import harness as H

sys.path.insert(0, os.path.dirname(H.repo_path("client/python/gemmd_shm.py")))
import gemmd_shm as S  # noqa: E402
from gemmd import _cuda  # noqa: E402

try:
    import torch
    HAVE_CUDA = torch.cuda.is_available()
except ImportError:
    HAVE_CUDA = False


def on_device(data, shift=0):
    """bytes → a CUDA uint8 tensor holding them `shift` bytes past its start, and (handle,
    region bytes, offset of the bytes in it). The handle is the driver's (cuIpcGetMemHandle
    of the allocation's start), as the gemmd package takes it: torch's _share_cuda_ puts
    its own header before the handle. A shift that breaks 16-byte alignment makes gemmd
    copy the operand instead of reading or writing it in place."""
    t = torch.frombuffer(bytearray(bytes(shift) + bytes(data)), dtype=torch.uint8).cuda()
    alloc = _cuda.allocation(t.data_ptr())
    return t[shift:], _cuda.ipc_handle(alloc.base), alloc.size, t.data_ptr() + shift - alloc.base


def open_ipc(c, handle, nbytes):
    return c.control(S.CTL_REGION_OPEN, S.REGION_CUDA_IPC, nbytes, handle=bytes(handle).ljust(64, b"\0"))[1]


@unittest.skipUnless(HAVE_CUDA, "needs torch with CUDA")
class DeviceRegions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = H.Gemmd("--backend", "cuda")
        cls.pb, _, _, _ = H.stubs()
        cls.rng = np.random.default_rng()

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def gemm_in_regions(self, c, wid, b, a, out, shift=0):
        """A (and its scales) and D in CUDA memory of this process, `shift` bytes into their
        allocations; D back from the device."""
        pb = self.pb
        m, n = a.rows, b.rows
        ta, ha, na, oa = on_device(a.data, shift)
        regions = [open_ipc(c, ha, na)]
        s_off = 0
        if len(a.scales):
            ts, hs, ns, s_off = on_device(np.asarray(a.scales, dtype=np.float32).tobytes())
            regions.append(open_ipc(c, hs, ns))
        else:
            regions.append(0)
        d_bytes = m * n * {pb.DTYPE_FP32: 4, pb.DTYPE_FP16: 2}.get(out, 2)
        td, hd, nd, d_off = on_device(bytes(d_bytes), shift)
        regions.append(open_ipc(c, hd, nd))
        torch.cuda.synchronize()  # A is complete before the entry goes
        comp = c.gemm(m=m, k=a.cols, a=(oa, a.dtype, a.scale_layout, s_off), weight_id=wid, d=d_off,
                      d_capacity=d_bytes, out_dtype=out, regions=tuple(regions))
        self.assertEqual(comp.d_bytes, d_bytes)
        got = H.decode_output(pb.Matrix(rows=m, cols=n, dtype=out or pb.DTYPE_BF16, data=td.cpu().numpy().tobytes()))
        for r in set(regions) - {0}:
            c.close_region(r)
        return got

    def test_fp8_and_raw_a_in_device_memory(self):
        """k = 1024 at aligned addresses: FP8 A and D read and written in place by the GEMM;
        k = 1000 (rows not a multiple of 16 bytes) or operands 8 bytes off alignment: copied
        into the batch buffer and back."""
        pb = self.pb
        cases = [(H.DT_E4M3, H.SL_1X128, pb.DTYPE_FP32), (H.DT_E5M2, H.SL_1X128, pb.DTYPE_BF16),
                 (H.DT_E4M3, H.SL_1X128, pb.DTYPE_FP16), (H.DT_BF16, H.SL_NONE, pb.DTYPE_FP32),
                 (H.DT_FP32, H.SL_NONE, pb.DTYPE_BF16)]
        with S.Client(self.d.shm_socket, version=2) as c:
            for k, shift in ((1000, 0), (1024, 0), (1024, 8)):
                b, wid = H.shm_weight(c, self.pb, self.rng, "dev-w-%d-%d" % (k, shift), 130, k)
                for m in (1, 8, 300):
                    for adt, layout, out in cases:
                        a = H.make_matrix(pb, self.rng, m, k, adt, layout)
                        got = self.gemm_in_regions(c, wid, b, a, out, shift)
                        err = H.output_error(got, H.reference(a, b), out)
                        self.assertLessEqual(err, H.TOLERANCE[out], "k=%d shift=%d m=%d a=%d out=%d" % (
                            k, shift, m, adt, out))

    def test_concurrent_clients_in_place_and_stacked(self):
        """Clients sending at once, batched together: requests of a weight of their own read
        and write their device memory in place; two clients share a weight, so their
        requests, where they meet in a batch, stack into one group and are copied. Every
        result against FP64."""
        pb = self.pb
        k, n = 2048, 256
        # a gemmd of its own that holds a batch open 2 ms, so that the workers' requests meet
        d = H.Gemmd("--backend", "cuda", "--max-batch-delay-us", "2000")
        with S.Client(d.shm_socket, version=2) as c0:
            weights = [H.shm_weight(c0, self.pb, self.rng, "dev-cc-%d" % i, n, k) for i in range(3)]
        errors = []

        def worker(idx):
            b, wid = weights[min(idx, 2)]  # workers 2 and 3 share the last weight
            try:
                with S.Client(d.shm_socket, version=2) as c:
                    for it in range(12):
                        a = H.make_matrix(pb, np.random.default_rng(idx * 100 + it), 8, k, H.DT_E4M3, H.SL_1X128)
                        got = self.gemm_in_regions(c, wid, b, a, pb.DTYPE_BF16)
                        err = H.output_error(got, H.reference(a, b), pb.DTYPE_BF16)
                        if err > H.TOLERANCE[pb.DTYPE_BF16]:
                            errors.append("worker %d request %d: error %g" % (idx, it, err))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append("worker %d: %r" % (idx, e))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        batched = H.metric(d, "gemmd_batch_requests_sum") > H.metric(d, "gemmd_batch_requests_count")
        self.assertEqual(d.stop(), 0)
        self.assertEqual(errors, [])
        self.assertTrue(batched, "no batch held two requests")

    def test_bad_device_regions(self):
        k, n = 256, 64
        with S.Client(self.d.shm_socket, version=2) as c:
            _b, wid = H.shm_weight(c, self.pb, self.rng, "dev-bad", n, k)
            t, h, nbytes, off = on_device(bytes(1 << 20))
            with self.assertRaises(S.ShmError) as e:
                open_ipc(c, h, nbytes + (64 << 20))  # past the allocation
            self.assertIn("does not fit", str(e.exception))
            with self.assertRaises(S.ShmError) as e:
                open_ipc(c, bytes(64), 4096)  # a handle of nothing
            self.assertEqual(e.exception.code, 3)
            with self.assertRaises(S.ShmError) as e:
                fd = os.memfd_create("x")
                os.ftruncate(fd, 4096)
                c.open_region_fd(fd, 4096)
            self.assertEqual(e.exception.code, 12)
            r = open_ipc(c, h, nbytes)
            # A with ROW scales in device memory: gemmd would read the scales on the host.
            with self.assertRaises(S.ShmError) as e:
                c.gemm(m=4, k=k, a=(off, H.DT_E4M3, H.SL_ROW, off + 4096), weight_id=wid, d=off + 8192,
                       d_capacity=4 * n * 2, regions=(r, r, r))
            self.assertIn("A in device memory", str(e.exception))
            # Offsets past the region.
            with self.assertRaises(S.ShmError) as e:
                c.gemm(m=4, k=k, a=(nbytes - 16, H.DT_E4M3, H.SL_1X128, off), weight_id=wid, d=off + 8192,
                       d_capacity=4 * n * 2, regions=(r, r, r))
            self.assertIn("outside region", str(e.exception))
            c.close_region(r)
            del t

    def test_client_dies_with_regions_open(self):
        script = (
            "import sys, torch; sys.path.insert(0, %r); import gemmd_shm as S; from gemmd import _cuda\n"
            "c = S.Client(%r, version=2)\n"
            "t = torch.zeros(1 << 20, dtype=torch.uint8, device='cuda')\n"
            "a = _cuda.allocation(t.data_ptr())\n"
            "print(c.control(S.CTL_REGION_OPEN, S.REGION_CUDA_IPC, a.size, handle=_cuda.ipc_handle(a.base))[1])\n"
            "import os; os._exit(0)\n") % (os.path.dirname(H.repo_path("client/python/gemmd_shm.py")), self.d.shm_socket)
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertGreater(int(out.stdout.strip()), 0)
        with S.Client(self.d.shm_socket) as c:  # gemmd serves on
            self.assertGreater(H.shm_weight(c, self.pb, self.rng, "after-death", 16, 128)[1], 0)


if __name__ == "__main__":
    unittest.main()
