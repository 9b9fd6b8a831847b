"""Operands gemmd reads and writes where they lie (docs/shm-protocol.md §7), through
gemmd.Client over shared memory: shared buffers on the CPU backend (every dtype and A
layout against the FP64 reference and the arena path, control messages beside GEMMs from
many threads, a buffer closed with its request in flight, the session's end still
noticed); the cache of CUDA allocations, with a fake driver; and CUDA tensors, on a GPU
with gemmd's CUDA backend."""

import threading

import numpy as np
import pytest

import gemmd
import harness as H
from gemmd import DType, ScaleLayout, StatusCode
from gemmd._arrays import NP_DTYPE
from gemmd._regions import DeviceRegions

N, K = 96, 384
CUDA_BACKEND = "cuda" in H.EXTRA_ARGS


@pytest.fixture(scope="module")
def daemon():
    d = H.Gemmd("--max-m", "4096")
    yield d
    assert d.stop() == 0


@pytest.fixture(scope="module")
def client(daemon):
    with gemmd.Client("unix://" + daemon.shm_socket, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def weight(client):
    """(WeightInfo, its real values): E4M3 with 128x128 scales, stored as given."""
    rng = np.random.default_rng(1)
    layout = ScaleLayout.BLOCK_128X128
    data, scales = H.random_matrix(rng, N, K, int(DType.FP8_E4M3), int(layout))
    arr = np.frombuffer(data, dtype=NP_DTYPE[DType.FP8_E4M3]).reshape(N, K)
    info = client.register_weight("regions-w", arr, np.float32(scales).reshape(layout.shape(N, K)))
    return info, H.real_values(int(DType.FP8_E4M3), data, int(layout), scales, N, K, "b")


class arena_sizes:
    """Records the arena blocks (bytes, alignment) a transport asks for inside the block."""

    def __init__(self, client):
        self.t, self.sizes = client._t, []

    def __enter__(self):
        inner = self.t._alloc

        def spy(sizes):
            self.sizes.extend(sizes)
            return inner(sizes)
        self.t._alloc = spy
        return self.sizes

    def __exit__(self, *exc):
        del self.t._alloc


def same(got, want, tol=1e-5):
    """The same D up to summation order (FP32; tol=1e-2 for BF16, one rounding apart):
    requests batched together may be summed in another order than one alone."""
    err = H.rel_error(np.asarray(got, np.float64), np.asarray(want, np.float64))
    assert err <= tol, err


def a_operand(rng, rows, dtype, layout):
    data, scales = H.random_matrix(rng, rows, K, int(dtype), int(layout))
    arr = np.frombuffer(data, dtype=NP_DTYPE[dtype]).reshape(rows, K)
    s = None if layout == ScaleLayout.NONE else np.float32(scales).reshape(layout.shape(rows, K))
    return arr, s, H.real_values(int(dtype), data, int(layout), scales, rows, K, "a")


@pytest.mark.skipif(CUDA_BACKEND, reason="the CUDA backend takes device memory, not memfds")
@pytest.mark.parametrize("dtype", [DType.FP8_E4M3, DType.FP8_E5M2, DType.BF16, DType.FP16, DType.FP32])
@pytest.mark.parametrize("layout", [ScaleLayout.NONE, ScaleLayout.ROW, ScaleLayout.BLOCK_1X128])
def test_shared_buffer_in_place(client, weight, dtype, layout):
    """A, its scales and D in a shared buffer: D equals the arena path's, bit for bit, and
    the FP64 reference within SPEC §1's tolerance; nothing of the arena is used."""
    info, _ = weight
    rng = np.random.default_rng(int(dtype) * 10 + int(layout))
    rows = 17
    arr, s, real = a_operand(rng, rows, dtype, layout)
    want = client.gemm(arr, info, a_scales=s, a_layout=layout, out_dtype="fp32")
    with client.shared_buffer(1 << 20) as buf:
        a = buf.array(arr.shape, arr.dtype)
        a[...] = arr
        sc = None
        if s is not None:
            sc = buf.array(s.shape, np.float32, offset=256 << 10)
            sc[...] = s
        out = buf.array((rows, N), np.float32, offset=512 << 10)
        with arena_sizes(client) as sizes:
            got = client.gemm(a, info, a_scales=sc, a_layout=layout, out_dtype="fp32", out=out)
        assert got is out and sizes == []
        np.testing.assert_array_equal(out, want)
        err = H.output_error(np.asarray(out, np.float64), real @ weight[1].T, int(DType.FP32))
        assert err <= H.TOLERANCE[int(DType.FP32)], err
        del a, sc, out, got


def test_shared_buffer_mixed_and_views(client, weight):
    """Only A in the buffer (D through the arena), only D there, and a view of a larger
    array: each gives the arena path's D."""
    if CUDA_BACKEND:
        pytest.skip("the CUDA backend takes device memory, not memfds")
    info, w = weight
    rng = np.random.default_rng(7)
    x = rng.standard_normal((40, K)).astype(np.float32)
    want = client.gemm(x[8:24], info, out_dtype="fp32")
    with client.shared_buffer(256 << 10) as buf:
        big = buf.array((40, K), np.float32)
        big[...] = x
        with arena_sizes(client) as sizes:
            np.testing.assert_array_equal(client.gemm(big[8:24], info, out_dtype="fp32"), want)
        assert sizes == [(16 * N * 4, 256)]  # D only
        out = buf.array((16, N), np.float32, offset=128 << 10)
        with arena_sizes(client) as sizes:
            np.testing.assert_array_equal(client.gemm(x[8:24], info, out_dtype="fp32", out=out), want)
        assert sizes == [(16 * K * 4, 256)]  # A only
        np.testing.assert_array_equal(out, want)
        # A strided view is not contiguous: it goes through the arena, with the same answer.
        np.testing.assert_array_equal(client.gemm(big[::2][4:12], info, out_dtype="fp32"),
                                      client.gemm(x[::2][4:12], info, out_dtype="fp32"))
        del big, out


def test_buffer_closed_with_its_request_in_flight(client, weight):
    """Closing a buffer while gemmd still reads it: gemmd unmaps it after the request, which
    finishes with the right D; a later GEMM with its arrays goes through the arena."""
    if CUDA_BACKEND:
        pytest.skip("the CUDA backend takes device memory, not memfds")
    info, _ = weight
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2048, K)).astype(np.float32)
    want = client.gemm(x, info, out_dtype="fp32")
    buf = client.shared_buffer(x.nbytes)
    a = buf.array(x.shape, np.float32)
    a[...] = x
    futs = [client.gemm_async(a, info, out_dtype="fp32") for _ in range(4)]
    buf.close()
    for f in futs:
        same(f.result(timeout=60), want)  # batched together
    np.testing.assert_array_equal(client.gemm(a, info, out_dtype="fp32"), want)  # now copied
    with pytest.raises(gemmd.GemmdError) as e:
        buf.array((1,), np.float32)
    assert e.value.code == StatusCode.FAILED_PRECONDITION
    buf.close()  # twice: nothing


