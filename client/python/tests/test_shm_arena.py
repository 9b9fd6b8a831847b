"""The shared-memory arena: the free-list allocator; the byte-level client
(gemmd.shm.Client, alias gemmd_shm) whose operations no longer free the caller's
allocations; gemmd.Client's requests waiting for arena space; a session gemmd ends."""

import random
import threading

import ml_dtypes
import numpy as np
import pytest

import gemmd
import harness as H
from gemmd import StatusCode, shm


def test_arena_first_fit_merges_and_checks():
    heap = shm.Arena(4096, 1 << 20)
    a = heap.alloc(100)
    b = heap.alloc(1000, align=4096)
    c = heap.alloc(1, align=1)
    assert a % 256 == 0 and b % 4096 == 0 and len({a, b, c}) == 3
    heap.free(b)
    assert heap.alloc(1000, align=4096) == b  # the hole is reused
    with pytest.raises(ValueError):
        heap.free(b + 1)
    for off in (a, b, c):
        heap.free(off)
    with pytest.raises(ValueError):
        heap.free(a)  # twice
    assert heap.allocations == 0 and heap.free_bytes == 1 << 20
    assert heap.alloc(1 << 20, align=1) == 4096  # merged back into one piece
    with pytest.raises(MemoryError):
        heap.alloc(1)
    heap.reset()
    assert heap.free_bytes == 1 << 20


def test_arena_random_never_overlaps():
    rng = random.Random(5)
    heap = shm.Arena(1 << 12, 1 << 16)
    live = {}
    for _ in range(5000):
        if live and (rng.random() < 0.45 or len(live) > 60):
            off = rng.choice(list(live))
            heap.free(off)
            del live[off]
            continue
        n, align = rng.randint(1, 3000), rng.choice((1, 4, 256))
        try:
            off = heap.alloc(n, align)
        except MemoryError:
            continue
        assert off % align == 0 and 1 << 12 <= off and off + n <= (1 << 12) + (1 << 16)
        for o, m in live.items():
            assert off + n <= o or o + m <= off
        live[off] = n
    assert heap.free_bytes + sum(heap._blocks[o][1] for o in live) == 1 << 16


@pytest.fixture(scope="module")
def daemon():
    d = H.Gemmd()
    yield d
    assert d.stop() == 0


def test_byte_client_operations_leave_caller_blocks_alone(daemon):
    """register_weight and weight_info take scratch blocks of their own: A and D, written
    before, are intact after, and serve the GEMM they were written for."""
    k, n, m = 256, 64, 4
    rng = np.random.default_rng(3)
    with shm.Client(daemon.shm_socket) as c:
        a_bytes = bytes(rng.integers(0, 0x7E, m * k, dtype=np.uint8))
        a = c.alloc(len(a_bytes))
        c.write(a, a_bytes)
        d = c.alloc(m * n * 4)
        c.write(d, b"\xAB" * (m * n * 4))
        wid = c.register_weight("bytes-w", n, k, bytes(rng.integers(0, 0x7E, n * k, dtype=np.uint8)),
                                shm.DTYPE_E4M3, shm.LAYOUT_TENSOR, [0.5])
        assert c.weight_info(name="bytes-w") == (wid, n, k)
        assert c.read(a, len(a_bytes)) == a_bytes and c.read(d, 8) == b"\xAB" * 8
        assert c.heap.allocations == 2
        r = c.gemm(m=m, k=k, a=(a, shm.DTYPE_E4M3, shm.LAYOUT_NONE, 0), weight_id=wid, d=d,
                   d_capacity=m * n * 4, out_dtype=shm.DTYPE_FP32)
        assert r.d_bytes == m * n * 4 and c.read(d, 4) != b"\xAB" * 4
        c.free(a)
        c.free(d)
        c.unregister_weight(wid)
        with pytest.raises(gemmd.GemmdError) as e:
            c.weight_info(name="bytes-w")
        assert e.value.code == StatusCode.NOT_FOUND and c.heap.allocations == 0


def test_gemmd_shm_name_still_works(daemon):
    import gemmd_shm as S

    assert S.Client is shm.Client and S.ShmError is gemmd.GemmdError and S.SQE.size == 128
    with S.Client(daemon.shm_socket) as c:
        with pytest.raises(S.ShmError) as e:
            c.weight_info(name="nobody")
        assert e.value.code == 5 and "%d" % e.value.code == "5"


def test_requests_wait_for_arena_space(daemon):
    """A 1 MiB arena serves many requests whose blocks together are far larger: each
    waits for others' blocks to come back; one that can never fit fails at once."""
    k, n = 1024, 256
    rng = np.random.default_rng(4)
    with gemmd.Client("unix://" + daemon.shm_socket, arena_bytes=1 << 20) as c:
        w = c.register_weight("arena-w", rng.standard_normal((n, k)).astype(ml_dtypes.bfloat16))
        xs = [rng.standard_normal((64, k)).astype(np.float32) for _ in range(24)]  # 256 KiB each
        futs = [c.gemm_async(x, w, out_dtype="fp32") for x in xs]
        for x, f in zip(xs, futs):
            assert f.result(timeout=60).shape == (64, n)
        with pytest.raises(gemmd.GemmdError) as e:
            c.gemm(np.ones((512, k), np.float32), w)
        assert e.value.code == StatusCode.RESOURCE_EXHAUSTED and "arena_bytes" in e.value.message
        c.unregister_weight(w)
        assert c._t.heap.allocations == 0


def test_name_bound_to_a_new_weight(daemon):
    """A weight name cached by one shm client and re-registered by another (a new id, a
    new N) is looked up again, not used stale."""
    k = 128
    with gemmd.Client("unix://" + daemon.shm_socket) as c1, \
            gemmd.Client("unix://" + daemon.shm_socket) as c2:
        c1.register_weight("rebound", np.ones((8, k), np.float32))
        assert c1.gemm(np.ones((1, k), np.float32), "rebound").shape == (1, 8)
        c2.unregister_weight("rebound")
        c2.register_weight("rebound", np.ones((16, k), np.float32))
        assert c1.gemm(np.ones((1, k), np.float32), "rebound").shape == (1, 16)
        c2.unregister_weight("rebound")
        c2.register_weight("rebound", np.ones((24, k), np.float32))
        assert c1.gemm_async(np.ones((1, k), np.float32), "rebound").result(timeout=60).shape == (1, 24)
        c1.unregister_weight("rebound")


def test_session_ended_by_gemmd():
    """gemmd going away fails what is waiting, and what comes after, with UNAVAILABLE."""
    d = H.Gemmd()
    c = gemmd.Client("unix://" + d.shm_socket)
    w = c.register_weight("gone", np.ones((8, 128), np.float32))
    assert c.health() == gemmd.HealthStatus.SERVING
    assert d.stop() == 0
    with pytest.raises(gemmd.GemmdError) as e:
        for _ in range(100):  # the completion thread notices the closed socket
            c.gemm(np.ones((1, 128), np.float32), w, timeout=5)
            threading.Event().wait(0.05)
    assert e.value.code == StatusCode.UNAVAILABLE
    c.close()


