"""gemmd.Client: one API over gRPC ("host:port") and shared memory ("unix:///path")."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Optional, Union

import numpy as np

from ._arrays import (NP_DTYPE, device_operand, is_cuda, like, operand, out_dtype as _out_dtype,
                      to_numpy, to_torch, torch_dtype)
from ._balanced import BalancedTransport, endpoints
from ._grpc import GrpcTransport
from ._shm_transport import ShmTransport
from ._types import HealthStatus, Quantized, RequestStats, WeightInfo
from ._regions import SharedBuffer
from .errors import GemmdError, StatusCode, invalid, wait

#: A registered weight: its name, its id, or the WeightInfo that register_weight returned.
WeightRef = Union[str, int, WeightInfo]

__all__ = ["Client", "GemmStream", "WeightRef"]


def _chain(inner: Future, fn: Any) -> Future:
    """A future of fn(inner's result)."""
    outer: Future = Future()
    outer.set_running_or_notify_cancel()

    def done(f: Future) -> None:
        exc = f.exception()
        if exc is not None:
            outer.set_exception(exc)
            return
        try:
            outer.set_result(fn(f.result()))
        except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
            outer.set_exception(e)

    inner.add_done_callback(done)
    return outer


class _Prepared:
    """A GEMM's arguments checked and converted once, for any transport."""

    __slots__ = ("a", "rhs", "out_dtype", "torch_like", "out_user", "out2d", "return_stats", "device")

    def __init__(self, a: Any, weight: Any, out_dtype: Any, a_scales: Any, a_layout: Any,
                 b_scales: Any, b_layout: Any, out: Any, return_stats: bool, in_place: bool):
        # A on a GPU (a tensor, or a Quantized of one): read there by gemmd over shared
        # memory (in_place), else brought to the host; either way D comes back on A's device.
        data = a.data if isinstance(a, Quantized) else a
        self.device = data.device if is_cuda(data) else None
        self.out_dtype = _out_dtype(out_dtype)
        if self.device is not None and in_place:
            self.a, self.torch_like = device_operand(a, a_scales, a_layout), True
        else:
            self.a, self.torch_like = operand(a, a_scales, a_layout, "a")
        if isinstance(weight, (str, int, WeightInfo)) and not isinstance(weight, bool):
            if b_scales is not None or b_layout is not None:
                raise invalid("b_scales and b_layout are for an inline B; weight %r is registered" % (weight,))
            self.rhs: Any = weight
            if isinstance(weight, WeightInfo) and weight.k != self.a.cols:
                raise invalid("a has K = %d; weight %r is %d x %d" % (self.a.cols, weight.name, weight.n, weight.k))
        else:
            self.rhs, _ = operand(weight, b_scales, b_layout, "b")
            if self.rhs.cols != self.a.cols:
                raise invalid("a has K = %d; b has K = %d" % (self.a.cols, self.rhs.cols))
        self.out_user, self.out2d = out, None
        if out is not None and self.a.device is not None:
            if (not is_cuda(out) or out.device != self.a.device or out.dtype != torch_dtype(self.out_dtype)
                    or not out.is_contiguous()):
                raise invalid("out must be a contiguous %s tensor on %s, as A is"
                              % (torch_dtype(self.out_dtype), self.a.device))
            if tuple(out.shape[:-1]) != self.a.lead:
                raise invalid("out has shape %s; D is %s" % (tuple(out.shape), self.a.lead + ("N",)))
            self.out2d = out.view(self.a.rows, -1)
        elif out is not None and is_cuda(out):
            if tuple(out.shape[:-1]) != self.a.lead or out.dtype != torch_dtype(self.out_dtype):
                raise invalid("out has shape %s and dtype %s; D is %s of %s" % (
                    tuple(out.shape), out.dtype, self.a.lead + ("N",), torch_dtype(self.out_dtype)))
        elif out is not None:
            o = to_numpy(out)
            if o.dtype != NP_DTYPE[self.out_dtype] or not o.flags.c_contiguous or not o.flags.writeable:
                raise invalid("out must be a writable C-contiguous array of %s (the out_dtype)"
                              % NP_DTYPE[self.out_dtype])
            if o.shape[:-1] != self.a.lead:
                raise invalid("out has shape %s; D is %s" % (o.shape, self.a.lead + ("N",)))
            self.out2d = o.reshape(self.a.rows, -1) if o.ndim else o
        self.return_stats = return_stats

    def result(self, value: tuple[np.ndarray, RequestStats]) -> Any:
        d, stats = value
        if self.out_user is not None:
            if self.out2d is None:  # a GPU out filled from the host's D
                self.out_user.copy_(to_torch(d).reshape(self.out_user.shape))
            d = self.out_user
        elif self.a.device is not None:  # D is already a tensor on A's GPU
            d = d.reshape(self.a.lead + (d.shape[1],))
        else:
            d = like(d.reshape(self.a.lead + (d.shape[1],)), self.torch_like)
            if self.device is not None:
                d = d.to(self.device)
        return (d, stats) if self.return_stats else d


class Client:
    """A client of gemmd, over gRPC or over shared memory, with one API.

    Args:
        target: ``"host:port"`` (or any grpcio target: ``"dns:///..."``, ``"ipv4:..."``) for
            gRPC; ``"host1:port1,host2:port2"`` for several gemmd (one per GPU or host):
            GEMMs go to each in turn and on to the next when one answers UNAVAILABLE,
            weights are registered on all of them (docs/api.md §5);
            ``"unix:///run/gemmd/gemmd.sock"`` for the shared-memory transport (gemmd on
            this host; the peer's uid must be allowed).
        control: shared memory only: gemmd's gRPC address, for weights(), stats() and
            health(), which the shared-memory protocol does not carry.
        timeout: default deadline in seconds for every call (None: none).
        arena_bytes: shared memory only: the arena to ask for (0: gemmd's default,
            --shm-arena-bytes). Every request's A, scales and D must fit in it.
        ring_entries: shared memory only: ring slots (a power of two; 0: gemmd's default).
        credentials: gRPC only: ``grpc.ssl_channel_credentials(...)`` for TLS/mTLS.
        token: gRPC: a bearer token, sent as ``authorization: Bearer <token>`` on every call
            (gemmd's --grpc-token-file); also for the control channel over shared memory.
        options: gRPC only: extra channel options.

    Thread-safe: one Client serves any number of threads. Over shared memory it holds one
    session (one arena); close() it, or use it as a context manager.
    """

    def __init__(self, target: str, *, control: Optional[str] = None, timeout: Optional[float] = None,
                 arena_bytes: int = 0, ring_entries: int = 0, credentials: Any = None,
                 options: Any = (), token: Optional[str] = None):
        self.target = target
        self.timeout = timeout
        path = None
        if target.startswith("unix://"):
            path = target[len("unix://"):]
        elif target.startswith("unix:"):
            path = target[len("unix:"):]
        if path is not None:
            ctl = GrpcTransport(control, credentials, options, token) if control else None
            self._t: Any = ShmTransport(path, arena_bytes, ring_entries, ctl)
        else:
            targets = endpoints(target)
            self._t = (GrpcTransport(target, credentials, options, token) if len(targets) == 1
                       else BalancedTransport(targets, credentials, options, token))

    @property
    def transport(self) -> str:
        """"grpc" or "shm"."""
        return self._t.name

    def _timeout(self, timeout: Optional[float]) -> Optional[float]:
        return self.timeout if timeout is None else timeout

    # ---- weights -------------------------------------------------------------------------
    def register_weight(self, name: str, array: Any, scales: Any = None, layout: Any = None, *,
                        timeout: Optional[float] = None) -> WeightInfo:
        """Registers B (N x K) under name; GEMMs then name it instead of sending it.

        Args:
            array: numpy (ml_dtypes float8_e4m3fn / float8_e5m2, bfloat16, float16,
                float32; float64 is sent as float32) or a CPU torch tensor, N x K; or a
                :class:`Quantized`. BF16/FP16/FP32 weights are quantized by gemmd to E4M3
                with 128x128 scales.
            scales: multipliers (real value = stored x scale): a scalar (per tensor), (N,)
                (per row), or (ceil(N/128), ceil(K/128)) (128x128 blocks).
            layout: the scale layout ("tensor", "row", "128x128", a ScaleLayout), when the
                scales' shape does not say it.

        Returns the weight as gemmd stores it. Raises GemmdError: ALREADY_EXISTS for a
        name in use, INVALID_ARGUMENT, RESOURCE_EXHAUSTED past the weight memory budget.
        """
        op, _ = operand(array, scales, layout, "b")
        return self._t.register_weight(name, op, self._timeout(timeout))

    def unregister_weight(self, weight: WeightRef, *, timeout: Optional[float] = None) -> None:
        """Removes a weight (by name, id or WeightInfo) once requests using it are done."""
        self._t.unregister_weight(weight, self._timeout(timeout))

    def weight(self, weight: WeightRef, *, timeout: Optional[float] = None) -> WeightInfo:
        """One registered weight; NOT_FOUND if there is none. Over shared memory without
        ``control``, only its id, N and K are known (dtype UNSPECIFIED, bytes 0)."""
        return self._t.weight(weight, self._timeout(timeout))

    def weights(self, *, timeout: Optional[float] = None) -> list[WeightInfo]:
        """Every registered weight (ListWeights). Over shared memory this needs ``control``."""
        return self._t.weights(self._timeout(timeout))

    # ---- GEMMs ---------------------------------------------------------------------------
    def gemm(self, a: Any, weight: Any, *, out_dtype: Any = None, a_scales: Any = None,
             a_layout: Any = None, b_scales: Any = None, b_layout: Any = None, out: Any = None,
             timeout: Optional[float] = None, return_stats: bool = False) -> Any:
        """D = A · Bᵀ, computed by gemmd (docs/api.md §1).

        Args:
            a: A, shaped (..., K): numpy (float8_e4m3fn, float8_e5m2, bfloat16, float16,
                float32; float64 is sent as float32), a torch tensor, or a
                :class:`Quantized`. BF16/FP16/FP32 A is quantized by gemmd (E4M3, 1x128).
                A CUDA tensor over shared memory is read by gemmd where it lies, with no
                copy through the host: FP8 with 1x128 a_scales on the GPU, or BF16/FP16/FP32
                without scales; D is then a new tensor on that GPU (or ``out``). Over gRPC
                it is copied to the host and D copied back to its device.
            weight: a registered weight (name, id or WeightInfo), or B itself (N x K,
                array or Quantized), sent with the request.
            out_dtype: "bf16" (default), "fp16", "fp32", or the numpy/torch dtype.
            a_scales, a_layout: A's multipliers: a scalar (per tensor), shaped like A's
                rows (per row), or (rows, ceil(K/128)) (1x128 blocks).
            b_scales, b_layout: an inline B's, as in register_weight.
            out: an array (..., N) of out_dtype to write D into, returned. Over shared
                memory, an array of a :meth:`shared_buffer` is written by gemmd in place.
            timeout: seconds; gemmd answers DEADLINE_EXCEEDED, spending no GPU work, when
                the deadline passes before the request's batch runs.
            return_stats: return (D, RequestStats) instead of D.

        Returns D shaped (..., N), numpy or torch as A was, a new array (see README: over
        shared memory D is copied out of the arena, whose block is then reused).
        """
        p = _Prepared(a, weight, out_dtype, a_scales, a_layout, b_scales, b_layout, out, return_stats,
                      self._t.name == "shm")
        return p.result(self._t.gemm(p.a, p.rhs, p.out_dtype, self._timeout(timeout), p.out2d))

    def gemm_async(self, a: Any, weight: Any, *, out_dtype: Any = None, a_scales: Any = None,
                   a_layout: Any = None, b_scales: Any = None, b_layout: Any = None,
                   out: Any = None, timeout: Optional[float] = None,
                   return_stats: bool = False) -> Future:
        """gemm() without waiting: a concurrent.futures.Future of its result (whose
        exception, on failure, is a GemmdError). Requests in flight together are batched
        by gemmd. Argument errors are raised here, at once.

        Done-callbacks run on the client's completion thread (grpcio's, or the
        shared-memory session's, or over shared memory a thread of yours waiting in
        gemm(), which takes answers itself while it waits alone): they must not wait for
        another of this client's results there."""
        p = _Prepared(a, weight, out_dtype, a_scales, a_layout, b_scales, b_layout, out, return_stats,
                      self._t.name == "shm")
        return _chain(self._t.gemm_async(p.a, p.rhs, p.out_dtype, self._timeout(timeout), p.out2d), p.result)

    def stream(self, *, window: int = 256) -> "GemmStream":
        """A GemmStream: many GEMMs in flight on one connection (over gRPC, one
        bidirectional GemmStream call; at most window unanswered)."""
        return GemmStream(self._t.stream(window), self._t.name == "shm")

    def shared_buffer(self, nbytes: int) -> SharedBuffer:
        """Shared memory only: nbytes of memory that this process and gemmd both map (a
        region, docs/shm-protocol.md §7). Arrays made by its ``array(shape, dtype)``,
        given to gemm() as A, a_scales or out, are read or written by gemmd where they
        lie, with no copy through the arena. The CPU backend takes such buffers; the
        CUDA backend answers UNIMPLEMENTED (there, give A as a CUDA tensor). Close it
        when done, or use it as a context manager."""
        if self._t.name != "shm":
            raise GemmdError(StatusCode.FAILED_PRECONDITION,
                             "shared buffers need the shared-memory transport (unix://...)")
        return self._t.shared_buffer(nbytes)

    # ---- the server ----------------------------------------------------------------------
    def stats(self, *, timeout: Optional[float] = None) -> Any:
        """gemmd's ServerStats message (gemmd.v1.gemm_pb2.ServerStats). Over shared memory
        this needs ``control``."""
        return self._t.stats(self._timeout(timeout))

    def health(self, service: str = "", *, timeout: Optional[float] = None) -> HealthStatus:
        """grpc.health.v1 Check of service ("" or "gemmd.v1.GemmService"). Over shared
        memory without ``control``: SERVING when gemmd answers a request through the rings,
        NOT_SERVING when it answers UNAVAILABLE (draining)."""
        return self._t.health(service, self._timeout(timeout))

    def close(self) -> None:
        """Waits for requests in flight, then closes the connection."""
        self._t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "gemmd.Client(%r, transport=%s)" % (self.target, self.transport)


class GemmStream:
    """Many GEMMs in flight on one connection; results come as futures, in any order.

    Over gRPC this is one GemmStream call: a failed request fails its own future and
    never ends the stream. Over shared memory the rings already pipeline requests, and a
    stream is the client's own gemm_async. Use as a context manager, or close()::

        with client.stream() as s:
            futures = [s.submit(x, "layer0") for x in batches]
            results = [f.result() for f in futures]
    """

    def __init__(self, impl: Any, in_place: bool):
        self._impl, self._in_place = impl, in_place

    def submit(self, a: Any, weight: Any, *, out_dtype: Any = None, a_scales: Any = None,
               a_layout: Any = None, b_scales: Any = None, b_layout: Any = None, out: Any = None,
               return_stats: bool = False) -> Future:
        """Sends one GEMM (arguments as Client.gemm); a Future of its result."""
        p = _Prepared(a, weight, out_dtype, a_scales, a_layout, b_scales, b_layout, out, return_stats,
                      self._in_place)
        return _chain(self._impl.submit(p.a, p.rhs, p.out_dtype, None, p.out2d), p.result)

    def close(self) -> None:
        """Ends the stream after every submitted request is answered."""
        self._impl.close()

    def cancel(self) -> None:
        """Ends the stream now; unanswered requests fail (CANCELLED over gRPC)."""
        self._impl.cancel()

    def __enter__(self) -> "GemmStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

