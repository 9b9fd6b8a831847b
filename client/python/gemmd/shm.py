"""gemmd's shared-memory protocol (docs/shm-protocol.md) at the byte level, standard
library only: the handshake, the rings, entry layouts, and an allocator for the arena.

:class:`gemmd.Client` ("unix://...") is built on :class:`Connection` and :class:`Arena`
and is what applications use. :class:`Client` here is the byte-level client the
integration tests drive (offsets, raw entries); it is not thread-safe (one per thread)::

    with Client("/run/gemmd/gemmd.sock") as c:
        a = c.alloc(m * k); c.write(a, a_bytes)          # operands live in the arena
        d = c.alloc(m * n * 2)
        r = c.gemm(m=m, k=k, a=(a, DTYPE_E4M3, LAYOUT_NONE, None), weight_id=wid, d=d,
                   d_capacity=m * n * 2)
        result_bytes = c.read(d, r.d_bytes)
        c.free(a); c.free(d)

Every allocation belongs to whoever asked for it: operations that need scratch space in
the arena (register_weight, weight_info by name) allocate their own and free it, and
never touch the caller's.
"""

from __future__ import annotations

import bisect
import mmap
import os
import random
import select
import socket
import struct
import threading
import time
from typing import Optional, Sequence

from .errors import GemmdError, StatusCode

# How long a connection keeps trying while gemmd turns it away as busy (docs/shm-protocol.md).
CONNECT_RETRY_S = 5.0


class _Transient(Exception):
    """A handshake that may succeed if tried again; carries the error to raise if not."""

    def __init__(self, error: GemmdError):
        super().__init__(str(error))
        self.error = error

MAGIC = b"GEMMDSH1"
VERSION = 1
HEADER_BYTES = 4096
ENTRY = 128

OP_GEMM, OP_REGISTER_WEIGHT, OP_UNREGISTER_WEIGHT, OP_WEIGHT_INFO = 1, 2, 3, 4
DTYPE_E4M3, DTYPE_E5M2, DTYPE_BF16, DTYPE_FP16, DTYPE_FP32 = 1, 2, 3, 4, 5
LAYOUT_NONE, LAYOUT_TENSOR, LAYOUT_ROW, LAYOUT_1X128, LAYOUT_128X128 = 0, 1, 2, 3, 4
ELEMENT_BYTES = {DTYPE_E4M3: 1, DTYPE_E5M2: 1, DTYPE_BF16: 2, DTYPE_FP16: 2, DTYPE_FP32: 4}

# Header word offsets (section 2).
SQ_TAIL, SQ_HEAD, CQ_TAIL, CQ_HEAD = 256, 320, 384, 448
SERVER_IDLE, CLIENT_WAITING, CQ_SEQ, CROWDED = 512, 576, 640, 704

HELLO = struct.Struct("<8sIIQII")               # 32 bytes
WELCOME = struct.Struct("<8sIiQII224s")          # 256 bytes
GEOMETRY = struct.Struct("<8sIIQIIIIQQII")       # header bytes 0..64
SQE = struct.Struct("<8BIIIIQQQQQQQQIII28x")     # 128 bytes (version 1: the three regions 0)
CQE = struct.Struct("<QiIQQQQIIQ64s")            # 128 bytes
CTL = struct.Struct("<IIQQII64s32x")              # 128 bytes, version 2 (section 7)
CTL_REPLY = struct.Struct("<IiQIIQ224s")          # 256 bytes
VERSION_2 = 2
CTL_REGION_OPEN, CTL_REGION_CLOSE = 1, 2
REGION_FD, REGION_CUDA_IPC = 1, 2
CONTROL_TIMEOUT_S = 60.0  # gemmd opens a region off its loop; CUDA's can take a while
_FENCE = threading.Lock()  # a full memory barrier where the protocol needs one

ShmError = GemmdError  # the name this module's first version used


