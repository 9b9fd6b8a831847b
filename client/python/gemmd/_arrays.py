"""numpy and torch arrays to and from the wire: dtypes, operands, results."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import ml_dtypes
import numpy as np

from ._types import DType, Quantized, ScaleLayout, scale_layout
from .errors import invalid

NP_DTYPE = {
    DType.FP8_E4M3: np.dtype(ml_dtypes.float8_e4m3fn),
    DType.FP8_E5M2: np.dtype(ml_dtypes.float8_e5m2),
    DType.BF16: np.dtype(ml_dtypes.bfloat16),
    DType.FP16: np.dtype(np.float16),
    DType.FP32: np.dtype(np.float32),
}
_FROM_NP = {v: k for k, v in NP_DTYPE.items()}

# Output dtypes by name.
_OUT_NAMES = {
    "bf16": DType.BF16, "bfloat16": DType.BF16, "fp16": DType.FP16, "float16": DType.FP16,
    "half": DType.FP16, "fp32": DType.FP32, "float32": DType.FP32, "float": DType.FP32,
}


def _torch() -> Any:
    return sys.modules.get("torch")


def is_torch(x: Any) -> bool:
    """Whether x is a torch.Tensor (without importing torch when nobody has)."""
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def _torch_fp8() -> dict:
    torch = _torch()
    out = {}
    for name, np_dt in (("float8_e4m3fn", ml_dtypes.float8_e4m3fn), ("float8_e5m2", ml_dtypes.float8_e5m2)):
        if hasattr(torch, name):
            out[getattr(torch, name)] = np.dtype(np_dt)
    return out


def torch_has_fp8() -> bool:
    """Whether the loaded torch has float8 dtypes (torch >= 2.1)."""
    return bool(_torch_fp8())


def to_numpy(x: Any) -> np.ndarray:
    """A numpy view of a numpy array or a CPU torch tensor (no copy: torch's bfloat16 and
    float8 become ml_dtypes' through a bit view; a GPU tensor is copied to the host first);
    other array-likes through np.asarray."""
    if isinstance(x, np.ndarray):
        return x
    if is_torch(x):
        torch = _torch()
        # A GPU tensor comes to the host (a copy): gRPC carries bytes, and a weight lives
        # in gemmd. Over shared memory, A on the GPU goes by device_operand instead.
        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        fp8 = _torch_fp8()
        if x.dtype in fp8:
            return x.view(torch.uint8).numpy().view(fp8[x.dtype])
        return x.numpy()
    return np.asarray(x)


def is_cuda(x: Any) -> bool:
    """Whether x is a torch tensor on a CUDA device."""
    return is_torch(x) and x.device.type == "cuda"


def torch_dtype(dt: DType) -> Any:
    """The torch dtype of a wire DType."""
    torch = _torch()
    table = {DType.BF16: torch.bfloat16, DType.FP16: torch.float16, DType.FP32: torch.float32,
             DType.FP8_E4M3: getattr(torch, "float8_e4m3fn", None),
             DType.FP8_E5M2: getattr(torch, "float8_e5m2", None)}
    if table.get(dt) is None:
        raise invalid("this torch has no dtype for %s" % dt.name)
    return table[dt]


def _wire_of_torch(dt: Any) -> DType:
    torch = _torch()
    for wire in (DType.FP8_E4M3, DType.FP8_E5M2, DType.BF16, DType.FP16, DType.FP32):
        if getattr(torch, {DType.FP8_E4M3: "float8_e4m3fn", DType.FP8_E5M2: "float8_e5m2",
                           DType.BF16: "bfloat16", DType.FP16: "float16",
                           DType.FP32: "float32"}[wire], None) == dt:
            return wire
    raise invalid("a has dtype %s; on the GPU gemmd takes float8_e4m3fn, float8_e5m2, bfloat16, "
                  "float16 and float32" % dt)


def device_operand(x: Any, scales: Any, layout: Any) -> Operand:
    """A, a CUDA tensor, for gemmd to read where it lies (docs/shm-protocol.md §7): its data
    as a contiguous 2-D tensor on the GPU, and its scales, also on the GPU, as flat float32.
    gemmd reads A on the GPU only as FP8 with 1x128 scales, or BF16/FP16/FP32 without
    scales (which it quantizes there)."""
    if isinstance(x, Quantized):
        if scales is not None or layout is not None:
            raise invalid("a is a Quantized, which carries its own scales and layout")
        x, scales, layout = x.data, x.scales, x.layout
    dt = _wire_of_torch(x.dtype)
    if x.dim() < 1:
        raise invalid("a is a scalar; A is (..., K)")
    lead = tuple(x.shape[:-1])
    data = x.detach().reshape(-1, x.shape[-1]).contiguous()
    rows, cols = data.shape
    if rows == 0 or cols == 0:
        raise invalid("a has shape %s; gemmd needs at least one row and one column" % (tuple(x.shape),))
    if scales is not None and not is_cuda(scales):
        raise invalid("a is on %s and its scales are not: give a_scales on the same device" % x.device)
    lay = scale_layout(layout) if layout is not None else (
        ScaleLayout.NONE if scales is None else _infer_layout(np.empty(tuple(scales.shape), np.float32),
                                                            lead, rows, cols, "a"))
    if dt.is_fp8 and lay != ScaleLayout.BLOCK_1X128 or not dt.is_fp8 and lay != ScaleLayout.NONE:
        raise invalid("A on the GPU is FP8 with 1x128 scales on the GPU, or BF16/FP16/FP32 without "
                      "scales (gemmd quantizes it there); this one is %s with SCALE_LAYOUT_%s: quantize "
                      "it per 1x128 block, or send it from the host" % (dt.name, lay.name))
    flat = _torch().zeros(0)
    if lay != ScaleLayout.NONE:
        flat = scales.detach().to(device=x.device, dtype=_torch().float32).reshape(-1).contiguous()
        if flat.numel() != lay.count(rows, cols):
            raise invalid("a_scales has %d values; SCALE_LAYOUT_%s needs %d for a %dx%d A"
                          % (flat.numel(), lay.name, lay.count(rows, cols), rows, cols))
    return Operand(data, dt, lay, flat, lead, x.device)


def to_torch(arr: np.ndarray) -> Any:
    """A torch tensor sharing arr's memory (bfloat16 and float8 through a bit view)."""
    import torch

    if arr.dtype == NP_DTYPE[DType.BF16]:
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    for t_dt, np_dt in _torch_fp8().items():
        if arr.dtype == np_dt:
            return torch.from_numpy(arr.view(np.uint8)).view(t_dt)
    if arr.dtype in (NP_DTYPE[DType.FP8_E4M3], NP_DTYPE[DType.FP8_E5M2]):
        raise invalid("this torch (%s) has no %s dtype (torch >= 2.1 has)" % (torch.__version__, arr.dtype))
    return torch.from_numpy(arr)


def like(arr: np.ndarray, torch_like: bool) -> Any:
    """arr as numpy, or as torch when the caller gave torch."""
    return to_torch(arr) if torch_like else arr


def wire_array(x: Any, what: str) -> tuple[np.ndarray, DType]:
    """(numpy array, wire dtype) of x; float64 is converted to float32."""
    arr = to_numpy(x)
    dt = _FROM_NP.get(arr.dtype)
    if dt is not None:
        return arr, dt
    if arr.dtype == np.float64:
        return arr.astype(np.float32), DType.FP32
    hint = ""
    if arr.dtype == np.uint8:
        hint = " (FP8 codes held as uint8: view them as ml_dtypes.float8_e4m3fn or float8_e5m2)"
    raise invalid("%s has dtype %s; gemmd takes float8_e4m3fn, float8_e5m2, bfloat16, float16 "
                  "and float32 (float64 is sent as float32)%s" % (what, arr.dtype, hint))


def out_dtype(value: Any) -> DType:
    """The output DType of out_dtype=: None (BF16), a DType, a name ("bf16", "float32",
    ...), a numpy dtype (ml_dtypes.bfloat16, np.float16, np.float32) or a torch dtype."""
    if value is None:
        return DType.BF16
    if isinstance(value, str) and value.lower() in _OUT_NAMES:
        return _OUT_NAMES[value.lower()]
    if isinstance(value, (DType, int)) and not isinstance(value, bool):
        dt = DType(int(value))
        dt = DType.BF16 if dt == DType.UNSPECIFIED else dt
    elif _torch() is not None and isinstance(value, _torch().dtype):
        torch = _torch()
        dt = {torch.bfloat16: DType.BF16, torch.float16: DType.FP16,
              torch.float32: DType.FP32}.get(value, DType.UNSPECIFIED)
    else:
        try:
            dt = _FROM_NP.get(np.dtype(value), DType.UNSPECIFIED)
        except TypeError:
            dt = DType.UNSPECIFIED
    if dt not in (DType.BF16, DType.FP16, DType.FP32):
        raise invalid("out_dtype %r: gemmd writes bfloat16, float16 or float32" % (value,))
    return dt


@dataclasses.dataclass
class Operand:
    """A matrix ready to send: 2-D data in a wire dtype and its scales, flat float32; numpy
    arrays, or torch tensors on the GPU when device is set."""

    data: Any
    dtype: DType
    layout: ScaleLayout
    scales: Any
    lead: tuple  # A's shape before its last axis (the output's leading shape)
    device: Any = None  # a torch CUDA device: data and scales are tensors there (device_operand)

    @property
    def rows(self) -> int:
        return self.data.shape[0]

    @property
    def cols(self) -> int:
        return self.data.shape[1]

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * self.dtype.itemsize


def _infer_layout(s: np.ndarray, lead: tuple, rows: int, cols: int, role: str) -> ScaleLayout:
    kb = (cols + 127) // 128
    if s.shape in ((), (1,), (1, 1)):
        return ScaleLayout.TENSOR
    if role == "a":
        if s.shape in (lead, lead + (1,)):
            return ScaleLayout.ROW
        if s.shape == lead + (kb,):
            return ScaleLayout.BLOCK_1X128
    else:
        if s.shape in ((rows,), (rows, 1)):
            return ScaleLayout.ROW
        if s.shape == ((rows + 127) // 128, kb):
            return ScaleLayout.BLOCK_128X128
    raise invalid("%s.scales shaped %s fit no scale layout of a %dx%d %s; give layout= (docs/api.md §1: "
                  "tensor (), row (rows,), %s)" % (
                      role, s.shape, rows, cols, "A" if role == "a" else "B",
                      "1x128 (rows, ceil(K/128))" if role == "a" else
                      "128x128 (ceil(N/128), ceil(K/128))"))


_ALLOWED = {
    "a": (ScaleLayout.NONE, ScaleLayout.TENSOR, ScaleLayout.ROW, ScaleLayout.BLOCK_1X128),
    "b": (ScaleLayout.NONE, ScaleLayout.TENSOR, ScaleLayout.ROW, ScaleLayout.BLOCK_128X128),
}


def operand(x: Any, scales: Any, layout: Any, role: str) -> tuple[Operand, bool]:
    """(Operand, whether x was torch) of an A ("a": any shape (..., K)) or a B ("b":
    N x K). scales and layout as the API takes them; a :class:`Quantized` carries its own."""
    if isinstance(x, Quantized):
        if scales is not None or layout is not None:
            raise invalid("%s is a Quantized, which carries its own scales and layout" % role)
        x, scales, layout = x.data, x.scales, x.layout
    torch_like = is_torch(x)
    arr, dt = wire_array(x, role)
    if role == "b" and arr.ndim != 2:
        raise invalid("b has shape %s; a weight is N x K" % (arr.shape,))
    if arr.ndim < 1:
        raise invalid("a is a scalar; A is (..., K)")
    lead = tuple(arr.shape[:-1])
    data = arr.reshape(-1, arr.shape[-1]) if arr.ndim != 2 else arr
    rows, cols = data.shape
    if rows == 0 or cols == 0:
        raise invalid("%s has shape %s; gemmd needs at least one row and one column"
                      % (role, arr.shape))
    s = None if scales is None else np.asarray(to_numpy(scales), dtype=np.float32)
    lay = scale_layout(layout) if layout is not None else (
        ScaleLayout.NONE if s is None else _infer_layout(s, lead, rows, cols, role))
    if lay not in _ALLOWED[role]:
        raise invalid("SCALE_LAYOUT_%s is not allowed for %s" % (lay.name, "A" if role == "a" else "B"))
    want = lay.count(rows, cols)
    if lay == ScaleLayout.NONE:
        if s is not None and s.size:
            raise invalid("%s.scales given with SCALE_LAYOUT_NONE" % role)
        flat = np.zeros(0, np.float32)
    else:
        if s is None:
            raise invalid("SCALE_LAYOUT_%s needs %s.scales" % (lay.name, role))
        flat = np.ascontiguousarray(s.reshape(-1))
        if flat.size != want:
            raise invalid("%s.scales has %d values; SCALE_LAYOUT_%s needs %d for a %dx%d matrix"
                          % (role, flat.size, lay.name, want, rows, cols))
    return Operand(data, dt, lay, flat, lead), torch_like
