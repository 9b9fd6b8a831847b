"""gemmd.Client against the real gemmd (the CPU backend unless $GEMMD_TEST_ARGS says
otherwise), over gRPC and over shared memory: every dtype and scale layout against the
FP64 reference of tests/harness.py, the quantizers against gemmd's own, errors, async
variants, streams, and arena blocks that no request can invalidate."""

import asyncio
import threading
import time

import ml_dtypes
import numpy as np
import pytest

import gemmd
import harness as H
from gemmd import DType, ScaleLayout, StatusCode
from gemmd._arrays import NP_DTYPE

A_LAYOUTS = [ScaleLayout.NONE, ScaleLayout.TENSOR, ScaleLayout.ROW, ScaleLayout.BLOCK_1X128]
B_LAYOUTS = [ScaleLayout.NONE, ScaleLayout.TENSOR, ScaleLayout.ROW, ScaleLayout.BLOCK_128X128]
DTYPES = [DType.FP8_E4M3, DType.FP8_E5M2, DType.BF16, DType.FP16, DType.FP32]
OUTS = [("bf16", DType.BF16), ("fp32", DType.FP32), (np.float16, DType.FP16)]
N, K = 130, 300
WEIGHT_BUDGET = 16 << 20


@pytest.fixture(scope="module")
def daemon():
    d = H.Gemmd("--weight-memory-bytes", str(WEIGHT_BUDGET), "--max-m", "4096")
    yield d
    assert d.stop() == 0


@pytest.fixture(scope="module", params=["grpc", "shm"])
def client(request, daemon):
    target = daemon.address if request.param == "grpc" else "unix://" + daemon.shm_socket
    with gemmd.Client(target, timeout=60) as c:
        assert c.transport == request.param
        yield c


def random_operand(rng, rows, cols, dtype, layout):
    """(array of dtype, scales in their natural shape or None, the reference's real values):
    random data from the harness, which also computes the values gemmd must use."""
    data, scales = H.random_matrix(rng, rows, cols, int(dtype), int(layout))
    arr = np.frombuffer(data, dtype=NP_DTYPE[dtype]).reshape(rows, cols).copy()
    s = None if layout == ScaleLayout.NONE else np.float32(scales).reshape(layout.shape(rows, cols))
    return arr, s, data, scales


def reference(a, b):
    """FP64 D of two random_operand results with their dtypes/layouts: (arr, s, data, scales, dt, layout)."""
    av = H.real_values(int(a[4]), a[2], int(a[5]), a[3], a[0].shape[0], a[0].shape[1], "a")
    bv = H.real_values(int(b[4]), b[2], int(b[5]), b[3], b[0].shape[0], b[0].shape[1], "b")
    return av @ bv.T


def same(got, want):
    """The same FP32 D up to summation order (a batch's kernels may split K differently)."""
    assert H.rel_error(got, want) <= 1e-5


def check(d, ref, out):
    assert d.dtype == NP_DTYPE[out]
    err = H.output_error(np.asarray(d, np.float64), ref, int(out))
    assert err <= H.TOLERANCE[int(out)], err


