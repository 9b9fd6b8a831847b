"""Several gemmd behind one Client ("host1:port1,host2:port2"), as libgemmclient does it
(docs/api.md §5): GEMMs go to the endpoints in turn and move on to the next one when an
endpoint answers UNAVAILABLE (down, or draining); a weight is registered on every endpoint,
all or none, and since each gemmd numbers its weights itself, the id a GEMM names is sent
to each endpoint as that endpoint knows it; a stream stays on the endpoint it opened on;
list, stats and health go to the first endpoint that answers."""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import Future
from typing import Any, Callable, Optional, Union

import numpy as np

from ._grpc import GrpcTransport
from ._arrays import Operand
from ._types import DType, HealthStatus, WeightInfo
from .errors import GemmdError, StatusCode, wait

WeightRef = Union[str, int, WeightInfo]

#: gRPC's own address lists ("ipv4:a,b") stay one target: gRPC picks among them.
_GRPC_LISTS = ("ipv4:", "ipv6:")
MAX_ENDPOINTS = 16


def endpoints(target: str) -> list[str]:
    """The endpoints of a target: one, or several separated by commas."""
    if target.startswith(_GRPC_LISTS) or "," not in target:
        return [target]
    parts = target.split(",")
    if any(not p for p in parts) or len(parts) > MAX_ENDPOINTS:
        raise GemmdError(StatusCode.INVALID_ARGUMENT, "address %r: want up to %d comma-separated HOST:PORT"
                         % (target, MAX_ENDPOINTS))
    if any(p.startswith("unix:") for p in parts):
        raise GemmdError(StatusCode.INVALID_ARGUMENT, "address %r: shared memory cannot be balanced" % target)
    return parts


class BalancedTransport:
    name = "grpc"

    def __init__(self, targets: list[str], credentials: Any, options: Any, token: Optional[str]):
        self.targets = targets
        self.ts = [GrpcTransport(t, credentials, options, token) for t in targets]
        self._turn = itertools.count()
        self._lock = threading.Lock()
        self._ids: dict[int, list[int]] = {}  # the caller's id (endpoint 0's) -> each endpoint's

    def _pick(self) -> int:
        with self._lock:
            return next(self._turn) % len(self.ts)

    def _id_at(self, weight_id: int, ep: int) -> int:
        with self._lock:
            ids = self._ids.get(weight_id)
        return ids[ep] if ids else weight_id

    def _at(self, ref: Any, ep: int) -> Any:
        """ref (a weight reference or an inline Operand) as endpoint ep knows it."""
        if isinstance(ref, WeightInfo):
            return self._id_at(ref.weight_id, ep)
        if isinstance(ref, int) and not isinstance(ref, bool):
            return self._id_at(ref, ep)
        return ref

    def _first_answer(self, fn: Callable[[GrpcTransport], Any]) -> Any:
        err: Optional[GemmdError] = None
        for t in self.ts:
            try:
                return fn(t)
            except GemmdError as e:
                if e.code != StatusCode.UNAVAILABLE:
                    raise
                err = e
        assert err is not None
        raise err

    # ---- weights -----------------------------------------------------------------------------
    def register_weight(self, name: str, op: Operand, timeout: Optional[float]) -> WeightInfo:
        infos: list[WeightInfo] = []
        for target, t in zip(self.targets, self.ts):
            try:
                infos.append(t.register_weight(name, op, timeout))
            except GemmdError as e:
                for done, info in zip(self.ts, infos):
                    try:
                        done.unregister_weight(info.weight_id, timeout)
                    except GemmdError:
                        pass
                raise GemmdError(e.code, "%s: %s" % (target, e.message)) from None
        with self._lock:
            self._ids[infos[0].weight_id] = [i.weight_id for i in infos]
        return infos[0]

    def unregister_weight(self, ref: WeightRef, timeout: Optional[float]) -> None:
        first: Optional[GemmdError] = None
        for ep, (target, t) in enumerate(zip(self.targets, self.ts)):
            try:
                t.unregister_weight(self._at(ref, ep), timeout)
            except GemmdError as e:
                first = first or GemmdError(e.code, "%s: %s" % (target, e.message))
        if first is not None:
            raise first
        key = ref.weight_id if isinstance(ref, WeightInfo) else ref
        if isinstance(key, int):
            with self._lock:
                self._ids.pop(key, None)

    def weights(self, timeout: Optional[float]) -> list[WeightInfo]:
        return self._first_answer(lambda t: t.weights(timeout))

    def weight(self, ref: WeightRef, timeout: Optional[float]) -> WeightInfo:
        return self._first_answer(lambda t: t.weight(ref, timeout))

    # ---- GEMMs -------------------------------------------------------------------------------
    def gemm(self, a: Operand, rhs: Union[WeightRef, Operand], out_dtype: DType,
             timeout: Optional[float], out: Optional[np.ndarray]) -> Any:
        """A GEMM waited for at once: (D, RequestStats)."""
        return wait(self.gemm_async(a, rhs, out_dtype, timeout, out), timeout)

    def gemm_async(self, a: Operand, rhs: Union[WeightRef, Operand], out_dtype: DType,
                   timeout: Optional[float], out: Optional[np.ndarray]) -> Future:
        fut: Future = Future()
        fut.set_running_or_notify_cancel()
        start, n = self._pick(), len(self.ts)

        def attempt(k: int) -> None:
            ep = (start + k) % n
            try:
                inner = self.ts[ep].gemm_async(a, self._at(rhs, ep), out_dtype, timeout, out)
            except GemmdError as e:
                fut.set_exception(e)
                return

            def done(f: Future) -> None:
                e = f.exception()
                if isinstance(e, GemmdError) and e.code == StatusCode.UNAVAILABLE and k + 1 < n:
                    attempt(k + 1)
                elif e is not None:
                    fut.set_exception(e)
                else:
                    fut.set_result(f.result())
            inner.add_done_callback(done)

        attempt(0)
        return fut

    def stream(self, window: int) -> "_StreamAt":
        ep = self._pick()
        return _StreamAt(self, ep, self.ts[ep].stream(window))

    # ---- the servers ---------------------------------------------------------------------------
    def stats(self, timeout: Optional[float]) -> Any:
        return self._first_answer(lambda t: t.stats(timeout))

    def health(self, service: str, timeout: Optional[float]) -> HealthStatus:
        return self._first_answer(lambda t: t.health(service, timeout))

    def close(self) -> None:
        for t in self.ts:
            t.close()


class _StreamAt:
    """A GemmStream on one endpoint, with weight ids as that endpoint knows them."""

    def __init__(self, owner: BalancedTransport, ep: int, inner: Any):
        self._owner, self._ep, self._inner = owner, ep, inner

    def submit(self, a: Operand, rhs: Any, out_dtype: DType, timeout: Optional[float],
               out: Optional[np.ndarray]) -> Future:
        return self._inner.submit(a, self._owner._at(rhs, self._ep), out_dtype, timeout, out)

    def close(self) -> None:
        self._inner.close()

    def cancel(self) -> None:
        self._inner.cancel()
