"""A gemmd shared-memory client in pure Python (standard library only), written from
docs/shm-protocol.md: the proof that the document is enough to write a client.

    with Client("/run/gemmd/gemmd.sock") as c:
        a = c.alloc(m * k); c.write(a, a_bytes)          # operands live in the arena
        d = c.alloc(m * n * 2)
        r = c.gemm(m=m, k=k, a=(a, DTYPE_E4M3, LAYOUT_NONE, None), weight_id=wid, d=d)
        result_bytes = c.read(d, r.d_bytes)

Not thread-safe: one Client per thread.
"""

import mmap
import os
import select
import socket
import struct
import time

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
SERVER_IDLE, CLIENT_WAITING, CQ_SEQ = 512, 576, 640

HELLO = struct.Struct("<8sIIQII")               # 32 bytes
WELCOME = struct.Struct("<8sIiQII224s")          # 256 bytes
GEOMETRY = struct.Struct("<8sIIQIIIIQQII")       # header bytes 0..64
SQE = struct.Struct("<8BIIIIQQQQQQQQ40x")        # 128 bytes
CQE = struct.Struct("<QiIQQQQIIQ64s")            # 128 bytes


class ShmError(Exception):
    """A refused connection or a failed request: .code is the gRPC status code."""

    def __init__(self, code, message):
        super().__init__("%d: %s" % (code, message))
        self.code = code
        self.message = message


class Completion:
    __slots__ = ("request_id", "status", "opcode", "result", "queue_ns", "compute_ns",
                 "total_ns", "batch_requests", "batch_groups", "batch_id", "message")

    def __init__(self, raw):
        (self.request_id, self.status, self.opcode, self.result, self.queue_ns, self.compute_ns,
         self.total_ns, self.batch_requests, self.batch_groups, self.batch_id, msg) = CQE.unpack(raw)
        self.message = msg.split(b"\0", 1)[0].decode("utf-8", "replace")

    @property
    def d_bytes(self):
        return self.result