def test_every_dtype_and_layout(client):
    """Every B dtype x layout registered, and sent inline; every A dtype x layout; every
    output dtype: against the FP64 reference."""
    rng = np.random.default_rng(7)
    weights = []
    for i, (bdt, bl) in enumerate((d, l) for d in DTYPES for l in B_LAYOUTS):
        arr, s, data, scales = random_operand(rng, N, K, bdt, bl)
        name = "w-%s-%d" % (client.transport, i)
        info = client.register_weight(name, arr, s)
        stored = (bdt, bl) if bdt.is_fp8 else (DType.FP8_E4M3, ScaleLayout.BLOCK_128X128)
        assert (info.name, info.n, info.k, info.dtype, info.scale_layout) == (name, N, K, *stored)
        weights.append((info, (arr, s, data, scales, bdt, bl)))
    i = 0
    for adt in DTYPES:
        for al in A_LAYOUTS:
            m = (1, 7, 33)[i % 3]
            out_arg, out = OUTS[i % len(OUTS)]
            arr, s, data, scales = random_operand(rng, m, K, adt, al)
            a = (arr, s, data, scales, adt, al)
            info, b = weights[i % len(weights)]
            ref = reference(a, b)
            check(client.gemm(arr, info.name, a_scales=s, out_dtype=out_arg), ref, out)   # by name
            check(client.gemm(arr, info, a_scales=s, a_layout=al, out_dtype=out_arg), ref, out)
            # B inline, sent with the request: the next weight's operand.
            _, b2 = weights[(i + 7) % len(weights)]
            check(client.gemm(arr, b2[0], a_scales=s, b_scales=b2[1], out_dtype=out_arg),
                  reference(a, b2), out)
            i += 1
    for info, _ in weights:
        client.unregister_weight(info.name if info.weight_id % 2 else info)
    assert not [w for w in client.weights()] if client.transport == "grpc" else True


def test_daemon_quantizes_as_the_package_does(client):
    """BF16/FP16/FP32 A quantized by gemmd (1x128) and by gemmd.quantize give the same D,
    bit for bit; so do a BF16 weight registered as it is and as gemmd.quantize(128x128)."""
    rng = np.random.default_rng(8)
    w = (rng.standard_normal((N, K)) * 3).astype(ml_dtypes.bfloat16)
    raw = client.register_weight("q-raw-" + client.transport, w)
    ours = client.register_weight("q-ours-" + client.transport, gemmd.quantize(w, "128x128"))
    assert (ours.dtype, ours.scale_layout, ours.bytes) == (raw.dtype, raw.scale_layout, raw.bytes)
    for dt in (ml_dtypes.bfloat16, np.float16, np.float32):
        a = (rng.standard_normal((9, K)) * 50).astype(dt)
        a[2, :128] = 0  # an all-zero block
        by_gemmd = client.gemm(a, raw, out_dtype="fp32")
        np.testing.assert_array_equal(by_gemmd, client.gemm(gemmd.quantize(a, "1x128"), raw, out_dtype="fp32"))
        np.testing.assert_array_equal(by_gemmd, client.gemm(a, ours, out_dtype="fp32"))
    client.unregister_weight(raw)
    client.unregister_weight(ours)


def test_tensor_and_row_quantization(client):
    """Per-tensor and per-row quantized A and B (which gemmd never makes itself) against
    the FP64 product of what they dequantize to."""
    rng = np.random.default_rng(9)
    a32 = rng.standard_normal((5, K)).astype(np.float32) * np.float32([[1], [10], [0.1], [100], [1]])
    b32 = rng.standard_normal((N, K)).astype(np.float32)
    for la, lb in (("tensor", "row"), ("row", "tensor"), ("row", "128x128"), ("1x128", "row")):
        qa, qb = gemmd.quantize(a32, la), gemmd.quantize(b32, lb)
        ref = gemmd.dequantize(qa).astype(np.float64) @ gemmd.dequantize(qb).astype(np.float64).T
        d = client.gemm(qa, qb, out_dtype="fp32")
        assert H.rel_error(d, ref) <= 1e-4
        assert H.rel_error(d, a32.astype(np.float64) @ b32.T.astype(np.float64)) < 0.1


