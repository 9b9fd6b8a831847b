"""The gRPC transport: gemm.proto's GemmService and the standard health service."""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable, Optional, Union

import grpc
import numpy as np

from . import rpc
from ._arrays import NP_DTYPE, Operand
from ._types import DType, HealthStatus, RequestStats, ScaleLayout, WeightInfo
from .errors import GemmdError, StatusCode, wait
from .v1 import gemm_pb2 as pb

CHUNK_BYTES = 4 << 20  # RegisterWeight: data per stream message

WeightRef = Union[str, int, WeightInfo]


class _BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                   grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds ``authorization: Bearer <token>`` to every call (gemmd's --grpc-token-file), on
    plaintext channels too, where grpcio's call credentials are not allowed."""

    def __init__(self, token: str):
        self.header = ("authorization", "Bearer " + token)

    def _details(self, d: Any) -> Any:
        md = list(d.metadata or []) + [self.header]
        return d._replace(metadata=md) if hasattr(d, "_replace") else _Details(d, md)

    def intercept_unary_unary(self, cont, details, request):
        return cont(self._details(details), request)

    def intercept_unary_stream(self, cont, details, request):
        return cont(self._details(details), request)

    def intercept_stream_unary(self, cont, details, requests):
        return cont(self._details(details), requests)

    def intercept_stream_stream(self, cont, details, requests):
        return cont(self._details(details), requests)


class _Details(grpc.ClientCallDetails):
    def __init__(self, d: Any, metadata: Any):
        self.method, self.timeout, self.credentials = d.method, d.timeout, d.credentials
        self.wait_for_ready = getattr(d, "wait_for_ready", None)
        self.compression = getattr(d, "compression", None)
        self.metadata = metadata


def matrix(op: Operand, with_data: bool = True) -> Any:
    """The gemm.proto Matrix of an operand."""
    return pb.Matrix(rows=op.rows, cols=op.cols, dtype=pb.DType.Name(op.dtype),
                     scale_layout=pb.ScaleLayout.Name(op.layout),
                     scales=op.scales.tolist(),
                     data=np.ascontiguousarray(op.data).tobytes() if with_data else b"")


def weight_info(w: Any) -> WeightInfo:
    return WeightInfo(w.weight_id, w.name, w.n, w.k, DType(w.dtype), ScaleLayout(w.scale_layout), w.bytes,
                      w.source)


def request_stats(s: Any) -> RequestStats:
    return RequestStats(s.queue_ns, s.compute_ns, s.total_ns, s.batch_requests, s.batch_groups, s.batch_id)


def result_array(d: Any, out: Optional[np.ndarray]) -> np.ndarray:
    """D of a response as a new array (or written into out, rows x cols)."""
    dt = NP_DTYPE.get(DType(d.dtype) if d.dtype else DType.BF16)
    if dt is None or len(d.data) != d.rows * d.cols * dt.itemsize:
        raise GemmdError(StatusCode.INTERNAL, "gemmd answered a malformed D (%dx%d, dtype %d, %d bytes)"
                         % (d.rows, d.cols, d.dtype, len(d.data)))
    view = np.frombuffer(d.data, dtype=dt).reshape(d.rows, d.cols)
    if out is None:
        return view.copy()
    if out.shape[1] != d.cols:
        raise GemmdError(StatusCode.INVALID_ARGUMENT, "out has %d columns; D has %d" % (out.shape[1], d.cols))
    np.copyto(out, view)
    return out


def gemm_request(a: Operand, rhs: Union[WeightRef, Operand], out_dtype: DType, request_id: int = 0) -> Any:
    req = pb.GemmRequest(request_id=request_id, a=matrix(a), out_dtype=pb.DType.Name(out_dtype))
    if isinstance(rhs, Operand):
        req.b.CopyFrom(matrix(rhs))
    elif isinstance(rhs, WeightInfo):
        req.weight_id = rhs.weight_id
    elif isinstance(rhs, str):
        req.weight_name = rhs
    else:
        req.weight_id = int(rhs)
    return req


def _settle(fut: Future, fn: Callable[[], Any]) -> None:
    try:
        fut.set_result(fn())
    except GemmdError as e:
        fut.set_exception(e)
    except grpc.RpcError as e:
        fut.set_exception(GemmdError.from_rpc_error(e))
    except Exception as e:  # noqa: BLE001 - handed to the caller through the future
        fut.set_exception(e)


class GrpcTransport:
    """GemmService over one grpc.Channel (thread-safe, as grpcio's channels are)."""

    name = "grpc"

    def __init__(self, target: str, credentials: Any = None, options: Any = (),
                 token: Optional[str] = None):
        opts = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
        opts += list(options)
        self.channel = (grpc.secure_channel(target, credentials, opts) if credentials is not None
                        else grpc.insecure_channel(target, opts))
        if token:
            self.channel = grpc.intercept_channel(self.channel, _BearerToken(token))
        self.stub = rpc.GemmServiceStub(self.channel)
        self.health_stub = rpc.HealthStub(self.channel)

    @staticmethod
    def _call(fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except grpc.RpcError as e:
            raise GemmdError.from_rpc_error(e) from None

    def register_weight(self, name: str, op: Operand, timeout: Optional[float]) -> WeightInfo:
        raw = np.ascontiguousarray(op.data).reshape(-1).view(np.uint8).data

        def messages():
            first = pb.RegisterWeightRequest(name=name, weight=matrix(op, with_data=False))
            first.weight.data = bytes(raw[:CHUNK_BYTES])
            yield first
            for off in range(CHUNK_BYTES, len(raw), CHUNK_BYTES):
                yield pb.RegisterWeightRequest(weight=pb.Matrix(data=bytes(raw[off:off + CHUNK_BYTES])))

        return weight_info(self._call(lambda: self.stub.RegisterWeight(messages(), timeout=timeout)))

    def unregister_weight(self, ref: WeightRef, timeout: Optional[float]) -> None:
        req = (pb.UnregisterWeightRequest(name=ref) if isinstance(ref, str) else
               pb.UnregisterWeightRequest(weight_id=ref.weight_id if isinstance(ref, WeightInfo) else int(ref)))
        self._call(lambda: self.stub.UnregisterWeight(req, timeout=timeout))

    def weights(self, timeout: Optional[float]) -> list[WeightInfo]:
        resp = self._call(lambda: self.stub.ListWeights(pb.ListWeightsRequest(), timeout=timeout))
        return [weight_info(w) for w in resp.weights]

    def weight(self, ref: WeightRef, timeout: Optional[float]) -> WeightInfo:
        key = ref.weight_id if isinstance(ref, WeightInfo) else ref
        for w in self.weights(timeout):
            if (w.name if isinstance(key, str) else w.weight_id) == key:
                return w
        raise GemmdError(StatusCode.NOT_FOUND, "no weight %r is registered" % (key,))

    def gemm(self, a: Operand, rhs: Union[WeightRef, Operand], out_dtype: DType,
             timeout: Optional[float], out: Optional[np.ndarray]) -> Any:
        """A GEMM waited for at once: (D, RequestStats)."""
        return wait(self.gemm_async(a, rhs, out_dtype, timeout, out), timeout)

    def gemm_async(self, a: Operand, rhs: Union[WeightRef, Operand], out_dtype: DType,
                   timeout: Optional[float], out: Optional[np.ndarray]) -> Future:
        fut: Future = Future()
        fut.set_running_or_notify_cancel()
        call = self.stub.Gemm.future(gemm_request(a, rhs, out_dtype), timeout=timeout)

        def done(c: Any) -> None:
            def value():
                resp = c.result()
                return result_array(resp.d, out), request_stats(resp.stats)
            _settle(fut, value)

        call.add_done_callback(done)
        return fut

    def stream(self, window: int) -> "GrpcStream":
        return GrpcStream(self.stub, window)

    def stats(self, timeout: Optional[float]) -> Any:
        return self._call(lambda: self.stub.GetStats(pb.GetStatsRequest(), timeout=timeout))

    def health(self, service: str, timeout: Optional[float]) -> HealthStatus:
        resp = self._call(lambda: self.health_stub.Check(rpc.HealthCheckRequest(service=service),
                                                         timeout=timeout))
        return HealthStatus(resp.status)

    def close(self) -> None:
        self.channel.close()


class GrpcStream:
    """One GemmStream call: requests go out as they are submitted, answers resolve their
    futures by request id, in whatever order they come. At most `window` unanswered."""

    def __init__(self, stub: Any, window: int):
        self._queue: "queue.Queue[Any]" = queue.Queue()
        self._room = threading.Semaphore(window)
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[Future, Optional[np.ndarray]]] = {}
        self._next_id = 1
        self._error: Optional[GemmdError] = None
        self._ended = False  # the call is over
        self._closed = False
        self._call = stub.GemmStream(self._requests())
        self._reader = threading.Thread(target=self._read, name="gemmd-stream", daemon=True)
        self._reader.start()

    def _requests(self):
        while True:
            req = self._queue.get()
            if req is None:
                return
            yield req

    def submit(self, a: Operand, rhs: Union[WeightRef, Operand], out_dtype: DType,
               timeout: Optional[float], out: Optional[np.ndarray]) -> Future:
        fut: Future = Future()
        fut.set_running_or_notify_cancel()
        self._room.acquire()
        with self._lock:
            if self._ended or self._closed:
                self._room.release()
                raise self._error or GemmdError(StatusCode.FAILED_PRECONDITION, "the stream is closed")
            rid = self._next_id
            self._next_id += 1
            self._pending[rid] = (fut, out)
        self._queue.put(gemm_request(a, rhs, out_dtype, rid))
        return fut

    def _read(self) -> None:
        err = None
        try:
            for resp in self._call:
                with self._lock:
                    fut, out = self._pending.pop(resp.request_id, (None, None))
                if fut is None:
                    continue
                self._room.release()
                if resp.error_code:
                    fut.set_exception(GemmdError(resp.error_code, resp.error_message))
                else:
                    _settle(fut, lambda: (result_array(resp.d, out), request_stats(resp.stats)))
        except grpc.RpcError as e:
            err = GemmdError.from_rpc_error(e)
        with self._lock:
            pending, self._pending = self._pending, {}
            if err is None and pending:
                err = GemmdError(StatusCode.UNAVAILABLE, "the stream ended with requests unanswered")
            self._error = err
            self._ended = True
        for fut, _out in pending.values():
            fut.set_exception(err)
            self._room.release()

    def close(self) -> None:
        """Ends the request stream and waits for every answer."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._queue.put(None)
        self._reader.join()

    def cancel(self) -> None:
        """Ends the call at once: unanswered requests fail with CANCELLED."""
        self._call.cancel()
        self.close()
