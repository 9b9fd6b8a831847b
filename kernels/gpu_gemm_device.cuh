// Device helpers every grouped-GEMM kernel shares (sm90_gemm_simple.cu, wgmma/): integer
// ceiling and the output store, rounding FP32 to the table's output dtype (nearest even).
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

// Two values rounded to a 2-byte output dtype (FP16, else BF16), packed low then high.
__device__ __forceinline__ uint32_t gemmd_pack_pair(uint8_t out_dtype, float v0, float v1) {
  if (out_dtype == GEMMD_DTYPE_FP16) {
    const __half2 h = __floats2half2_rn(v0, v1);
    return *reinterpret_cast<const uint32_t *>(&h);
  }
  const __nv_bfloat162 b = __floats2bfloat162_rn(v0, v1);
  return *reinterpret_cast<const uint32_t *>(&b);
}

// Elements idx and idx + 1 of D = v0, v1: one 4-byte (BF16/FP16) or 8-byte (FP32) store
// when idx is even (the pair is aligned), else two.
__device__ __forceinline__ void gemmd_store_out_pair(uint8_t *d, uint8_t out_dtype, size_t idx, float v0, float v1) {
  if (idx % 2 != 0) {
    gemmd_store_out(d, out_dtype, idx, v0);
    gemmd_store_out(d, out_dtype, idx + 1, v1);
    return;
  }
  switch (out_dtype) {
    case GEMMD_DTYPE_FP32:
      reinterpret_cast<float2 *>(d)[idx / 2] = make_float2(v0, v1);
      break;
    case GEMMD_DTYPE_FP16:
      reinterpret_cast<__half2 *>(d)[idx / 2] = __floats2half2_rn(v0, v1);
      break;
    default:
      reinterpret_cast<__nv_bfloat162 *>(d)[idx / 2] = __floats2bfloat162_rn(v0, v1);
      break;
  }
}

#endif  // GEMMD_KERNELS_GPU_GEMM_DEVICE_CUH_