def test_shapes_out_and_float64(client):
    rng = np.random.default_rng(10)
    w = rng.standard_normal((N, K))  # float64: sent as float32
    info = client.register_weight("shapes-" + client.transport, w)
    a = rng.standard_normal((2, 3, K)).astype(np.float32)
    d = client.gemm(a, info, out_dtype=np.float32)
    assert d.shape == (2, 3, N) and d.flags.writeable
    flat = client.gemm(a.reshape(6, K), info, out_dtype="fp32")
    np.testing.assert_array_equal(d.reshape(6, N), flat)
    one = client.gemm(a[0, 0], info, out_dtype="fp32")
    assert one.shape == (N,)
    np.testing.assert_array_equal(one, flat[0])
    out = np.empty((2, 3, N), np.float32)
    got, stats = client.gemm(a, info, out_dtype="fp32", out=out, return_stats=True)
    assert got is out
    np.testing.assert_array_equal(out, d)
    assert stats.total_ns >= stats.queue_ns and stats.batch_requests >= 1
    strided = np.asfortranarray(a[1])  # not C-contiguous: copied into the request once
    np.testing.assert_array_equal(client.gemm(strided, info, out_dtype="fp32"), flat[3:])
    client.unregister_weight(info)


def test_torch(client):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    w = rng.standard_normal((N, K)).astype(np.float32)
    info = client.register_weight("torch-" + client.transport, torch.from_numpy(w).to(torch.bfloat16))
    a = torch.randn(4, K)
    d = client.gemm(a.to(torch.bfloat16), info)
    assert isinstance(d, torch.Tensor) and d.dtype == torch.bfloat16 and tuple(d.shape) == (4, N)
    same = client.gemm(a.to(torch.bfloat16).numpy() if False else
                       a.to(torch.bfloat16).view(torch.int16).numpy().view(ml_dtypes.bfloat16), info)
    np.testing.assert_array_equal(d.view(torch.int16).numpy(), same.view(np.int16))
    d32 = client.gemm(a, info, out_dtype=torch.float32)
    assert d32.dtype == torch.float32
    assert H.rel_error(d32.numpy(), a.numpy().astype(np.float64) @ w.T.astype(np.float64)) < 0.1
    if hasattr(torch, "float8_e4m3fn"):
        q = gemmd.quantize(a, "1x128")
        d8 = client.gemm(q, info, out_dtype="fp32")
        assert isinstance(d8, torch.Tensor)
    client.unregister_weight(info)


def test_errors(client, daemon):
    """Every failure is a GemmdError with gemmd's status code and message."""
    rng = np.random.default_rng(12)
    w = rng.standard_normal((N, K)).astype(np.float32)
    name = "err-" + client.transport
    info = client.register_weight(name, w)
    a = np.ones((2, K), np.float32)
    cases = [
        (lambda: client.gemm(a, "no-such-weight"), StatusCode.NOT_FOUND, "no-such-weight"),
        (lambda: client.gemm_async(a, 987654321).result(), StatusCode.NOT_FOUND, ""),
        (lambda: client.register_weight(name, w), StatusCode.ALREADY_EXISTS, name),
        (lambda: client.gemm(np.ones((2, K + 1), np.float32), name), StatusCode.INVALID_ARGUMENT, "K"),
        (lambda: client.gemm(np.ones((4097, K), np.float32), name), StatusCode.RESOURCE_EXHAUSTED, "--max-m"),
        (lambda: client.gemm(a, info, a_scales=np.ones(3)), StatusCode.INVALID_ARGUMENT, "scales"),
        (lambda: client.register_weight("too-big-" + client.transport, np.zeros((4096, 4200), ml_dtypes.float8_e4m3fn)),
         StatusCode.RESOURCE_EXHAUSTED, ""),
        (lambda: client.unregister_weight("never-registered"), StatusCode.NOT_FOUND, ""),
        (lambda: client.weight("never-registered"), StatusCode.NOT_FOUND, ""),
    ]
    for fn, code, words in cases:
        with pytest.raises(gemmd.GemmdError) as e:
            fn()
        assert e.value.code == code, (code, e.value)
        assert words in e.value.message
        assert e.value.grpc_code.value[0] == int(code)
    # The client is still good after its failures.
    assert client.gemm(a, name).shape == (2, N)
    client.unregister_weight(name)


