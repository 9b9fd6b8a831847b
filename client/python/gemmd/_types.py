"""Enums and records of the API (docs/api.md §1-2), independent of the transport."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, NamedTuple


class DType(enum.IntEnum):
    """Element types, numbered as gemm.proto's ``DType``."""

    UNSPECIFIED = 0
    FP8_E4M3 = 1
    FP8_E5M2 = 2
    BF16 = 3
    FP16 = 4
    FP32 = 5

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return _ITEMSIZE[self]

    @property
    def is_fp8(self) -> bool:
        return self in (DType.FP8_E4M3, DType.FP8_E5M2)


_ITEMSIZE = {DType.UNSPECIFIED: 0, DType.FP8_E4M3: 1, DType.FP8_E5M2: 1, DType.BF16: 2,
             DType.FP16: 2, DType.FP32: 4}


class ScaleLayout(enum.IntEnum):
    """Scale layouts, numbered as gemm.proto's ``ScaleLayout`` (docs/api.md §1)."""

    NONE = 0            # every multiplier is 1
    TENSOR = 1          # one float for the whole matrix
    ROW = 2             # one float per row
    BLOCK_1X128 = 3     # A only: rows x ceil(cols/128)
    BLOCK_128X128 = 4   # B only: ceil(rows/128) x ceil(cols/128)

    def count(self, rows: int, cols: int) -> int:
        """How many scales a rows x cols matrix has in this layout."""
        kb = (cols + 127) // 128
        return {ScaleLayout.NONE: 0, ScaleLayout.TENSOR: 1, ScaleLayout.ROW: rows,
                ScaleLayout.BLOCK_1X128: rows * kb,
                ScaleLayout.BLOCK_128X128: ((rows + 127) // 128) * kb}[self]

    def shape(self, rows: int, cols: int) -> tuple[int, ...]:
        """The natural array shape of the scales: () for TENSOR, (rows,) for ROW, and the
        block grid for the block layouts; (0,) for NONE."""
        kb = (cols + 127) // 128
        return {ScaleLayout.NONE: (0,), ScaleLayout.TENSOR: (), ScaleLayout.ROW: (rows,),
                ScaleLayout.BLOCK_1X128: (rows, kb),
                ScaleLayout.BLOCK_128X128: ((rows + 127) // 128, kb)}[self]


_LAYOUT_NAMES = {
    "none": ScaleLayout.NONE, "tensor": ScaleLayout.TENSOR, "per_tensor": ScaleLayout.TENSOR,
    "row": ScaleLayout.ROW, "per_row": ScaleLayout.ROW, "1x128": ScaleLayout.BLOCK_1X128,
    "block_1x128": ScaleLayout.BLOCK_1X128, "128x128": ScaleLayout.BLOCK_128X128,
    "block_128x128": ScaleLayout.BLOCK_128X128,
}


def scale_layout(value: "ScaleLayout | int | str") -> ScaleLayout:
    """A ScaleLayout from itself, its number, or a name: "none", "tensor", "row", "1x128",
    "128x128" (also "SCALE_LAYOUT_BLOCK_1X128" and the like, any case)."""
    if isinstance(value, str):
        key = value.lower()
        key = key[len("scale_layout_"):] if key.startswith("scale_layout_") else key
        if key not in _LAYOUT_NAMES:
            from .errors import invalid
            raise invalid("unknown scale layout %r (none, tensor, row, 1x128, 128x128)" % value)
        return _LAYOUT_NAMES[key]
    return ScaleLayout(int(value))


class HealthStatus(enum.IntEnum):
    """grpc.health.v1's serving status."""

    UNKNOWN = 0
    SERVING = 1
    NOT_SERVING = 2
    SERVICE_UNKNOWN = 3


@dataclasses.dataclass(frozen=True)
class WeightInfo:
    """A registered weight B (N x K), as gemmd stores it: BF16/FP16/FP32 weights are stored
    as E4M3 with 128x128 scales. ``bytes`` counts its data and scales."""

    weight_id: int
    name: str
    n: int
    k: int
    dtype: DType
    scale_layout: ScaleLayout
    bytes: int
    #: "registered", "restored" (from gemmd's --weight-dir) or "preloaded" ("" when not
    #: known: over shared memory without ``control``, weight() knows only id, N and K)
    source: str = ""


@dataclasses.dataclass(frozen=True)
class RequestStats:
    """One GEMM's latency breakdown, from gemmd (nanoseconds)."""

    queue_ns: int        # accepted -> its batch dispatched
    compute_ns: int      # its batch's device time
    total_ns: int        # accepted -> answer ready
    batch_requests: int  # requests in its batch
    batch_groups: int    # GEMM groups in its batch
    batch_id: int


class Quantized(NamedTuple):
    """An FP8 matrix with its scales, as :func:`gemmd.quantize` makes it and as
    ``Client.gemm`` and ``Client.register_weight`` take it.

    ``data`` is rows x cols of float8_e4m3fn or float8_e5m2 (numpy, or torch when quantized
    from torch); ``scales`` is float32 shaped as :meth:`ScaleLayout.shape` says; real value
    = data x scale (a multiplier, as FP8 checkpoints' ``weight_scale_inv``)."""

    data: Any
    scales: Any
    layout: ScaleLayout
