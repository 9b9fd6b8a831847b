/* GPU quantizers (sm_90a): BF16/FP16/FP32 -> FP8 with docs/api.md §1 block scales, bit for bit
 * what kernels/quantize.h computes on the CPU.
 *
 *   A: 1×128 scales, rows × ceil(cols/128) floats (activations, per batch).
 *   B: 128×128 scales, ceil(rows/128) × ceil(cols/128) floats (weights, at registration).
 *
 * Pointers are device memory; work is queued on `stream` and nothing waits for it.
 * Returns 0, GEMMD_EINVAL (bad dtype, null pointer, stride < cols) or GEMMD_EDEVICE
 * (the launch failed). Never throws, never exits.
 */
#ifndef GEMMD_KERNELS_GPU_QUANTIZE_H_
#define GEMMD_KERNELS_GPU_QUANTIZE_H_

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/operand.h"

#ifdef __cplusplus
extern "C" {
#endif

int gemmd_gpu_quantize_1x128(const void *src, gemmd_dtype_t src_dtype, size_t src_ld,
                             uint32_t rows, uint32_t cols, gemmd_dtype_t fp8, uint8_t *dst,
                             size_t dst_ld, float *scales, cudaStream_t stream);

int gemmd_gpu_quantize_128x128(const void *src, gemmd_dtype_t src_dtype, size_t src_ld,
                               uint32_t rows, uint32_t cols, gemmd_dtype_t fp8, uint8_t *dst,
                               size_t dst_ld, float *scales, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_KERNELS_GPU_QUANTIZE_H_ */