def test_weights_stats_health(client, daemon):
    info = client.register_weight("listed-" + client.transport, np.ones((N, K), np.float32))
    assert client.weight(info.name).weight_id == info.weight_id
    assert client.weight(info.weight_id).n == N
    assert client.health() == gemmd.HealthStatus.SERVING
    if client.transport == "grpc":
        assert info in client.weights()
        assert client.stats().backend == H.BACKEND
        assert client.health("gemmd.v1.GemmService") == gemmd.HealthStatus.SERVING
        with pytest.raises(gemmd.GemmdError) as e:
            client.health("no.such.Service")
        assert e.value.code == StatusCode.NOT_FOUND
    else:
        for call in (client.weights, client.stats):
            with pytest.raises(gemmd.GemmdError) as e:
                call()
            assert e.value.code == StatusCode.UNIMPLEMENTED and "control=" in e.value.message
        with gemmd.Client("unix://" + daemon.shm_socket, control=daemon.address) as c:
            assert info in c.weights() and c.stats().shm_clients >= 2
            assert c.weight(info.name) == info
            assert c.health() == gemmd.HealthStatus.SERVING
    client.unregister_weight(info)


def test_async_and_threads(client):
    """gemm_async from several threads at once: every future right (and batched)."""
    rng = np.random.default_rng(13)
    w = rng.standard_normal((N, K)).astype(np.float32)
    info = client.register_weight("async-" + client.transport, w)
    inputs = [rng.standard_normal((1 + i % 5, K)).astype(np.float32) for i in range(64)]
    expect = [client.gemm(x, info, out_dtype="fp32") for x in inputs]
    results = [None] * len(inputs)

    def worker(t):
        futs = [(i, client.gemm_async(inputs[i], info, out_dtype="fp32"))
                for i in range(t, len(inputs), 4)]
        for i, f in futs:
            results[i] = f.result(timeout=60)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(results, expect):
        same(got, want)
    fut = client.gemm_async(inputs[0], "no-such-weight")
    assert isinstance(fut.exception(timeout=60), gemmd.GemmdError)
    client.unregister_weight(info)


