// Device helpers every grouped-GEMM kernel shares (sm90_gemm_*.cu): integer ceiling and
// the output store, rounding FP32 to the table's output dtype (nearest even).
#ifndef GEMMD_KERNELS_GPU_GEMM_DEVICE_CUH_
#define GEMMD_KERNELS_GPU_GEMM_DEVICE_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/operand.h"

__device__ __forceinline__ uint32_t gemmd_ceil_div(uint32_t x, uint32_t y) { return (x + y - 1) / y; }

// Element idx of D (row-major, out_dtype) = v.
__device__ __forceinline__ void gemmd_store_out(uint8_t *d, uint8_t out_dtype, size_t idx, float v) {
  switch (out_dtype) {
    case GEMMD_DTYPE_FP32:
      reinterpret_cast<float *>(d)[idx] = v;
      break;
    case GEMMD_DTYPE_FP16:
      reinterpret_cast<__half *>(d)[idx] = __float2half_rn(v);
      break;
    default:
      reinterpret_cast<__nv_bfloat16 *>(d)[idx] = __float2bfloat16_rn(v);
      break;
  }
}

#endif  // GEMMD_KERNELS_GPU_GEMM_DEVICE_CUH_