class Completion:
    """One completion entry (section 2), decoded."""

    __slots__ = ("request_id", "status", "opcode", "result", "queue_ns", "compute_ns",
                 "total_ns", "batch_requests", "batch_groups", "batch_id", "message")

    def __init__(self, raw: bytes):
        (self.request_id, self.status, self.opcode, self.result, self.queue_ns, self.compute_ns,
         self.total_ns, self.batch_requests, self.batch_groups, self.batch_id, msg) = CQE.unpack(raw)
        self.message = msg.split(b"\0", 1)[0].decode("utf-8", "replace")

    @property
    def d_bytes(self) -> int:
        return self.result

    def error(self) -> GemmdError:
        """The GemmdError of a failed request (status != 0)."""
        return GemmdError(self.status, self.message)


def scale_count(layout: int, rows: int, cols: int) -> int:
    kb = (cols + 127) // 128
    return {LAYOUT_NONE: 0, LAYOUT_TENSOR: 1, LAYOUT_ROW: rows, LAYOUT_1X128: rows * kb,
            LAYOUT_128X128: ((rows + 127) // 128) * kb}[layout]


# ---- Entries --------------------------------------------------------------------------------


def gemm_sqe(request_id: int, m: int, k: int, a: tuple, d: int, d_capacity: int,
             weight_id: int = 0, b: Optional[tuple] = None, n: int = 0, out_dtype: int = 0,
             timeout_us: int = 0, regions: tuple = (0, 0, 0)) -> bytes:
    """A GEMM entry. a, b: (data offset, dtype, layout, scales offset or 0); regions: the
    regions A, A's scales and D lie in (version 2; 0 = the arena, offsets then count from
    the region's start)."""
    a_off, a_dt, a_l, a_s = a
    b_off, b_dt, b_l, b_s = b if b is not None else (0, 0, 0, 0)
    return SQE.pack(OP_GEMM, a_dt, a_l, out_dtype, 1 if b is not None else 0, b_dt, b_l, 0,
                    m, n, k, timeout_us, request_id, weight_id, a_off, a_s or 0, b_off, b_s or 0,
                    d, d_capacity, *regions)


def register_sqe(request_id: int, n: int, k: int, dtype: int, layout: int, data_off: int,
                 scales_off: int, name_off: int, name_len: int) -> bytes:
    return SQE.pack(OP_REGISTER_WEIGHT, dtype, layout, 0, 0, 0, 0, 0, n, 0, k, 0, request_id, 0,
                    data_off, scales_off, 0, 0, name_off, name_len, 0, 0, 0)


def unregister_sqe(request_id: int, weight_id: int) -> bytes:
    return SQE.pack(OP_UNREGISTER_WEIGHT, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, request_id, weight_id,
                    0, 0, 0, 0, 0, 0, 0, 0, 0)


def weight_info_sqe(request_id: int, weight_id: int = 0, name_off: int = 0,
                    name_len: int = 0) -> bytes:
    return SQE.pack(OP_WEIGHT_INFO, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, request_id, weight_id, 0, 0,
                    0, 0, name_off, name_len, 0, 0, 0)


# ---- The arena's data region ---------------------------------------------------------------


class Arena:
    """A first-fit allocator over [start, start + size) with a free list that merges
    neighbours. Every block is freed by its owner (:meth:`free`); :meth:`reset` forgets
    all of them at once, for a caller that owns every allocation. Not thread-safe."""

    def __init__(self, start: int, size: int):
        self.start, self.size = start, size
        self._free: list[list[int]] = [[start, size]]   # [offset, bytes], by offset, never adjacent
        self._blocks: dict[int, tuple[int, int]] = {}   # aligned offset -> (block offset, bytes)

    def alloc(self, nbytes: int, align: int = 256) -> int:
        """Offset of nbytes (at least 1) aligned to align; MemoryError when nothing fits."""
        nbytes = max(1, int(nbytes))
        for i, (off, size) in enumerate(self._free):
            aligned = (off + align - 1) // align * align
            end = aligned + nbytes
            if end <= off + size:
                if end == off + size:
                    del self._free[i]
                else:
                    self._free[i] = [end, off + size - end]
                self._blocks[aligned] = (off, end - off)
                return aligned
        raise MemoryError("arena full: no %d free bytes in one piece (%d of %d free)"
                          % (nbytes, self.free_bytes, self.size))

    def free(self, offset: int) -> None:
        """Gives back the block that alloc returned at offset."""
        try:
            off, size = self._blocks.pop(offset)
        except KeyError:
            raise ValueError("offset %d is not an allocation of this arena" % offset) from None
        i = bisect.bisect_left(self._free, [off, 0])
        if i < len(self._free) and off + size == self._free[i][0]:   # merge with the next
            size += self._free[i][1]
            del self._free[i]
        if i > 0 and self._free[i - 1][0] + self._free[i - 1][1] == off:  # and the previous
            self._free[i - 1][1] += size
        else:
            self._free.insert(i, [off, size])

    def reset(self) -> None:
        """Forgets every allocation."""
        self._free = [[self.start, self.size]]
        self._blocks.clear()

    @property
    def free_bytes(self) -> int:
        return sum(size for _off, size in self._free)

    @property
    def allocations(self) -> int:
        return len(self._blocks)


# ---- A session -----------------------------------------------------------------------------


class Connection:
    """One session with gemmd: the handshake, the mapped arena and its two rings. It
    neither allocates nor decides how to wait; not thread-safe on its own."""

    def __init__(self, path: str, arena_bytes: int = 0, entries: int = 0,
                 connect_timeout: float = CONNECT_RETRY_S, version: int = VERSION):
        self.version = version
        self._ctl_tag = 0  # the last control message's tag (control)
        # Threads in wait_completions at once (a client's completion thread and a caller
        # waiting on the ring itself): client_waiting is cleared only when the last leaves,
        # so that gemmd keeps ringing for the others.
        self._waiters, self._waiters_lock = 0, threading.Lock()
        # Many workers starting at once can pass gemmd's bound on handshakes in progress:
        # such a connection is turned away as UNAVAILABLE (or closed before its WELCOME)
        # and tried again after a jittered backoff, until connect_timeout.
        deadline, backoff = time.monotonic() + connect_timeout, 0.0005
        while True:
            try:
                msg, fds = self._hello(path, arena_bytes, entries, version)
                break
            except _Transient as e:
                if time.monotonic() + backoff > deadline:
                    raise e.error from None
                time.sleep(backoff / 2 + random.random() * backoff / 2)
                backoff = min(backoff * 2, 0.05)
        _magic, _version, _status, size, self.client_id, self.max_inflight, _text = WELCOME.unpack(msg)
        arena_fd, self.sq_efd, self.cq_efd = fds
        self.arena = mmap.mmap(arena_fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(arena_fd)
        # Ring cursors are read and written as whole aligned words (a typed memoryview),
        # never byte by byte as struct's "<I" does: gemmd reads them concurrently, and a
        # torn cursor looks like a protocol violation (gemmd closes such a client).
        self._words = memoryview(self.arena).cast("I")
        (_m, _v, _hb, self.size, self.sq_off, self.entries, self.cq_off, _cqn, self.data_off,
         self.data_bytes, _id, _mi) = GEOMETRY.unpack_from(self.arena, 0)

    def _hello(self, path: str, arena_bytes: int, entries: int, version: int) -> tuple[bytes, list[int]]:
        """One connect, HELLO and a WELCOME that accepts: the WELCOME and its three fds; the
        socket becomes self.sock. Raises GemmdError for a refusal, _Transient for one that
        trying again may get past."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.connect(path)
        except BlockingIOError as e:  # the listen backlog is full
            sock.close()
            raise _Transient(GemmdError(StatusCode.UNAVAILABLE, "cannot connect to %s: %s" % (path, e))) from e
        except OSError as e:
            sock.close()
            raise GemmdError(StatusCode.UNAVAILABLE, "cannot connect to %s: %s" % (path, e)) from e
        try:
            sock.send(HELLO.pack(MAGIC, version, 0, arena_bytes, entries, 0))
        except OSError:
            pass  # a refusal comes before the HELLO is read: read it
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, WELCOME.size, 3)
        except OSError as e:
            sock.close()
            raise _Transient(GemmdError(StatusCode.UNAVAILABLE, "handshake with %s failed: %s" % (path, e))) from e
        if len(msg) == WELCOME.size:
            magic, got_version, status, _size, _id, _mi, text = WELCOME.unpack(msg)
            if status == 0 and magic == MAGIC and got_version == version and len(fds) == 3:
                self.sock: Optional[socket.socket] = sock
                return msg, fds
        for fd in fds:
            os.close(fd)
        sock.close()
        if len(msg) != WELCOME.size:
            err = GemmdError(StatusCode.UNAVAILABLE, "gemmd closed the connection during the handshake")
            if not msg:  # closed, as when turned away before the HELLO was read
                raise _Transient(err)
            raise err
        if status == 0:
            raise GemmdError(StatusCode.INTERNAL, "unexpected WELCOME")
        err = GemmdError(status, text.split(b"\0", 1)[0].decode())
        if status == StatusCode.UNAVAILABLE:  # busy: too many handshakes at once
            raise _Transient(err)
        raise err

    # ---- regions (version 2, section 7) ------------------------------------------------
    def control(self, op: int, kind: int = 0, nbytes: int = 0, region_id: int = 0,
                handle: bytes = b"", fd: Optional[int] = None,
                timeout: float = CONTROL_TIMEOUT_S) -> tuple[int, int]:
        """Sends one control message (with `fd` attached) and reads its reply: (status code,
        region id); raises GemmdError for a refusal, DEADLINE_EXCEEDED past timeout. Each
        message carries a tag of its own, and a reply with another tag (to a message whose
        wait timed out) is dropped, so that it never answers a later one."""
        self._ctl_tag += 1
        raw = CTL.pack(op, kind, nbytes, self._ctl_tag, region_id, 0, handle)
        try:
            if fd is None:
                self.sock.send(raw)
            else:
                socket.send_fds(self.sock, [raw], [fd])
        except OSError as e:
            raise GemmdError(StatusCode.UNAVAILABLE, "gemmd closed the connection: %s" % e) from e
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise GemmdError(StatusCode.DEADLINE_EXCEEDED,
                                 "gemmd did not answer a control message in %.0f s" % timeout)
            reply = self.sock.recv(CTL_REPLY.size)
            if len(reply) != CTL_REPLY.size:
                raise GemmdError(StatusCode.UNAVAILABLE, "gemmd closed the connection")
            _op, status, tag, rid, _r, _bytes, text = CTL_REPLY.unpack(reply)
            if tag == self._ctl_tag:
                break
        if status != 0:
            raise GemmdError(status, text.split(b"\0", 1)[0].decode())
        return status, rid

    def open_region_fd(self, fd: int, nbytes: int) -> int:
        """Hands gemmd a region of this process's device memory by fd (a memfd on the CPU
        backend) and returns its id; the fd may be closed after."""
        return self.control(CTL_REGION_OPEN, REGION_FD, nbytes, fd=fd)[1]

    def open_region_ipc(self, handle: bytes, nbytes: int) -> int:
        """Hands gemmd a CUDA allocation by its cudaIpcMemHandle_t (64 bytes); the region is
        nbytes from the allocation's start. Returns its id."""
        return self.control(CTL_REGION_OPEN, REGION_CUDA_IPC, nbytes, handle=handle)[1]

    def close_region(self, region_id: int) -> None:
        """No later entry may name the region; gemmd unmaps it once its requests are done."""
        self.control(CTL_REGION_CLOSE, region_id=region_id)

    def write(self, off: int, data: bytes) -> None:
        self.arena[off:off + len(data)] = data

    def read(self, off: int, n: int) -> bytes:
        return bytes(self.arena[off:off + n])

    def _u32(self, off: int) -> int:
        return self._words[off >> 2]

    def _set_u32(self, off: int, v: int) -> None:
        self._words[off >> 2] = v & 0xFFFFFFFF

    def crowded(self) -> bool:
        """gemmd's word that more clients are busy than may spin-wait for answers:
        waiters then block at once (section 3)."""
        return self._u32(CROWDED) != 0

    def sq_room(self) -> int:
        """Entries that may be submitted now without overflowing the completion ring."""
        return self.entries - ((self._u32(SQ_TAIL) - self._u32(CQ_HEAD)) & 0xFFFFFFFF)

    def push(self, entries: Sequence[bytes]) -> None:
        """Queues entries (room checked by the caller) with one tail update and one
        doorbell, so that gemmd sees them together."""
        tail = self._u32(SQ_TAIL)
        for i, raw in enumerate(entries):
            slot = self.sq_off + ((tail + i) % self.entries) * ENTRY
            self.arena[slot:slot + ENTRY] = raw
        self._set_u32(SQ_TAIL, tail + len(entries))
        if self._u32(SERVER_IDLE):
            os.eventfd_write(self.sq_efd, 1)

    def pop_completions(self) -> list[Completion]:
        """Every published completion, consumed."""
        out = []
        head, tail = self._u32(CQ_HEAD), self._u32(CQ_TAIL)
        while head != tail:
            slot = self.cq_off + (head % self.entries) * ENTRY
            out.append(Completion(self.arena[slot:slot + ENTRY]))
            head = (head + 1) & 0xFFFFFFFF
            self._set_u32(CQ_HEAD, head)
        return out

    def wait_completions(self, timeout: Optional[float], extra_fds: Sequence[int] = ()) -> list[int]:
        """Blocks until a completion is published, one of extra_fds is readable, or timeout
        passes; returns the readable extra fds. Any number of threads may wait at once."""
        with self._waiters_lock:
            self._waiters += 1
            self._set_u32(CLIENT_WAITING, 1)
        # A full barrier between that store and the load of cq_tail below (taking a lock
        # is a locked instruction). Without it the store can wait in the CPU's store
        # buffer while the load reads an old tail, gemmd meanwhile publishes and reads
        # client_waiting as 0, and neither side wakes the other: this wait would sleep
        # until its timeout with an answer in the ring.
        with _FENCE:
            pass
        ready: list[int] = []
        if self._u32(CQ_TAIL) == self._u32(CQ_HEAD):
            ready, _, _ = select.select([self.cq_efd, *extra_fds], [], [], timeout)
            if self.cq_efd in ready:
                try:
                    os.eventfd_read(self.cq_efd)
                except BlockingIOError:  # another waiter read it
                    pass
        with self._waiters_lock:
            self._waiters -= 1
            if self._waiters == 0:
                self._set_u32(CLIENT_WAITING, 0)
        return [fd for fd in ready if fd != self.cq_efd]

    def close(self) -> None:
        if self.sock is not None:
            self._words.release()
            self.arena.close()
            os.close(self.sq_efd)
            os.close(self.cq_efd)
            self.sock.close()
            self.sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Client(Connection):
    """The byte-level client: operands at offsets the caller allocates (and frees);
    requests as entries. One thread at a time."""

    def __init__(self, path: str, arena_bytes: int = 0, entries: int = 0, version: int = VERSION):
        super().__init__(path, arena_bytes, entries, version=version)
        self.heap = Arena(self.data_off, self.data_bytes)
        self._next_id = 1
        self._done: dict[int, Completion] = {}

    # ---- the arena ----------------------------------------------------------------------
    def alloc(self, nbytes: int, align: int = 256) -> int:
        return self.heap.alloc(nbytes, align)

    def free(self, off: int) -> None:
        self.heap.free(off)

    def reset(self) -> None:
        """Frees every allocation this client made (call only with nothing in flight)."""
        self.heap.reset()

    # ---- rings --------------------------------------------------------------------------
    def submit(self, sqe_bytes: bytes) -> None:
        """Queues one 128-byte entry; waits for room first."""
        self.submit_many([sqe_bytes])

    def submit_many(self, entries: Sequence[bytes]) -> None:
        """Queues several entries with one tail update and one doorbell, so that gemmd
        sees them together (and can batch them)."""
        while self.sq_room() < len(entries):
            self._collect(block=True)
        self.push(entries)

    def gemm_entry(self, m, k, a, d, d_capacity, weight_id=0, b=None, n=0, out_dtype=0,
                   timeout_us=0, request_id=None, regions=(0, 0, 0)):
        """(request id, the 128-byte GEMM entry) without submitting it."""
        rid = self._new_id() if request_id is None else request_id
        return rid, gemm_sqe(rid, m, k, a, d, d_capacity, weight_id, b, n, out_dtype, timeout_us,
                             regions)

    def _collect(self, block: bool) -> int:
        """Consumes every published completion; with block, sleeps (at most a second) when
        none has come yet. Returns how many it consumed."""
        got = self._consume()
        if got or not block:
            return got
        self.wait_completions(1.0)
        return self._consume()

    def _consume(self) -> int:
        done = self.pop_completions()
        for c in done:
            self._done[c.request_id] = c
        return len(done)

    def wait(self, request_id: int, timeout: float = 60.0) -> Completion:
        deadline = time.monotonic() + timeout
        while request_id not in self._done:
            if time.monotonic() > deadline:
                raise TimeoutError("no completion for request %d" % request_id)
            self._collect(block=True)
        return self._done.pop(request_id)

    def _new_id(self) -> int:
        rid = self._next_id
        self._next_id += 1
        return rid

    def _call(self, build) -> Completion:
        rid = self._new_id()
        self.submit(build(rid))
        c = self.wait(rid)
        if c.status != 0:
            raise c.error()
        return c

    # ---- operations ---------------------------------------------------------------------
    def gemm_async(self, m, k, a, d, d_capacity, weight_id=0, b=None, n=0, out_dtype=0,
                   timeout_us=0, request_id=None, regions=(0, 0, 0)) -> int:
        """a, b: (data offset, dtype, layout, scales offset or 0); regions: see gemm_sqe.
        Returns the request id."""
        rid, raw = self.gemm_entry(m, k, a, d, d_capacity, weight_id, b, n, out_dtype, timeout_us,
                                   request_id, regions)
        self.submit(raw)
        return rid

    def gemm(self, **kw) -> Completion:
        c = self.wait(self.gemm_async(**kw))
        if c.status != 0:
            raise c.error()
        return c

    def register_weight(self, name: str, n: int, k: int, data: bytes, dtype: int,
                        layout: int = LAYOUT_NONE, scales: Optional[Sequence[float]] = None) -> int:
        """data: bytes of n*k elements; scales: a list of floats. Returns the weight id.
        Copies them into scratch blocks of the arena, freed when gemmd has answered."""
        raw_name = name.encode()
        blocks = []
        try:
            d_off = self.alloc(len(data))
            blocks.append(d_off)
            self.write(d_off, data)
            s_off = 0
            if scales:
                s_off = self.alloc(4 * len(scales))
                blocks.append(s_off)
                self.write(s_off, struct.pack("<%df" % len(scales), *scales))
            name_off = self.alloc(len(raw_name), align=1)
            blocks.append(name_off)
            self.write(name_off, raw_name)
            c = self._call(lambda rid: register_sqe(rid, n, k, dtype, layout, d_off, s_off, name_off,
                                                    len(raw_name)))
            return c.result
        finally:
            for off in blocks:
                self.free(off)

    def weight_info(self, weight_id: int = 0, name: Optional[str] = None) -> tuple[int, int, int]:
        """(weight id, N, K) of a registered weight, by id or by name."""
        n_off = n_len = 0
        if not weight_id:
            raw = (name or "").encode()
            n_off, n_len = self.alloc(len(raw), align=1), len(raw)
            self.write(n_off, raw)
        try:
            c = self._call(lambda rid: weight_info_sqe(rid, weight_id, n_off, n_len))
        finally:
            if n_off:
                self.free(n_off)
        return c.batch_id, c.result & 0xFFFFFFFF, c.result >> 32

    def unregister_weight(self, weight_id: int) -> None:
        self._call(lambda rid: unregister_sqe(rid, weight_id))