def test_sync_callers_take_each_others_answers(client):
    """8 threads of synchronous GEMMs beside asynchronous ones with done-callbacks, on one
    client (over shared memory the completion ring then has more than one reader): every
    answer right and every callback run once."""
    rng = np.random.default_rng(17)
    info = client.register_weight("sync-" + client.transport, rng.standard_normal((N, K)).astype(np.float32))
    inputs = [rng.standard_normal((1 + i % 3, K)).astype(np.float32) for i in range(16)]
    expect = [client.gemm(x, info, out_dtype="fp32") for x in inputs]
    errors, called = [], []

    def sync(t):
        try:
            for j in range(40):
                i = (t + j) % len(inputs)
                same(client.gemm(inputs[i], info, out_dtype="fp32"), expect[i])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def on_done(f, i=None):
        called.append(i)
        same(f.result(), expect[i])

    threads = [threading.Thread(target=sync, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    futs = []
    for i in range(len(inputs)):
        f = client.gemm_async(inputs[i], info, out_dtype="fp32")
        f.add_done_callback(lambda f, i=i: on_done(f, i))
        futs.append(f)
    for t in threads:
        t.join()
    for f in futs:
        f.result(timeout=60)
    assert not errors, errors[:3]
    deadline = time.monotonic() + 10
    while len(called) < len(inputs) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(called) == list(range(len(inputs)))
    client.unregister_weight(info)


def answers_taken_by_the_caller(monkeypatch):
    """A one-element list counting the completions handled on the main thread (the caller
    reading the ring itself) rather than on the completion thread."""
    from gemmd import _shm_transport as T

    mine, complete = [0], T.ShmTransport._complete

    def counting(self, c):
        mine[0] += threading.current_thread() is threading.main_thread()
        return complete(self, c)
    monkeypatch.setattr(T.ShmTransport, "_complete", counting)
    return mine


@pytest.mark.parametrize("spin_s", [0.05, 0.0])
def test_one_thread_worker_takes_its_own_answers(client, monkeypatch, spin_s):
    """Over shared memory, a worker sending one request at a time from one thread owns the
    completion ring while it waits (ShmTransport.gemm): it takes its answer there itself,
    spinning (a budget long enough for a loaded test machine) or, with no budget, asleep on
    the ring's doorbell, and the completion thread stands aside instead of taking the
    answer and handing it over (two thread wake-ups in Python). After 8 such calls, every
    answer is the caller's own; without the caller's own reads, none."""
    if client.transport != "shm":
        pytest.skip("shared memory only")
    from gemmd import _shm_transport as T

    monkeypatch.setattr(T, "SPIN_S", spin_s)
    info = client.register_weight("own-answers-%g" % spin_s, np.ones((16, 16), np.float32))
    mine = answers_taken_by_the_caller(monkeypatch)
    for _ in range(100):
        # ones quantize to one FP8 code; the scales' product comes within FP32 rounding of 1
        assert client.gemm(np.ones((1, 16), np.float32), info, out_dtype="fp32")[0, 0] == pytest.approx(16, rel=1e-5)
    assert mine[0] >= 85, mine[0]
    client.unregister_weight(info)


def test_worker_spins_again_after_slow_answers(client, monkeypatch):
    """A one-thread worker whose answers were slow stops spinning; once answers come fast
    again it spins again, however long the completion thread's hand-off takes: the average
    it decides by is of the answers' arrival, not of the hand-off (which in Python can take
    longer than the spin budget, and kept such a worker from ever spinning again)."""
    if client.transport != "shm":
        pytest.skip("shared memory only")
    from gemmd import _shm_transport as T

    monkeypatch.setattr(T, "SPIN_S", 0.05)
    wait = T.wait

    def slow_hand_off(fut, timeout):  # a hand-off longer than the budget
        handed = not fut.done()
        value = wait(fut, timeout)
        if handed:
            time.sleep(0.08)
        return value
    monkeypatch.setattr(T, "wait", slow_hand_off)
    info = client.register_weight("spins-again", np.ones((16, 16), np.float32))
    mine = answers_taken_by_the_caller(monkeypatch)
    client._t._answer_s = 1.0  # as after a phase of slow answers
    for _ in range(60):
        client.gemm(np.ones((1, 16), np.float32), info, out_dtype="fp32")
    # The average falls below the budget after ~25 answers; spinning from then on. Judged
    # by the hand-off instead, it stays above and the worker never spins: 0.
    assert mine[0] >= 5, mine[0]
    client.unregister_weight(info)


def test_worker_does_not_spin_while_gemmd_says_crowded(monkeypatch):
    """A one-thread worker spins for its answers only while gemmd's header does not say
    crowded (more clients busy than --shm-spinning-clients): with a second client busy past
    a bound of 1 it sleeps on the ring at once, reading it a few times a call instead of
    the many times a spin does."""
    from gemmd import _shm_transport as T
    from gemmd import shm

    monkeypatch.setattr(T, "SPIN_S", 0.05)
    reads, pop = [0], shm.Connection.pop_completions

    def counting(self):
        reads[0] += threading.current_thread() is threading.main_thread()
        return pop(self)
    monkeypatch.setattr(shm.Connection, "pop_completions", counting)
    with H.Gemmd("--shm-spinning-clients", "1") as d:
        with gemmd.Client("unix://" + d.shm_socket, timeout=60) as c:
            info = c.register_weight("crowded", np.ones((16, 16), np.float32))
            x = np.ones((1, 16), np.float32)

            def reads_per_call():
                for _ in range(20):  # past the 8 calls after which the caller owns the ring
                    c.gemm(x, info, out_dtype="fp32")
                reads[0] = 0
                for _ in range(50):
                    c.gemm(x, info, out_dtype="fp32")
                return reads[0] / 50
            assert not c._t.conn.crowded()
            alone = reads_per_call()
            with gemmd.Client("unix://" + d.shm_socket, timeout=60) as other:
                assert not c._t.conn.crowded()  # connected but idle: it does not count
                info2 = other.register_weight("crowded-2", np.ones((16, 16), np.float32))
                stop = threading.Event()

                def keep_busy():  # a call every ~0.5 ms: busy
                    while not stop.is_set():
                        other.gemm(x, info2, out_dtype="fp32")
                        time.sleep(0.0005)
                t = threading.Thread(target=keep_busy)
                t.start()
                try:
                    crowded = reads_per_call()
                    assert c._t.conn.crowded()
                finally:
                    stop.set()
                    t.join()
    assert crowded <= 4 and alone >= 2 * crowded, (alone, crowded)


def test_asyncio(daemon):
    async def main(target):
        async with gemmd.aio.Client(target) as c:
            w = np.random.default_rng(14).standard_normal((N, K)).astype(np.float32)
            info = await c.register_weight("aio-" + target[:4], w)
            xs = [np.full((2, K), i, np.float32) for i in range(16)]
            ds = await asyncio.gather(*(c.gemm(x, info, out_dtype="fp32") for x in xs))
            for x, d in zip(xs, ds):
                same(d, c.sync.gemm(x, info, out_dtype="fp32"))
            assert await c.health() == gemmd.HealthStatus.SERVING
            async with c.stream() as s:
                futs = [s.submit(x, info.name) for x in xs]
                assert len(await asyncio.gather(*futs)) == 16
            with pytest.raises(gemmd.GemmdError) as e:
                await c.gemm(xs[0], "missing")
            assert e.value.code == StatusCode.NOT_FOUND
            await c.unregister_weight(info)

    asyncio.run(main(daemon.address))
    asyncio.run(main("unix://" + daemon.shm_socket))


def test_stream(client):
    """Many GEMMs in flight on one stream; a failed one fails alone."""
    rng = np.random.default_rng(15)
    info = client.register_weight("stream-" + client.transport, rng.standard_normal((N, K)).astype(np.float32))
    xs = [rng.standard_normal((1 + i % 3, K)).astype(np.float32) for i in range(100)]
    with client.stream(window=16) as s:
        futs = [s.submit(x, info if i != 50 else "missing", out_dtype="fp32") for i, x in enumerate(xs)]
        for i, (x, f) in enumerate(zip(xs, futs)):
            if i == 50:
                assert f.exception(timeout=60).code == StatusCode.NOT_FOUND
            else:
                same(f.result(timeout=60), client.gemm(x, info, out_dtype="fp32"))
    client.unregister_weight(info)


def test_allocations_are_owned_by_requests(daemon):
    """Over shared memory, weights registered while GEMMs are in flight disturb none of
    them, and every arena block comes back when the requests are done."""
    rng = np.random.default_rng(16)
    with gemmd.Client("unix://" + daemon.shm_socket, arena_bytes=4 << 20) as c:
        t = c._t
        free = t.heap.free_bytes
        base = c.register_weight("own-base", rng.standard_normal((N, K)).astype(np.float32))
        xs = [rng.standard_normal((64, K)).astype(np.float32) for _ in range(40)]
        expect = [c.gemm(x, base, out_dtype="fp32") for x in xs]
        futs, infos = [], []
        for i, x in enumerate(xs):
            futs.append(c.gemm_async(x, base, out_dtype="fp32"))
            if i % 8 == 0:  # needs arena blocks of its own while the GEMMs hold theirs
                infos.append(c.register_weight("own-%d" % i, rng.standard_normal((N, K)).astype(np.float32)))
        for f, want in zip(futs, expect):
            same(f.result(timeout=60), want)
        for info in infos + [base]:
            c.unregister_weight(info)
        assert t.heap.allocations == 0 and t.heap.free_bytes == free
