"""Regions of this process's memory that gemmd reads A from and writes D into in place
(docs/shm-protocol.md §7), for the shared-memory transport:

- :class:`SharedBuffer`: memory the client makes and hands gemmd by fd (a memfd; on the
  CPU backend, which maps it), opened once and closed by the user;
- :class:`DeviceRegions`: CUDA allocations that torch tensors lie in, opened by CUDA IPC
  handle at first use and kept open for later requests, at most `limit` at once (gemmd
  takes 32 a connection). When a new one needs room, the least recently used one that no
  request is using is closed.
"""

from __future__ import annotations

import collections
import fcntl
import mmap
import os
import threading
from typing import Any, Callable, Optional

import numpy as np

from .errors import GemmdError, StatusCode

OpenFd = Callable[[int, int], int]           # (fd, bytes) -> region id
OpenIpc = Callable[[bytes, int], int]        # (CUDA IPC handle, bytes) -> region id
CloseRegion = Callable[[int], None]


def address(arr: np.ndarray) -> int:
    return int(arr.__array_interface__["data"][0])


class SharedBuffer:
    """Memory shared with gemmd as one region: arrays made by :meth:`array` (or views of
    them) are read and written by gemmd in place when given to gemm() as A, a_scales or
    out, with no copy through the arena. Close it when done (or use it as a context
    manager); requests already sent with it still finish."""

    def __init__(self, nbytes: int, open_fd: OpenFd, close: CloseRegion,
                 on_close: Callable[["SharedBuffer"], None]):
        if nbytes <= 0:
            raise GemmdError(StatusCode.INVALID_ARGUMENT, "a shared buffer needs at least one byte")
        self.nbytes = nbytes
        fd = os.memfd_create("gemmd-region", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, nbytes)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)  # gemmd's mapping stays whole
            self._map = mmap.mmap(fd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            self.region_id = open_fd(fd, nbytes)
        except BaseException:
            if hasattr(self, "_map"):
                self._map.close()
            raise
        finally:
            os.close(fd)
        whole = np.frombuffer(self._map, dtype=np.uint8)
        self.base = address(whole)
        del whole
        self._close, self._on_close = close, on_close
        self.closed = False

    def array(self, shape: Any, dtype: Any, offset: int = 0) -> np.ndarray:
        """A C-contiguous numpy array of shape and dtype at offset (bytes) in the buffer."""
        dt = np.dtype(dtype)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        count = int(np.prod(shape, dtype=np.int64))
        if self.closed:
            raise GemmdError(StatusCode.FAILED_PRECONDITION, "the shared buffer is closed")
        if offset < 0 or offset + count * dt.itemsize > self.nbytes:
            raise GemmdError(StatusCode.INVALID_ARGUMENT, "%d bytes at %d do not fit the %d-byte buffer"
                             % (count * dt.itemsize, offset, self.nbytes))
        return np.frombuffer(self._map, dtype=dt, count=count, offset=offset).reshape(shape)

    def locate(self, arr: np.ndarray) -> Optional[int]:
        """arr's offset in the buffer, if all of it lies there contiguously."""
        if self.closed or not arr.flags.c_contiguous:
            return None
        at = address(arr) - self.base
        return at if 0 <= at and at + arr.nbytes <= self.nbytes else None

    def close(self) -> None:
        """Closes the region (gemmd unmaps it once its requests are done); this process's
        mapping goes once no array refers to it."""
        if self.closed:
            return
        self.closed = True
        self._on_close(self)
        try:
            self._close(self.region_id)
        finally:
            try:
                self._map.close()
            except BufferError:  # arrays still view it: they keep the mapping
                pass

    def __enter__(self) -> "SharedBuffer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Open:
    __slots__ = ("region_id", "base", "size", "users")

    def __init__(self, region_id: int, base: int, size: int):
        self.region_id, self.base, self.size, self.users = region_id, base, size, 0


class DeviceRegions:
    """CUDA allocations open as regions, by the driver's unique id of each allocation (a
    freed allocation's id never comes back, so a new allocation at the same address opens
    a new region)."""

    def __init__(self, open_ipc: OpenIpc, close: CloseRegion, limit: int = 16,
                 lookup: Optional[Callable[[int], Any]] = None,
                 handle: Optional[Callable[[int], bytes]] = None):
        if lookup is None or handle is None:
            from . import _cuda
            lookup, handle = lookup or _cuda.allocation, handle or _cuda.ipc_handle
        self._open_ipc, self._close, self._limit = open_ipc, close, limit
        self._lookup, self._handle = lookup, handle
        self._lock = threading.Lock()
        self._open: "collections.OrderedDict[int, _Open]" = collections.OrderedDict()

    def acquire(self, ptr: int, nbytes: int) -> tuple[_Open, int]:
        """(the region holding [ptr, ptr + nbytes), ptr's offset in it), counted as used
        until release()."""
        alloc = self._lookup(ptr)
        if ptr + nbytes > alloc.base + alloc.size:
            raise GemmdError(StatusCode.INVALID_ARGUMENT, "%d bytes at 0x%x run past their CUDA allocation "
                             "(0x%x, %d bytes)" % (nbytes, ptr, alloc.base, alloc.size))
        with self._lock:
            r = self._open.get(alloc.buffer_id)
            if r is None:
                self._make_room()
                r = _Open(self._open_ipc(self._handle(alloc.base), alloc.size), alloc.base, alloc.size)
                self._open[alloc.buffer_id] = r
            self._open.move_to_end(alloc.buffer_id)
            r.users += 1
            return r, ptr - r.base

    def _make_room(self) -> None:
        while len(self._open) >= self._limit:
            idle = next((k for k, r in self._open.items() if r.users == 0), None)
            if idle is None:
                raise GemmdError(StatusCode.RESOURCE_EXHAUSTED,
                                 "requests in flight use %d CUDA allocations, the most one client "
                                 "keeps open in gemmd at once" % self._limit)
            self._close(self._open.pop(idle).region_id)

    def release(self, r: _Open) -> None:
        with self._lock:
            r.users -= 1

    def __len__(self) -> int:
        return len(self._open)
