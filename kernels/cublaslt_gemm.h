/* One FP8 GEMM through cuBLASLt, with gemmd's operand conventions: D (M×N row-major) =
 * A (M×K, row stride lda) · B (N×K, row stride ldb)ᵀ, FP32 accumulation. The baseline the
 * benchmark compares with, and the `--gemm-kernel cublaslt` path of the CUDA engine.
 *
 * Scales, as cuBLASLt 12.9+ takes them on Hopper:
 *   A TENSOR × B TENSOR (or NONE: scale 1): per-tensor scalars;
 *   A BLOCK_1X128 × B BLOCK_128X128 (DeepSeek): A's scales must be given "M-major"
 *     (element (m, kb) at kb·M + m) and B's with each 128-row block's K-blocks padded to a
 *     multiple of 4 (element (nb, kb) at nb·round_up(ceil(K/128), 4) + kb);
 *     gemmd_cublaslt_convert_scales makes both from gemmd's row-major layouts.
 * Other combinations are GEMMD_ENOTSUP. Calls are capturable in a CUDA graph once the
 * handle exists (the workspace is preallocated). */
#ifndef GEMMD_KERNELS_CUBLASLT_GEMM_H_
#define GEMMD_KERNELS_CUBLASLT_GEMM_H_

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/operand.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gemmd_cublaslt_s gemmd_cublaslt_t;

typedef struct gemmd_cublaslt_call_s {
  uint32_t m, n, k;
  gemmd_dtype_t a_dtype, b_dtype, out_dtype;
  gemmd_scale_layout_t a_layout, b_layout; /* TENSOR/NONE pairs, or 1X128 with 128X128 */
  const void *a;       /* device */
  uint32_t lda;        /* bytes, multiple of 16 */
  const void *b;
  uint32_t ldb;
  const float *a_scales; /* device, cuBLASLt layout (see above) */
  const float *b_scales;
  void *d; /* device, M×N of out_dtype, dense */
} gemmd_cublaslt_call_t;

int gemmd_cublaslt_create(size_t workspace_bytes, gemmd_cublaslt_t **out);
void gemmd_cublaslt_destroy(gemmd_cublaslt_t *h);

/* Queues the GEMM on stream. 0, GEMMD_ENOTSUP (a scale or shape cuBLASLt does not take
 * here), GEMMD_EINVAL or GEMMD_EDEVICE. */
int gemmd_cublaslt_gemm(gemmd_cublaslt_t *h, const gemmd_cublaslt_call_t *call, cudaStream_t stream);

/* Whether cuBLASLt takes the call, queuing nothing (host only; its pointers are not read):
 * 0, or what gemmd_cublaslt_gemm would refuse it with. The plan found is remembered. */
int gemmd_cublaslt_supported(gemmd_cublaslt_t *h, const gemmd_cublaslt_call_t *call);

/* Device kernels that rewrite row-major gemmd scales into cuBLASLt's layouts:
 * a: m × ceil(k/128) → M-major; b: ceil(n/128) × ceil(k/128) → rows padded to 4. */
int gemmd_cublaslt_convert_a_scales(const float *src, uint32_t m, uint32_t k, float *dst,
                                    cudaStream_t stream);
int gemmd_cublaslt_convert_b_scales(const float *src, uint32_t n, uint32_t k, float *dst,
                                    cudaStream_t stream);
/* Floats the converted B scales take. */
size_t gemmd_cublaslt_b_scale_count(uint32_t n, uint32_t k);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_KERNELS_CUBLASLT_GEMM_H_ */