def scale_count(layout, rows, cols):
    kb = (cols + 127) // 128
    return {LAYOUT_NONE: 0, LAYOUT_TENSOR: 1, LAYOUT_ROW: rows, LAYOUT_1X128: rows * kb,
            LAYOUT_128X128: ((rows + 127) // 128) * kb}[layout]


class Client:
    def __init__(self, path, arena_bytes=0, entries=0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.connect(path)
        self.sock.send(HELLO.pack(MAGIC, VERSION, 0, arena_bytes, entries, 0))
        msg, fds, _flags, _addr = socket.recv_fds(self.sock, WELCOME.size, 3)
        magic, version, status, size, self.client_id, self.max_inflight, text = WELCOME.unpack(msg)
        if status != 0:
            for fd in fds:
                os.close(fd)
            self.sock.close()
            raise ShmError(status, text.split(b"\0", 1)[0].decode())
        if magic != MAGIC or version != VERSION or len(fds) != 3:
            raise ShmError(13, "unexpected WELCOME")
        arena_fd, self.sq_efd, self.cq_efd = fds
        self.arena = mmap.mmap(arena_fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(arena_fd)
        # Ring cursors are read and written as whole aligned words (a typed memoryview),
        # never byte by byte as struct's "<I" does: gemmd reads them concurrently, and a
        # torn cursor looks like a protocol violation (gemmd closes such a client).
        self._words = memoryview(self.arena).cast("I")
        (_m, _v, _hb, self.size, self.sq_off, self.entries, self.cq_off, _cqn, self.data_off,
         self.data_bytes, _id, _mi) = GEOMETRY.unpack_from(self.arena, 0)
        self._next = self.data_off  # a bump allocator over the data region
        self._next_id = 1
        self._done = {}

    # ---- the arena ----------------------------------------------------------------------
    def alloc(self, nbytes, align=256):
        off = (self._next + align - 1) // align * align
        if off + nbytes > self.data_off + self.data_bytes:
            raise MemoryError("arena full: %d bytes more" % nbytes)
        self._next = off + nbytes
        return off

    def reset(self):
        """Forget every allocation (call only with nothing in flight)."""
        self._next = self.data_off

    def write(self, off, data):
        self.arena[off:off + len(data)] = data

    def read(self, off, n):
        return bytes(self.arena[off:off + n])

    def _u32(self, off):
        return self._words[off >> 2]

    def _set_u32(self, off, v):
        self._words[off >> 2] = v & 0xFFFFFFFF

    # ---- rings --------------------------------------------------------------------------
    def submit(self, sqe_bytes):
        """Queues one 128-byte entry; waits for room first."""
        while (self._u32(SQ_TAIL) - self._u32(CQ_HEAD)) & 0xFFFFFFFF >= self.entries:
            self._collect(block=True)
        tail = self._u32(SQ_TAIL)
        slot = self.sq_off + (tail % self.entries) * ENTRY
        self.arena[slot:slot + ENTRY] = sqe_bytes
        self._set_u32(SQ_TAIL, tail + 1)
        if self._u32(SERVER_IDLE):
            os.eventfd_write(self.sq_efd, 1)

    def submit_many(self, entries):
        """Queues several entries with one tail update and one doorbell, so that gemmd
        sees them together (and can batch them)."""
        tail = self._u32(SQ_TAIL)
        while (tail + len(entries) - self._u32(CQ_HEAD)) & 0xFFFFFFFF > self.entries:
            self._collect(block=True)
        for i, raw in enumerate(entries):
            slot = self.sq_off + ((tail + i) % self.entries) * ENTRY
            self.arena[slot:slot + ENTRY] = raw
        self._set_u32(SQ_TAIL, tail + len(entries))
        if self._u32(SERVER_IDLE):
            os.eventfd_write(self.sq_efd, 1)

    def gemm_entry(self, m, k, a, d, d_capacity, weight_id=0, b=None, n=0, out_dtype=0,
                   timeout_us=0, request_id=None):
        """(request id, the 128-byte GEMM entry) without submitting it."""
        rid = self._new_id() if request_id is None else request_id
        a_off, a_dt, a_l, a_s = a
        b_off, b_dt, b_l, b_s = b if b is not None else (0, 0, 0, 0)
        return rid, SQE.pack(OP_GEMM, a_dt, a_l, out_dtype, 1 if b is not None else 0, b_dt, b_l, 0,
                             m, n, k, timeout_us, rid, weight_id, a_off, a_s or 0, b_off, b_s or 0,
                             d, d_capacity)

    def _collect(self, block):
        """Consumes every published completion; with block, sleeps (at most a second) when
        none has come yet. Returns how many it consumed."""
        got = self._consume()
        if got or not block:
            return got
        self._set_u32(CLIENT_WAITING, 1)
        if self._u32(CQ_TAIL) == self._u32(CQ_HEAD):
            select.select([self.cq_efd], [], [], 1.0)
            try:
                os.eventfd_read(self.cq_efd)
            except BlockingIOError:
                pass
        self._set_u32(CLIENT_WAITING, 0)
        return self._consume()

    def _consume(self):
        got = 0
        head, tail = self._u32(CQ_HEAD), self._u32(CQ_TAIL)
        while head != tail:
            slot = self.cq_off + (head % self.entries) * ENTRY
            c = Completion(self.arena[slot:slot + ENTRY])
            self._done[c.request_id] = c
            head = (head + 1) & 0xFFFFFFFF
            self._set_u32(CQ_HEAD, head)
            got += 1
        return got

    def wait(self, request_id, timeout=60.0):
        deadline = time.monotonic() + timeout
        while request_id not in self._done:
            if time.monotonic() > deadline:
                raise TimeoutError("no completion for request %d" % request_id)
            self._collect(block=True)
        return self._done.pop(request_id)

    def _new_id(self):
        rid = self._next_id
        self._next_id += 1
        return rid

    # ---- operations ---------------------------------------------------------------------
    def gemm_async(self, m, k, a, d, d_capacity, weight_id=0, b=None, n=0, out_dtype=0,
                   timeout_us=0, request_id=None):
        """a, b: (data offset, dtype, layout, scales offset or 0). Returns the request id."""
        rid, raw = self.gemm_entry(m, k, a, d, d_capacity, weight_id, b, n, out_dtype, timeout_us,
                                   request_id)
        self.submit(raw)
        return rid

    def gemm(self, **kw):
        c = self.wait(self.gemm_async(**kw))
        if c.status != 0:
            raise ShmError(c.status, c.message)
        return c

    def register_weight(self, name, n, k, data, dtype, layout=LAYOUT_NONE, scales=None):
        """data: bytes of n*k elements; scales: a list of floats. Returns the weight id."""
        self.reset()
        d_off = self.alloc(len(data))
        self.write(d_off, data)
        s_off = 0
        if scales:
            s_off = self.alloc(4 * len(scales))
            self.write(s_off, struct.pack("<%df" % len(scales), *scales))
        raw_name = name.encode()
        name_off = self.alloc(len(raw_name), align=1)
        self.write(name_off, raw_name)
        rid = self._new_id()
        self.submit(SQE.pack(OP_REGISTER_WEIGHT, dtype, layout, 0, 0, 0, 0, 0, n, 0, k, 0, rid, 0,
                             d_off, s_off, 0, 0, name_off, len(raw_name)))
        c = self.wait(rid)
        self.reset()
        if c.status != 0:
            raise ShmError(c.status, c.message)
        return c.result

    def weight_info(self, weight_id=0, name=None):
        """(weight id, N, K) of a registered weight, by id or by name."""
        n_off = n_len = 0
        if not weight_id:
            raw = name.encode()
            n_off, n_len = self.alloc(len(raw), align=1), len(raw)
            self.write(n_off, raw)
        rid = self._new_id()
        self.submit(SQE.pack(OP_WEIGHT_INFO, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, rid, weight_id, 0, 0,
                             0, 0, n_off, n_len))
        c = self.wait(rid)
        if c.status != 0:
            raise ShmError(c.status, c.message)
        return c.batch_id, c.result & 0xFFFFFFFF, c.result >> 32

    def unregister_weight(self, weight_id):
        rid = self._new_id()
        self.submit(SQE.pack(OP_UNREGISTER_WEIGHT, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, rid, weight_id,
                             0, 0, 0, 0, 0, 0))
        c = self.wait(rid)
        if c.status != 0:
            raise ShmError(c.status, c.message)

    def close(self):
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
