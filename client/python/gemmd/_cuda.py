"""What the shared-memory transport needs to know of a CUDA pointer, from the CUDA driver
(libcuda, present wherever a GPU is): the allocation it lies in, that allocation's unique
id, and a CUDA IPC handle gemmd can open it by (docs/shm-protocol.md §7).

Through ctypes rather than torch's own sharing (``UntypedStorage._share_cuda_``), which
also makes a reference-count file and an event per call and holds the block back from
torch's allocator until a consumer that gemmd is not releases it."""

from __future__ import annotations

import ctypes
import threading
from typing import Optional

from .errors import GemmdError, StatusCode

_ATTR_CONTEXT = 1
_ATTR_MEMORY_TYPE = 2
_ATTR_BUFFER_ID = 7
_ATTR_IPC_CAPABLE = 10
_ATTR_RANGE_START = 11
_ATTR_RANGE_SIZE = 12
_MEMORYTYPE_DEVICE = 2
IPC_HANDLE_BYTES = 64

_lib: Optional[ctypes.CDLL] = None
_lib_lock = threading.Lock()


def _driver() -> ctypes.CDLL:
    global _lib
    with _lib_lock:
        if _lib is None:
            try:
                lib = ctypes.CDLL("libcuda.so.1")
            except OSError as e:
                raise GemmdError(StatusCode.FAILED_PRECONDITION,
                                 "CUDA tensors need the CUDA driver (libcuda.so.1): %s" % e) from e
            lib.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
            lib.cuPointerGetAttributes.argtypes = [ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64]
            lib.cuIpcGetMemHandle.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
            lib.cuCtxPushCurrent_v2.argtypes = [ctypes.c_void_p]
            lib.cuCtxPopCurrent_v2.argtypes = [ctypes.c_void_p]
            _lib = lib
        return _lib


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise GemmdError(StatusCode.INVALID_ARGUMENT, "%s: CUDA driver error %d" % (what, rc))


def _attr(lib: ctypes.CDLL, attr: int, ptr: int, ctype: type) -> int:
    out = ctype()
    _check(lib.cuPointerGetAttribute(ctypes.byref(out), attr, ptr), "cuPointerGetAttribute(%d)" % attr)
    return int(out.value or 0)


class Allocation:
    """The CUDA allocation a pointer lies in."""

    __slots__ = ("base", "size", "buffer_id")

    def __init__(self, base: int, size: int, buffer_id: int):
        self.base, self.size, self.buffer_id = base, size, buffer_id


# What allocation() asks of a pointer, in one cuPointerGetAttributes call (a request names up
# to three tensors, and every call through ctypes costs µs): each value lands in its own
# zeroed 8-byte slot, whatever its width (little-endian, so the narrower ones read right).
_QUERY = (_ATTR_MEMORY_TYPE, _ATTR_IPC_CAPABLE, _ATTR_RANGE_START, _ATTR_RANGE_SIZE, _ATTR_BUFFER_ID)
_QUERY_ATTRS = (ctypes.c_int * len(_QUERY))(*_QUERY)


def allocation(ptr: int) -> Allocation:
    """The device allocation holding ptr; INVALID_ARGUMENT for memory gemmd cannot open."""
    lib = _lib or _driver()
    values = (ctypes.c_uint64 * len(_QUERY))()
    slots = (ctypes.c_void_p * len(_QUERY))(*(ctypes.addressof(values) + 8 * i for i in range(len(_QUERY))))
    _check(lib.cuPointerGetAttributes(len(_QUERY), _QUERY_ATTRS, slots, ptr), "cuPointerGetAttributes")
    memory_type, ipc_capable, start, size, buffer_id = values
    if memory_type != _MEMORYTYPE_DEVICE:  # not a CUDA pointer at all reads as 0
        raise GemmdError(StatusCode.INVALID_ARGUMENT, "0x%x is not device memory" % ptr)
    if not ipc_capable:
        raise GemmdError(StatusCode.INVALID_ARGUMENT,
                         "the allocation at 0x%x cannot be shared by a CUDA IPC handle (is torch's "
                         "allocator set to expandable_segments? gemmd opens cudaMalloc blocks)" % ptr)
    return Allocation(start, size, buffer_id)


def ipc_handle(base: int) -> bytes:
    """The cudaIpcMemHandle_t of the allocation starting at base, made in its own context."""
    lib = _driver()
    ctx = ctypes.c_void_p(_attr(lib, _ATTR_CONTEXT, base, ctypes.c_void_p))
    _check(lib.cuCtxPushCurrent_v2(ctx), "cuCtxPushCurrent")
    try:
        handle = (ctypes.c_ubyte * IPC_HANDLE_BYTES)()
        _check(lib.cuIpcGetMemHandle(ctypes.byref(handle), base), "cuIpcGetMemHandle")
    finally:
        popped = ctypes.c_void_p()
        lib.cuCtxPopCurrent_v2(ctypes.byref(popped))
    return bytes(handle)