def test_controls_beside_gemms_from_many_threads(daemon, weight):
    """Threads run GEMMs while others open and close buffers on the same session: every
    result is right, and no control reply is taken for the session's end."""
    if CUDA_BACKEND:
        pytest.skip("the CUDA backend takes device memory, not memfds")
    info, _ = weight
    rng = np.random.default_rng(12)
    xs = [rng.standard_normal((4, K)).astype(np.float32) for _ in range(8)]
    errors = []
    with gemmd.Client("unix://" + daemon.shm_socket, timeout=60) as c:
        wants = [c.gemm(x, "regions-w", out_dtype="fp32") for x in xs]

        def gemms(i):
            try:
                for _ in range(60):
                    same(c.gemm(xs[i], "regions-w", out_dtype="fp32"), wants[i])
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        def buffers(i):
            try:
                for j in range(25):
                    with c.shared_buffer(64 << 10) as buf:
                        a = buf.array(xs[i].shape, np.float32)
                        a[...] = xs[i]
                        same(c.gemm(a, "regions-w", out_dtype="fp32"), wants[i])
                        del a
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=gemms, args=(i,)) for i in range(4)]
        threads += [threading.Thread(target=buffers, args=(i,)) for i in range(4, 8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[:3]
        assert c.health() == gemmd.HealthStatus.SERVING


def test_session_end_noticed_after_controls():
    """After control exchanges the completion thread still watches the socket: gemmd's end
    fails the next request with UNAVAILABLE."""
    if CUDA_BACKEND:
        pytest.skip("the CUDA backend takes device memory, not memfds")
    d = H.Gemmd()
    c = gemmd.Client("unix://" + d.shm_socket)
    c.register_weight("end", np.ones((8, 128), np.float32))
    buf = c.shared_buffer(4096)
    a = buf.array((1, 128), np.float32)
    a[...] = 1
    assert c.gemm(a, "end", out_dtype="fp32")[0, 0] == 128
    assert d.stop() == 0
    with pytest.raises(gemmd.GemmdError) as e:
        for _ in range(100):
            c.gemm(np.ones((1, 128), np.float32), "end", timeout=5)
            threading.Event().wait(0.05)
    assert e.value.code == StatusCode.UNAVAILABLE
    del a
    buf.close()  # the session's end closed the region: nothing to send
    c.close()


def test_shared_buffer_needs_shm(daemon):
    with gemmd.Client(daemon.address) as c:
        with pytest.raises(gemmd.GemmdError) as e:
            c.shared_buffer(4096)
        assert e.value.code == StatusCode.FAILED_PRECONDITION


def test_shared_buffer_bounds(client):
    if CUDA_BACKEND:
        pytest.skip("the CUDA backend takes device memory, not memfds")
    with client.shared_buffer(4096) as buf:
        with pytest.raises(gemmd.GemmdError) as e:
            buf.array((1025,), np.float32)
        assert e.value.code == StatusCode.INVALID_ARGUMENT
        with pytest.raises(gemmd.GemmdError):
            buf.array((2,), np.float32, offset=4090)
    with pytest.raises(gemmd.GemmdError):
        client.shared_buffer(0)


class _Alloc:
    def __init__(self, base, size, buffer_id):
        self.base, self.size, self.buffer_id = base, size, buffer_id


def test_device_region_cache_with_a_fake_driver():
    """Allocations open once and stay open; the least recently used idle one is closed for
    a new one; all busy is RESOURCE_EXHAUSTED; a new allocation at a freed one's address
    (a new buffer id) opens a new region; an operand past its allocation is refused."""
    allocs = {}  # ptr range start -> _Alloc
    opened, closed = [], []

    def lookup(ptr):
        for a in allocs.values():
            if a.base <= ptr < a.base + a.size:
                return a
        raise AssertionError("no allocation at 0x%x" % ptr)

    def open_ipc(handle, size):
        opened.append((handle, size))
        return len(opened)

    cache = DeviceRegions(open_ipc, closed.append, limit=2, lookup=lookup,
                          handle=lambda base: base.to_bytes(64, "little"))
    allocs[0x1000] = _Alloc(0x1000, 0x1000, 1)
    allocs[0x4000] = _Alloc(0x4000, 0x1000, 2)
    allocs[0x8000] = _Alloc(0x8000, 0x1000, 3)
    r1, off = cache.acquire(0x1100, 0x100)
    assert (r1.region_id, off) == (1, 0x100) and opened[0] == ((0x1000).to_bytes(64, "little"), 0x1000)
    r1b, off = cache.acquire(0x1200, 0x10)
    assert r1b is r1 and off == 0x200 and len(opened) == 1  # the same allocation: no new region
    cache.release(r1)
    cache.release(r1b)
    r2, _ = cache.acquire(0x4000, 8)
    with pytest.raises(gemmd.GemmdError) as e:
        cache.acquire(0x4ff8, 16)
    assert e.value.code == StatusCode.INVALID_ARGUMENT
    r3, _ = cache.acquire(0x8000, 8)  # full: region 1 (idle, least recent) is closed
    assert closed == [1] and r3.region_id == 3 and len(cache) == 2
    with pytest.raises(gemmd.GemmdError) as e:  # 2 and 3 are both in use
        cache.acquire(0x1000, 8)
    assert e.value.code == StatusCode.RESOURCE_EXHAUSTED
    cache.release(r2)
    allocs[0x4000] = _Alloc(0x4000, 0x1000, 4)  # freed and allocated again at the same address
    r4, _ = cache.acquire(0x4000, 8)
    assert r4.region_id == 4 and closed == [1, 2]
    cache.release(r3)
    cache.release(r4)
    allocs[0xc000] = _Alloc(0xc000, 0x1000, 5)
    allocs[0xe000] = _Alloc(0xe000, 0x1000, 6)
    cache.acquire(0xc000, 8)
    cache.acquire(0xe000, 8)  # released regions are idle again: both make room
    assert closed == [1, 2, 3, 4] and len(cache) == 2


# ---- CUDA tensors (gemmd's CUDA backend, on the GPU machine) -----------------------------

def _cuda():
    torch = pytest.importorskip("torch")
    if not CUDA_BACKEND or not torch.cuda.is_available():
        pytest.skip("needs a GPU and gemmd's CUDA backend ($GEMMD_TEST_ARGS=--backend cuda)")
    return torch


def test_cuda_tensors_in_place(client, daemon, weight):
    """A CUDA FP8 A with 1x128 scales, and a BF16 A (quantized on the GPU): D is a CUDA
    tensor equal to the host path's D; `out` on the GPU is written; over gRPC the same
    tensors go through the host and D comes back to the GPU."""
    torch = _cuda()
    info, _ = weight
    rng = np.random.default_rng(21)
    arr, s, _real = a_operand(rng, 24, DType.FP8_E4M3, ScaleLayout.BLOCK_1X128)
    want = client.gemm(arr, info, a_scales=s, out_dtype="fp32")
    a = torch.from_numpy(arr.view(np.uint8).copy()).view(torch.float8_e4m3fn).cuda()
    sc = torch.from_numpy(s).cuda()
    d = client.gemm(a, info, a_scales=sc, out_dtype="fp32")
    assert d.is_cuda and d.dtype == torch.float32 and tuple(d.shape) == (24, N)
    same(d.cpu().numpy(), want)
    q = gemmd.Quantized(a, sc, ScaleLayout.BLOCK_1X128)  # the same A as a Quantized: in place too
    d_q = client.gemm(q, info, out_dtype="fp32")
    assert d_q.is_cuda and tuple(d_q.shape) == (24, N)
    same(d_q.cpu().numpy(), want)
    out = torch.empty((24, N), dtype=torch.float32, device="cuda")
    assert client.gemm(a, info, a_scales=sc, out_dtype="fp32", out=out) is out
    same(out.cpu().numpy(), want)
    x = torch.randn(3, 5, K, device="cuda", dtype=torch.bfloat16)
    want_b = client.gemm(x.cpu(), info)
    got_b = client.gemm(x, info)
    assert got_b.is_cuda and tuple(got_b.shape) == (3, 5, N)
    same(got_b.float().cpu().numpy(), want_b.float().numpy(), 1e-2)
    with gemmd.Client(daemon.address) as g:
        over_grpc = g.gemm(a, info, a_scales=sc, out_dtype="fp32")
        assert over_grpc.is_cuda
        same(over_grpc.cpu().numpy(), want)
        q_grpc = g.gemm(q, info, out_dtype="fp32")
        assert q_grpc.is_cuda
        same(q_grpc.cpu().numpy(), want)
    with pytest.raises(gemmd.GemmdError) as e:  # FP8 A with per-row scales: not on the GPU
        client.gemm(a, info, a_scales=torch.ones(24, device="cuda"), a_layout="row")
    assert e.value.code == StatusCode.INVALID_ARGUMENT


def test_cuda_allocations_beyond_the_cache(client, weight):
    """More live CUDA allocations than the session keeps open: idle ones are closed and
    reopened as needed, and every D is right."""
    torch = _cuda()
    info, _ = weight
    xs = [torch.randn(2, K, device="cuda", dtype=torch.bfloat16) * (i + 1) for i in range(6)]
    big = [torch.full((32 << 20,), 0x3F, dtype=torch.uint8, device="cuda") for _ in range(20)]  # own blocks
    wants = [client.gemm(x.cpu(), info) for x in xs]
    for _ in range(3):
        for x, want in zip(xs, wants):
            same(client.gemm(x, info).float().cpu().numpy(), want.float().numpy(), 1e-2)
        for b in big:
            client.gemm(b[:2 * K * 2].view(torch.bfloat16).view(2, K), info)
    assert len(client._t._device_regions()) <= 16


def test_cuda_allocation_lookup():
    """The driver's answer for a pointer: a tensor's view lies inside its allocation, two
    live allocations have different ids, and host memory is refused by name."""
    torch = _cuda()
    from gemmd import _cuda as C

    t, u = torch.empty(3 << 20, dtype=torch.uint8, device="cuda"), torch.empty(64 << 20, dtype=torch.uint8,
                                                                               device="cuda")
    a = C.allocation(t.data_ptr() + 1000)
    assert a.base <= t.data_ptr() and t.data_ptr() + t.numel() <= a.base + a.size and a.buffer_id > 0
    assert C.allocation(u.data_ptr()).buffer_id != a.buffer_id
    host = np.zeros(16, np.uint8)
    with pytest.raises(gemmd.GemmdError) as e:
        C.allocation(host.ctypes.data)
    assert e.value.code == StatusCode.INVALID_ARGUMENT and "not device memory" in str(e.value)
