"""The shared-memory transport: gemm requests through a private arena and its rings
(docs/shm-protocol.md), built on :mod:`gemmd.shm`.

Ownership of the arena: every request allocates the parts it needs (A, its scales,
inline B, D; a weight's data, scales and name) as one block of the free-list allocator,
which starts with its first part, and the thread that takes its completion (the completion
thread, or a caller waiting in gemm(), see ShmTransport.gemm) frees it once gemmd has
answered and D has been copied out. Nothing else allocates or frees, so no request can
invalidate another's blocks. When the arena is full, a request waits for others' blocks
to come back; one that could never fit fails with RESOURCE_EXHAUSTED.

Results are copies: the D block goes back to the allocator as soon as the completion
arrives, so an arena of fixed size serves any number of requests, a result outlives the
client, and no array ever points into memory that a later request reuses.

Operands that already lie in a region (docs/shm-protocol.md §7) skip the arena: arrays of
a SharedBuffer, and CUDA tensors (their allocations opened by CUDA IPC handle, see
_regions.DeviceRegions). Control messages for regions share the session's socket with the
completion thread, which watches it for the session's end: while one is in flight, that
thread leaves the socket to it.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from . import shm
from ._arrays import NP_DTYPE, Operand, torch_dtype
from ._regions import DeviceRegions, SharedBuffer
from ._types import DType, HealthStatus, RequestStats, ScaleLayout, WeightInfo
from .errors import GemmdError, StatusCode, wait

WeightRef = Union[str, int, WeightInfo]
# How long a synchronous caller reads the completion ring itself before it leaves the answer
# to the completion thread (docs/bench/shm_cpu.md); $GEMMD_SHM_SPIN_US sets it, as for
# libgemmclient, and 0 turns it off.
SPIN_S = int(os.environ.get("GEMMD_SHM_SPIN_US", "200")) * 1e-6
_DEFERRED = object()  # a completion handler that has passed its future on


class _Pending:
    __slots__ = ("future", "blocks", "finish")

    def __init__(self, future: Future, blocks: list[int], finish: Callable[[shm.Completion], Any]):
        self.future, self.blocks, self.finish = future, blocks, finish


def _stats(c: shm.Completion) -> RequestStats:
    return RequestStats(c.queue_ns, c.compute_ns, c.total_ns, c.batch_requests, c.batch_groups, c.batch_id)


def _timeout_us(timeout: Optional[float]) -> int:
    return 0 if timeout is None else min(0xFFFFFFFF, max(1, int(timeout * 1e6)))


def _stored(op: Operand) -> tuple[DType, ScaleLayout]:
    """How gemmd stores a weight registered as op: FP8 as given, others as E4M3 128x128."""
    return (op.dtype, op.layout) if op.dtype.is_fp8 else (DType.FP8_E4M3, ScaleLayout.BLOCK_128X128)


class ShmTransport:
    """One shared-memory session, shared by any number of threads."""

    name = "shm"

    def __init__(self, path: str, arena_bytes: int = 0, entries: int = 0, control: Any = None):
        self.conn = shm.Connection(path, arena_bytes, entries, version=shm.VERSION_2)
        self.heap = shm.Arena(self.conn.data_off, self.conn.data_bytes)
        self.control = control  # a GrpcTransport for weights(), stats(), health(), or None
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)  # ring slots or arena bytes came back
        self._pending: dict[int, _Pending] = {}
        self._next_id = 1
        self._dead: Optional[GemmdError] = None
        self._closing = False
        self._names: dict[str, tuple[int, int, int]] = {}  # name -> (id, N, K)
        self._ids: dict[int, tuple[int, int]] = {}         # id -> (N, K)
        self._retry_pool: Optional[ThreadPoolExecutor] = None
        self._consume = threading.Lock()   # one reader of the completion ring at a time
        self._last_caller, self._streak = 0, 0  # the thread of the last waits in a row (wait)
        self._answer_s = 0.0               # a moving average of how long answers took (wait;
                                           # updated without a lock: an estimate)
        self._ctl_lock = threading.Lock()  # one control message at a time (§7)
        self._ctl_busy = False             # one is in flight: the reaper leaves the socket alone
        self._buffers: list[SharedBuffer] = []
        self._device: Optional[DeviceRegions] = None
        self._wake_r, self._wake_w = os.pipe()
        # A synchronous caller alone on the session owns the completion ring while it waits
        # (gemm): the completion thread stands aside (_ring_owners > 0), and is woken
        # (_wake_w) when requests it must answer are left; the owner is woken through
        # _ring_wake_* when another thread completes its future.
        self._ring_owners = 0
        self._reaper_aside = False
        self._ring_wake_r, self._ring_wake_w = os.pipe()
        os.set_blocking(self._ring_wake_r, False)
        self._reaper = threading.Thread(target=self._reap, name="gemmd-shm", daemon=True)
        self._reaper.start()

    # ---- arena and rings -----------------------------------------------------------------
    def _check(self) -> None:
        if self._dead is not None:
            raise self._dead
        if self._closing:
            raise GemmdError(StatusCode.FAILED_PRECONDITION, "the client is closed")

    def _alloc(self, sizes: Sequence[tuple[int, int]]) -> list[int]:
        """The offsets of parts of (bytes, alignment), in one block that starts with the
        first (one allocation and one free a request, not one a part); waits while other
        requests hold the space. _free takes the list back."""
        if not sizes:
            return []
        at, need = [], 0
        for n, align in sizes:
            need = (need + align - 1) // align * align
            at.append(need)
            need += max(1, n)
        with self._lock:
            while True:
                self._check()
                try:
                    base = self.heap.alloc(need, max(align for _, align in sizes))
                    return [base + off for off in at]
                except MemoryError:
                    pass
                if not self._pending:
                    raise GemmdError(StatusCode.RESOURCE_EXHAUSTED,
                                     "the request needs %d bytes of the shared-memory arena, which "
                                     "has %d: connect with Client(..., arena_bytes=...) or use gRPC"
                                     % (need, self.conn.data_bytes))
                self._room.wait()

    def _free(self, blocks: Sequence[int]) -> None:
        """Gives back the block of an _alloc's parts."""
        if not blocks:
            return
        with self._lock:
            self.heap.free(blocks[0])
            self._room.notify_all()

    def _put(self, off: int, arr: np.ndarray) -> None:
        """Copies arr into the arena at off (one pass, whatever arr's strides)."""
        dst = np.frombuffer(self.conn.arena, dtype=arr.dtype, count=arr.size, offset=off)
        np.copyto(dst.reshape(arr.shape), arr)
        del dst

    def _submit(self, build: Callable[[int], bytes], blocks: list[int],
                finish: Callable[[shm.Completion], Any], future: Optional[Future] = None,
                lone: bool = False) -> Future:
        fut = future if future is not None else Future()
        if future is None:
            fut.set_running_or_notify_cancel()
        with self._lock:
            try:
                while self.conn.sq_room() <= 0:
                    self._check()
                    self._room.wait()
                self._check()
            except BaseException:
                if blocks:
                    self.heap.free(blocks[0])
                raise
            rid = self._next_id
            self._next_id += 1
            self._pending[rid] = _Pending(fut, blocks, finish)
            self.conn.push([build(rid)])
            kick = self._reaper_aside and self._ring_owners == 0 and not lone
        if kick:  # nobody reads the ring: the completion thread must (a lone entry's
            # sender reads it next)
            os.write(self._wake_w, b"x")
        return fut

    def _reap(self) -> None:
        """The completion thread: resolves futures, frees blocks, notices a closed session."""
        conn = self.conn
        assert conn.sock is not None
        sock = conn.sock.fileno()
        on_ring = False  # the last wait was on the ring's doorbell
        while True:
            with self._lock:
                aside = self._ring_owners > 0
            if aside and on_ring:  # the doorbell it took may have been the owner's answer
                os.write(self._ring_wake_w, b"x")
            if not aside:
                with self._consume:
                    done = conn.pop_completions()
                for c in done:
                    self._complete(c)
                if done:
                    continue
            with self._lock:
                if self._closing and not self._pending:
                    return
                watch = [self._wake_r] if self._ctl_busy else [self._wake_r, sock]
                aside = self._reaper_aside = self._ring_owners > 0
            if aside:  # the ring is its owner's
                ready, _, _ = select.select(watch, [], [], 1.0)
            else:
                ready = conn.wait_completions(1.0, watch)
            on_ring = not aside
            if self._wake_r in ready:
                os.read(self._wake_r, 4096)
            if sock in ready and self._session_ended(conn.sock):
                self._fail_all(GemmdError(StatusCode.UNAVAILABLE, "gemmd ended the shared-memory session"))
                return

    @staticmethod
    def _session_ended(sock: socket.socket) -> bool:
        """Whether a readable socket is at its end (else it holds a control reply, which its
        caller reads)."""
        try:
            return not sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            return True

    def gemm(self, a: Operand, rhs: Union[WeightRef, Operand], out_dtype: DType,
             timeout: Optional[float], out: Optional[np.ndarray]) -> Any:
        """A GEMM waited for at once: (D, RequestStats). A worker that sends one request at
        a time from one thread (its last 8 calls from this thread, nothing else in flight)
        owns the completion ring while it waits and takes its answer there itself, spinning
        for up to SPIN_S first: the hand-off from the completion thread costs two thread
        wake-ups (~100 µs in Python). It spins only while answers have come within SPIN_S
        on average and gemmd does not say the host is crowded, else it sleeps on the ring
        at once: a spinning thread holds the interpreter, and the process's other threads
        would wait for it (4 threads of
        synchronous GEMMs made 7.3-7.8k req/s spinning every time, 10.6-13.1k not;
        docs/bench/shm_cpu.md). Any other caller waits on its future."""
        me = threading.get_ident()
        with self._lock:
            self._streak = self._streak + 1 if me == self._last_caller else 0
            self._last_caller = me
            lone = self._streak >= 8 and not self._pending
        start = time.perf_counter()
        # The ring is claimed once the entry is sent: the weight look-up that sending may
        # need waits for the completion thread to answer it.
        fut = self.gemm_async(a, rhs, out_dtype, timeout, out, lone=lone)
        own = False
        if lone:
            with self._lock:
                own = len(self._pending) <= 1  # nothing but this one
                self._ring_owners += own
                kick = not own and self._reaper_aside and self._ring_owners == 0
            if kick:
                os.write(self._wake_w, b"x")
        try:
            if own:
                self._wait_on_ring(fut, None if timeout is None else start + timeout + 10.0)
            try:
                return wait(fut, timeout)
            finally:
                # How long the answer took to come, not to reach this thread (a hand-off
                # would keep the average above SPIN_S, and the caller would never spin again).
                answered = getattr(fut, "gemmd_answered_at", None)
                took = (answered if answered is not None else time.perf_counter()) - start
                self._answer_s += (took - self._answer_s) / 8
        finally:
            if own:
                with self._lock:
                    self._ring_owners -= 1
                    kick = self._ring_owners == 0 and bool(self._pending)
                if kick:  # requests of others (or this one, timed out) are left to answer
                    os.write(self._wake_w, b"x")

    def _wait_on_ring(self, fut: Future, until: Optional[float]) -> None:
        """Takes completions from the ring on this thread until fut is done (or `until`, on
        perf_counter's clock): spinning for up to SPIN_S while answers come that fast, then
        sleeping on the ring's doorbell. Whatever other thread completes fut (ending the
        session, a retry that failed, the completion thread in the moment before it stood
        aside) wakes this one through _ring_wake_*."""
        me = threading.get_ident()

        def wake(_: Future) -> None:  # runs in the thread that completes fut
            if threading.get_ident() != me:
                try:
                    os.write(self._ring_wake_w, b"x")
                except OSError:  # closed: nobody waits any more
                    pass
        fut.add_done_callback(wake)
        conn = self.conn
        spin = self._answer_s <= SPIN_S and not conn.crowded()
        spin_until = time.perf_counter() + SPIN_S if spin else 0.0
        while not fut.done():
            with self._consume:
                done = conn.pop_completions()
            for c in done:  # outside the lock: a done-callback may wait for another answer
                self._complete(c)
            now = time.perf_counter()
            if fut.done() or now < spin_until:
                continue
            left = 1.0 if until is None else min(1.0, until - now)
            if left <= 0:
                return
            if self._ring_wake_r in conn.wait_completions(left, [self._ring_wake_r]):
                try:
                    os.read(self._ring_wake_r, 4096)
                except BlockingIOError:
                    pass

    def _complete(self, c: shm.Completion) -> None:
        arrived = time.perf_counter()
        with self._lock:
            p = self._pending.pop(c.request_id, None)
            self._room.notify_all()  # a ring slot came back
        if p is None:
            return
        try:
            value, exc = p.finish(c), None
        except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
            value, exc = None, e
        self._free(p.blocks)
        if value is _DEFERRED:
            return
        p.future.gemmd_answered_at = arrived  # type: ignore[attr-defined]  # read by wait
        if exc is not None:
            p.future.set_exception(exc)
        else:
            p.future.set_result(value)

    def _fail_all(self, err: GemmdError) -> None:
        with self._lock:
            self._dead = err
            pending, self._pending = self._pending, {}
            self._room.notify_all()
        for p in pending.values():
            p.future.set_exception(err)

    # ---- regions -------------------------------------------------------------------------
    def _exchange(self, fn: Callable[[], Any]) -> Any:
        """Runs one control exchange on the socket, with the reaper off it."""
        with self._ctl_lock:
            with self._lock:
                self._check()
                self._ctl_busy = True
            os.write(self._wake_w, b"x")
            try:
                return fn()
            finally:
                with self._lock:
                    self._ctl_busy = False
                os.write(self._wake_w, b"x")

    def _close_region(self, region_id: int) -> None:
        with self._lock:
            if self._dead is not None or self._closing:  # the session's end closes its regions
                return
        self._exchange(lambda: self.conn.close_region(region_id))

    def shared_buffer(self, nbytes: int) -> SharedBuffer:
        buf = SharedBuffer(nbytes, lambda fd, n: self._exchange(lambda: self.conn.open_region_fd(fd, n)),
                           self._close_region, self._forget_buffer)
        with self._lock:
            self._buffers.append(buf)
        return buf

    def _forget_buffer(self, buf: SharedBuffer) -> None:
        with self._lock:
            self._buffers.remove(buf)

    def _place(self, arr: np.ndarray) -> Optional[tuple[int, int]]:
        """(region id, offset) of an array that lies in one of this session's buffers."""
        with self._lock:
            for buf in self._buffers:
                at = buf.locate(arr)
                if at is not None:
                    return buf.region_id, at
        return None

    def _device_regions(self) -> DeviceRegions:
        with self._lock:
            if self._device is None:
                self._device = DeviceRegions(
                    lambda handle, n: self._exchange(lambda: self.conn.open_region_ipc(handle, n)),
                    self._close_region)
            return self._device

    # ---- weights -------------------------------------------------------------------------
    def register_weight(self, name: str, op: Operand, timeout: Optional[float]) -> WeightInfo:
        raw_name = name.encode()
        sizes = [(op.nbytes, 256), (len(raw_name), 1)]
        if op.layout != ScaleLayout.NONE:
            sizes.append((4 * op.scales.size, 256))
        blocks = self._alloc(sizes)
        d_off, n_off = blocks[0], blocks[1]
        s_off = blocks[2] if len(blocks) > 2 else 0
        try:
            self._put(d_off, op.data)
            self.conn.write(n_off, raw_name)
            if s_off:
                self._put(s_off, op.scales)
        except BaseException:
            self._free(blocks)
            raise
        dtype, layout = _stored(op)

        def finish(c: shm.Completion) -> WeightInfo:
            if c.status:
                raise c.error()
            info = WeightInfo(c.result, name, op.rows, op.cols, dtype, layout,
                              op.rows * op.cols + 4 * layout.count(op.rows, op.cols), "registered")
            with self._lock:
                self._names[name] = (info.weight_id, info.n, info.k)
                self._ids[info.weight_id] = (info.n, info.k)
            return info

        fut = self._submit(lambda rid: shm.register_sqe(rid, op.rows, op.cols, int(op.dtype),
                                                        int(op.layout), d_off, s_off, n_off,
                                                        len(raw_name)), blocks, finish)
        return wait(fut, timeout)

    def _lookup(self, ref: WeightRef) -> Future:
        """Future of (id, N, K) from WEIGHT_INFO, by name or id."""
        blocks: list[int] = []
        n_off = n_len = wid = 0
        if isinstance(ref, str):
            raw = ref.encode()
            blocks = self._alloc([(len(raw), 1)])
            n_off, n_len = blocks[0], len(raw)
            self.conn.write(n_off, raw)
        else:
            wid = ref.weight_id if isinstance(ref, WeightInfo) else int(ref)

        def finish(c: shm.Completion) -> tuple[int, int, int]:
            if c.status:
                raise c.error()
            found = (c.batch_id, c.result & 0xFFFFFFFF, c.result >> 32)
            with self._lock:
                if isinstance(ref, str):
                    self._names[ref] = found
                self._ids[found[0]] = found[1:]
            return found

        return self._submit(lambda rid: shm.weight_info_sqe(rid, wid, n_off, n_len), blocks, finish)

    def _resolve(self, ref: WeightRef) -> tuple[int, int, int, bool]:
        """(id, N, K, from the cache) of a weight reference; asks gemmd when not cached."""
        with self._lock:
            if isinstance(ref, WeightInfo):
                return ref.weight_id, ref.n, ref.k, False
            if isinstance(ref, str) and ref in self._names:
                return (*self._names[ref], True)
            if not isinstance(ref, str) and int(ref) in self._ids:
                return (int(ref), *self._ids[int(ref)], True)
        return (*self._lookup(ref).result(), False)

    def _forget(self, ref: WeightRef) -> None:
        with self._lock:
            if isinstance(ref, str):
                self._names.pop(ref, None)
            else:
                wid = ref.weight_id if isinstance(ref, WeightInfo) else int(ref)
                self._ids.pop(wid, None)
                for name in [k for k, v in self._names.items() if v[0] == wid]:
                    del self._names[name]

    def weight(self, ref: WeightRef, timeout: Optional[float]) -> WeightInfo:
        if self.control is not None:
            return self.control.weight(ref, timeout)
        wid, n, k = wait(self._lookup(ref), timeout)
        # WEIGHT_INFO tells id and shape only: the rest is for ListWeights (control=).
        return WeightInfo(wid, ref if isinstance(ref, str) else "", n, k, DType.UNSPECIFIED,
                          ScaleLayout.NONE, 0)

    def unregister_weight(self, ref: WeightRef, timeout: Optional[float]) -> None:
        # By name: asked afresh (a cached id may belong to a weight since replaced).
        wid = wait(self._lookup(ref), timeout)[0] if isinstance(ref, str) else (
            ref.weight_id if isinstance(ref, WeightInfo) else int(ref))

        def finish(c: shm.Completion) -> None:
            self._forget(wid)
            if isinstance(ref, str):
                self._forget(ref)
            if c.status:
                raise c.error()

        wait(self._submit(lambda rid: shm.unregister_sqe(rid, wid), [], finish), timeout)

    def weights(self, timeout: Optional[float]) -> list[WeightInfo]:
        return self._control("weights()").weights(timeout)

    def stats(self, timeout: Optional[float]) -> Any:
        return self._control("stats()").stats(timeout)

    def _control(self, what: str) -> Any:
        if self.control is None:
            raise GemmdError(StatusCode.UNIMPLEMENTED,
                             "%s: the shared-memory protocol has no such request; give the client "
                             "gemmd's gRPC address as well: Client('unix://...', control='host:port')" % what)
        return self.control

    def health(self, service: str, timeout: Optional[float]) -> HealthStatus:
        if self.control is not None:
            return self.control.health(service, timeout)
        self._check()
        # A probe through the rings: any answer but UNAVAILABLE means gemmd serves requests.
        try:
            wait(self._lookup(0xFFFFFFFFFFFFFFFF), timeout)
        except GemmdError as e:
            if e.code == StatusCode.UNAVAILABLE:
                return HealthStatus.NOT_SERVING
            if e.code != StatusCode.NOT_FOUND:
                raise
        return HealthStatus.SERVING

    # ---- GEMMs ---------------------------------------------------------------------------
    def gemm_async(self, a: Operand, rhs: Union[WeightRef, Operand], out_dtype: DType,
                   timeout: Optional[float], out: Optional[np.ndarray],
                   future: Optional[Future] = None, retry: bool = True, lone: bool = False) -> Future:
        """A future of (D, RequestStats). What gemmd or the session refuses (an unknown
        weight, a full arena, a closed session) fails the future, as over gRPC. lone: the
        caller (gemm) will own the completion ring for this request's answer."""
        fut = future if future is not None else Future()
        if future is None:
            fut.set_running_or_notify_cancel()
        try:
            return self._gemm(fut, a, rhs, out_dtype, timeout, out, retry, lone)
        except GemmdError as e:
            fut.set_exception(e)
            return fut

    def _gemm(self, fut: Future, a: Operand, rhs: Union[WeightRef, Operand], out_dtype: DType,
              timeout: Optional[float], out: Optional[np.ndarray], retry: bool, lone: bool) -> Future:
        m, k = a.rows, a.cols
        inline: Optional[Operand] = rhs if isinstance(rhs, Operand) else None
        ref: Optional[WeightRef] = None if isinstance(rhs, Operand) else rhs
        if inline is not None:
            wid, n, from_cache = 0, inline.rows, False
        else:
            assert ref is not None
            wid, n, wk, from_cache = self._resolve(ref)
            if wk != k:
                raise GemmdError(StatusCode.INVALID_ARGUMENT,
                                 "a has K = %d; weight %s is %d x %d" % (k, _name(ref), n, wk))
        if out is not None and out.shape[1] != n:
            raise GemmdError(StatusCode.INVALID_ARGUMENT, "out has %d columns; D has %d" % (out.shape[1], n))
        d_bytes = m * n * out_dtype.itemsize
        if a.device is not None:
            return self._gemm_device(fut, a, wid, inline, n, d_bytes, out_dtype, timeout, out,
                                     lambda c: self._stale(c, from_cache, ref, retry, fut, a, out_dtype,
                                                           timeout, out), lone)
        # Operands in this session's shared buffers are named where they lie; the rest
        # are copied into blocks of the arena.
        a_at = self._place(a.data)
        s_at = self._place(a.scales) if a.layout != ScaleLayout.NONE else None
        d_at = self._place(out) if out is not None else None
        sizes = []
        if a_at is None:
            sizes.append((a.nbytes, 256))
        if a.layout != ScaleLayout.NONE and s_at is None:
            sizes.append((4 * a.scales.size, 256))
        if d_at is None:
            sizes.append((d_bytes, 256))
        if inline is not None:
            sizes.append((inline.nbytes, 256))
            if inline.layout != ScaleLayout.NONE:
                sizes.append((4 * inline.scales.size, 256))
        blocks = self._alloc(sizes)
        try:
            it = iter(blocks)
            a_off = a_at[1] if a_at is not None else next(it)
            if a_at is None:
                self._put(a_off, a.data)
            a_s = 0
            if a.layout != ScaleLayout.NONE:
                a_s = s_at[1] if s_at is not None else next(it)
                if s_at is None:
                    self._put(a_s, a.scales)
            d_off = d_at[1] if d_at is not None else next(it)
            b = None
            if inline is not None:
                b_off = next(it)
                self._put(b_off, inline.data)
                b_s = 0
                if inline.layout != ScaleLayout.NONE:
                    b_s = next(it)
                    self._put(b_s, inline.scales)
                b = (b_off, int(inline.dtype), int(inline.layout), b_s)
        except BaseException:
            self._free(blocks)
            raise
        a_desc = (a_off, int(a.dtype), int(a.layout), a_s)
        regions = (a_at[0] if a_at else 0, s_at[0] if s_at else 0, d_at[0] if d_at else 0)
        dt = NP_DTYPE[out_dtype]

        def finish(c: shm.Completion) -> Any:
            if self._stale(c, from_cache, ref, retry, fut, a, out_dtype, timeout, out):
                return _DEFERRED
            _check_d(c, d_bytes)
            if d_at is not None:  # gemmd wrote D into out where it lies
                return out, _stats(c)
            view = np.frombuffer(self.conn.arena, dtype=dt, count=m * n, offset=d_off).reshape(m, n)
            try:
                if out is None:
                    return view.copy(), _stats(c)
                np.copyto(out, view)
                return out, _stats(c)
            finally:
                del view

        return self._submit(lambda rid: shm.gemm_sqe(rid, m, k, a_desc, d_off, d_bytes, wid, b, n,
                                                     int(out_dtype), _timeout_us(timeout), regions),
                            blocks, finish, fut, lone)

    def _stale(self, c: shm.Completion, from_cache: bool, ref: Optional[WeightRef], retry: bool,
               fut: Future, a: Operand, out_dtype: DType, timeout: Optional[float], out: Any) -> bool:
        """Whether c is NOT_FOUND for a weight named through a stale cached id: the name now
        means another weight, so the request is sent again (once) after a fresh look-up."""
        if c.status != StatusCode.NOT_FOUND or not from_cache or ref is None:
            return False
        self._forget(ref)
        if not retry:
            return False
        self._retry_executor().submit(self._retry, fut, a, ref, out_dtype, timeout, out)
        return True

    def _gemm_device(self, fut: Future, a: Operand, wid: int, inline: Optional[Operand], n: int,
                     d_bytes: int, out_dtype: DType, timeout: Optional[float], out: Any,
                     stale: Callable[[shm.Completion], bool], lone: bool) -> Future:
        """A GEMM whose A (and scales) are CUDA tensors: gemmd reads them and writes D, a
        tensor on the same GPU, where they lie (docs/shm-protocol.md §7)."""
        torch = sys.modules["torch"]
        m, k = a.rows, a.cols
        d = out if out is not None else torch.empty((m, n), dtype=torch_dtype(out_dtype), device=a.device)
        regions = self._device_regions()
        held = []
        try:
            for t in (a.data, a.scales, d) if a.layout != ScaleLayout.NONE else (a.data, d):
                held.append(regions.acquire(t.data_ptr(), t.numel() * t.element_size()))
            blocks: list[int] = []
            b = None
            if inline is not None:  # B from the host, through the arena
                sizes = [(inline.nbytes, 256)]
                if inline.layout != ScaleLayout.NONE:
                    sizes.append((4 * inline.scales.size, 256))
                blocks = self._alloc(sizes)
                try:
                    self._put(blocks[0], inline.data)
                    if len(blocks) > 1:
                        self._put(blocks[1], inline.scales)
                except BaseException:
                    self._free(blocks)
                    raise
                b = (blocks[0], int(inline.dtype), int(inline.layout), blocks[1] if len(blocks) > 1 else 0)
        except BaseException:
            for r, _ in held:
                regions.release(r)
            raise
        (ra, a_off), (rd, d_off) = held[0], held[-1]
        rs, s_off = held[1] if len(held) == 3 else (None, 0)
        a_desc = (a_off, int(a.dtype), int(a.layout), s_off)
        ids = (ra.region_id, rs.region_id if rs is not None else 0, rd.region_id)
        # §7's ordering: A and its scales are complete before the entry is pushed, and
        # gemmd may write D only after the stream's earlier work on it.
        torch.cuda.current_stream(a.device).synchronize()

        def finish(c: shm.Completion) -> Any:
            for r, _ in held:
                regions.release(r)
            if stale(c):
                return _DEFERRED
            _check_d(c, d_bytes)
            return d, _stats(c)

        try:
            return self._submit(lambda rid: shm.gemm_sqe(rid, m, k, a_desc, d_off, d_bytes, wid, b, n,
                                                         int(out_dtype), _timeout_us(timeout), ids),
                                blocks, finish, fut, lone)
        except BaseException:  # never sent: finish will not run
            for r, _ in held:
                regions.release(r)
            raise

    def _retry_executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._retry_pool is None:
                self._retry_pool = ThreadPoolExecutor(1, thread_name_prefix="gemmd-shm-retry")
            return self._retry_pool

    def _retry(self, fut: Future, a: Operand, ref: WeightRef, out_dtype: DType,
               timeout: Optional[float], out: Optional[np.ndarray]) -> None:
        try:
            self.gemm_async(a, ref, out_dtype, timeout, out, future=fut, retry=False)
        except Exception as e:  # noqa: BLE001 - handed to the caller through the future
            if not fut.done():
                fut.set_exception(e)

    def stream(self, window: int) -> "ShmStream":
        return ShmStream(self)

    def close(self) -> None:
        """Waits for requests in flight, then ends the session."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            self._room.notify_all()
        os.write(self._wake_w, b"x")
        self._reaper.join()
        if self._retry_pool is not None:
            self._retry_pool.shutdown()
        os.close(self._wake_r)
        os.close(self._wake_w)
        os.close(self._ring_wake_r)
        os.close(self._ring_wake_w)
        self.conn.close()
        if self.control is not None:
            self.control.close()


def _check_d(c: shm.Completion, d_bytes: int) -> None:
    if c.status:
        raise c.error()
    if c.result != d_bytes:
        raise GemmdError(StatusCode.INTERNAL, "gemmd wrote %d bytes of D; %d expected" % (c.result, d_bytes))


def _name(ref: WeightRef) -> str:
    return repr(ref.name if isinstance(ref, WeightInfo) else ref)


class ShmStream:
    """GemmStream's shared-memory form: the rings already pipeline, so a stream is the
    transport's own asynchronous GEMM."""

    def __init__(self, transport: ShmTransport):
        self._t = transport
        self._futures: set[Future] = set()

    def submit(self, a: Operand, rhs: Any, out_dtype: DType, timeout: Optional[float],
               out: Optional[np.ndarray]) -> Future:
        fut = self._t.gemm_async(a, rhs, out_dtype, timeout, out)
        self._futures.add(fut)
        fut.add_done_callback(self._futures.discard)
        return fut

    def close(self) -> None:
        for fut in list(self._futures):
            try:
                fut.exception()
            except Exception:  # noqa: BLE001 - cancelled
                pass

    def cancel(self) -> None:
        self.close()

