"""gemmd's Python client: FP8 GEMMs D = A·Bᵀ served by gemmd, over gRPC or shared memory.

    import gemmd, numpy as np
    with gemmd.Client("localhost:50051") as c:          # or "unix:///run/gemmd/gemmd.sock"
        c.register_weight("w", np.random.randn(4096, 4096).astype(np.float32))
        d = c.gemm(np.random.randn(8, 4096).astype(np.float32), "w", out_dtype="fp32")

See README.md beside this package.
"""

from ._types import DType, HealthStatus, Quantized, RequestStats, ScaleLayout, WeightInfo
from ._regions import SharedBuffer
from .client import Client, GemmStream, WeightRef
from .errors import GemmdError, StatusCode
from .quant import dequantize, fp8_max, quantize
from . import aio  # noqa: E402 - after Client, which it wraps

__version__ = "0.1.0"

__all__ = ["Client", "GemmStream", "GemmdError", "StatusCode", "DType", "ScaleLayout",
           "HealthStatus", "WeightInfo", "RequestStats", "Quantized", "WeightRef", "SharedBuffer", "quantize",
           "dequantize", "fp8_max", "aio", "__version__"]
