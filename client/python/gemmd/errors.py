"""The package's one exception type, :class:`GemmdError`, and gRPC's status codes.

Standard library only: the byte-level shared-memory module (:mod:`gemmd.shm`) uses it too.
"""

from __future__ import annotations

import concurrent.futures
import enum
from typing import Any, Optional


class StatusCode(enum.IntEnum):
    """gRPC's status codes. An IntEnum: ``StatusCode.NOT_FOUND == 5``, as the shared-memory
    completions carry them; :attr:`GemmdError.grpc_code` gives grpcio's own enum."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16

    @classmethod
    def of(cls, code: Any) -> "StatusCode":
        """The StatusCode of an int, a ``grpc.StatusCode`` or a StatusCode (UNKNOWN for
        anything else)."""
        if isinstance(code, cls):
            return code
        value = getattr(code, "value", code)  # grpc.StatusCode.X.value == (int, "name")
        if isinstance(value, tuple):
            value = value[0]
        try:
            return cls(int(value))
        except (TypeError, ValueError):
            return cls.UNKNOWN


class GemmdError(Exception):
    """A request gemmd refused or failed, a refused connection, or arguments this client
    refuses before sending (INVALID_ARGUMENT), over either transport.

    Attributes:
        code: the gRPC status code, a :class:`StatusCode` (compares equal to its int).
        message: gemmd's message, in words a caller can act on.
    """

    def __init__(self, code: Any, message: str):
        self.code = StatusCode.of(code)
        self.message = message
        super().__init__("%s: %s" % (self.code.name, message))

    @property
    def grpc_code(self) -> Any:
        """The code as grpcio's ``grpc.StatusCode``."""
        import grpc

        return {c.value[0]: c for c in grpc.StatusCode}.get(int(self.code), grpc.StatusCode.UNKNOWN)

    @classmethod
    def from_rpc_error(cls, error: Any) -> "GemmdError":
        """The GemmdError of a ``grpc.RpcError`` (a failed call)."""
        code = error.code() if callable(getattr(error, "code", None)) else StatusCode.UNKNOWN
        details = error.details() if callable(getattr(error, "details", None)) else str(error)
        return cls(code, details or "")

    def __reduce__(self) -> Any:  # picklable across processes
        return (type(self), (int(self.code), self.message))


def invalid(message: str) -> GemmdError:
    """An INVALID_ARGUMENT GemmdError for arguments refused before they are sent."""
    return GemmdError(StatusCode.INVALID_ARGUMENT, message)


def wait(future: "concurrent.futures.Future[Any]", timeout: Optional[float]) -> Any:
    """A future's result; DEADLINE_EXCEEDED when none comes within timeout (plus a margin
    for gemmd's own deadline, which answers first)."""
    if timeout is None:
        return future.result()
    try:
        return future.result(timeout + 10.0)
    except concurrent.futures.TimeoutError:
        raise GemmdError(StatusCode.DEADLINE_EXCEEDED, "no answer from gemmd within %g s" % timeout) from None
