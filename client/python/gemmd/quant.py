"""Quantization to FP8 as docs/api.md §1 defines it and gemmd does it (kernels/quantize.c).

For each scale block (the whole matrix, a row, 1x128 or 128x128 elements) the scale is
amax / fp8_max in float32, amax being the largest finite |value| of the block; an all-zero
block gets scale 1, and no scale is below FLT_MIN (2^-126). Each element becomes
value / scale rounded to nearest even and saturated to +-fp8_max; NaN becomes 0x7F; +-Inf
becomes NaN in E4M3 (which has no Inf) and +-Inf in E5M2. Bit for bit what gemmd gives a
BF16/FP16/FP32 A (1x128) or weight (128x128) it quantizes itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._arrays import NP_DTYPE, is_torch, like, to_numpy, torch_has_fp8
from ._types import DType, Quantized, ScaleLayout, scale_layout
from .errors import invalid

__all__ = ["quantize", "dequantize", "fp8_max", "Quantized"]

_FLT_MIN = np.float32(2.0 ** -126)
_FP8_NAMES = {"e4m3": DType.FP8_E4M3, "fp8_e4m3": DType.FP8_E4M3, "float8_e4m3fn": DType.FP8_E4M3,
              "e5m2": DType.FP8_E5M2, "fp8_e5m2": DType.FP8_E5M2, "float8_e5m2": DType.FP8_E5M2}


def _fp8(dtype: Any) -> DType:
    if isinstance(dtype, str) and dtype.lower() in _FP8_NAMES:
        return _FP8_NAMES[dtype.lower()]
    if isinstance(dtype, DType) and dtype.is_fp8:
        return dtype
    try:
        for dt in (DType.FP8_E4M3, DType.FP8_E5M2):
            if np.dtype(dtype) == NP_DTYPE[dt]:
                return dt
    except TypeError:
        pass
    raise invalid("FP8 dtype %r: e4m3 or e5m2" % (dtype,))


def fp8_max(dtype: Any = "e4m3") -> float:
    """The largest finite value of an FP8 dtype: 448 (E4M3) or 57344 (E5M2)."""
    return 448.0 if _fp8(dtype) == DType.FP8_E4M3 else 57344.0


def encode(values: np.ndarray, dtype: Any = "e4m3") -> np.ndarray:
    """float32 values to FP8, rounded to nearest even and saturated (gemmd's encoder:
    NaN -> 0x7F, +-Inf -> NaN in E4M3 and +-Inf in E5M2)."""
    dt = _fp8(dtype)
    v = np.asarray(values, dtype=np.float32)
    m = np.float32(fp8_max(dt))
    codes = np.clip(v, -m, m).astype(NP_DTYPE[dt]).view(np.uint8)
    special = ~np.isfinite(v)
    if special.any():
        sign = (np.signbit(v).astype(np.uint8) << 7).astype(np.uint8)
        inf_code = np.uint8(0x7F if dt == DType.FP8_E4M3 else 0x7C)
        codes = np.where(np.isnan(v), np.uint8(0x7F),
                         np.where(np.isinf(v), inf_code | sign, codes)).astype(np.uint8)
    return codes.view(NP_DTYPE[dt])


def _blocks(layout: ScaleLayout, rows: int, cols: int) -> tuple[int, int]:
    return {ScaleLayout.TENSOR: (rows, cols), ScaleLayout.ROW: (1, cols),
            ScaleLayout.BLOCK_1X128: (1, 128), ScaleLayout.BLOCK_128X128: (128, 128)}[layout]


def _grid(scales: np.ndarray, layout: ScaleLayout, rows: int, cols: int) -> np.ndarray:
    """Per-element multipliers (float32, rows x cols) of a block grid of scales."""
    if layout == ScaleLayout.NONE:
        return np.ones((rows, cols), np.float32)
    br, bc = _blocks(layout, rows, cols)
    g = np.asarray(scales, np.float32).reshape(-(-rows // br), -(-cols // bc))
    return np.repeat(np.repeat(g, br, axis=0), bc, axis=1)[:rows, :cols]


def quantize(x: Any, layout: Any = "1x128", dtype: Any = "e4m3") -> Quantized:
    """Quantizes a rows x cols matrix (numpy or CPU torch; any float dtype, taken as float32)
    to FP8 with scales of ``layout``: "tensor", "row", "1x128" (for A) or "128x128" (for
    a weight), or "none" (values saturate, no scales).

    Returns a :class:`Quantized` that ``Client.gemm`` and ``Client.register_weight`` take
    as they are: torch tensors when x is torch and torch has float8 dtypes (>= 2.1), numpy
    arrays otherwise. Scales are shaped () for tensor, (rows,)
    for row, and the block grid for the block layouts.
    """
    lay = scale_layout(layout)
    dt = _fp8(dtype)
    torch_like = is_torch(x) and torch_has_fp8()
    v = np.asarray(to_numpy(x), dtype=np.float32)
    if v.ndim != 2 or 0 in v.shape:
        raise invalid("quantize takes a matrix with at least one row and column, not shape %s"
                      % (v.shape,))
    rows, cols = v.shape
    if lay == ScaleLayout.NONE:
        return Quantized(like(encode(v, dt), torch_like), like(np.zeros(0, np.float32), torch_like), lay)
    br, bc = _blocks(lay, rows, cols)
    nr, nc = -(-rows // br), -(-cols // bc)
    mag = np.abs(v)
    mag[~np.isfinite(mag)] = 0
    padded = np.zeros((nr * br, nc * bc), np.float32)
    padded[:rows, :cols] = mag
    amax = padded.reshape(nr, br, nc, bc).max(axis=(1, 3))
    with np.errstate(divide="ignore", invalid="ignore"):
        s = amax / np.float32(fp8_max(dt))
    s = np.where(amax > 0, np.maximum(s, _FLT_MIN), np.float32(1)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        codes = encode(v / _grid(s, lay, rows, cols), dt)
    scales = s.reshape(lay.shape(rows, cols))
    return Quantized(like(codes, torch_like), like(scales, torch_like), lay)


def dequantize(q: Quantized, dtype: Any = np.float32) -> Any:
    """The real values of a Quantized (data x scales), as float32 (or dtype), numpy or
    torch as q holds."""
    torch_like = is_torch(q.data)
    data = to_numpy(q.data)
    rows, cols = data.shape
    lay = scale_layout(q.layout)
    s = to_numpy(q.scales)
    out = data.astype(np.float32) * _grid(s, lay, rows, cols)
    return like(out.astype(dtype), torch_like)

