/* The grouped FP8 GEMM on the GPU: every group of a batch buffer (group_table.h), in one
 * persistent launch whose grid does not depend on the batch, so a CUDA graph captured
 * once replays for any batch: group count, shapes and offsets are read on the device.
 *
 * D_g = A_g · B_gᵀ with FP32 accumulation promoted to FP32 registers every 128 of K,
 * A scales 1×128, B scales NONE / TENSOR / ROW / BLOCK_128X128, E4M3 and E5M2 in any mix,
 * D in BF16 / FP16 / FP32 rounded to nearest even.
 *
 * Launchers take device pointers, queue work on `stream` and return 0, GEMMD_EINVAL or
 * GEMMD_EDEVICE (the launch failed). Never throw, never exit. */
#ifndef GEMMD_KERNELS_GPU_GEMM_H_
#define GEMMD_KERNELS_GPU_GEMM_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "kernels/group_table.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GEMMD_GPU_KERNEL_SIMPLE = 0, /* mma.sync, correctness first (sm90_gemm_simple.cu) */
} gemmd_gpu_kernel_t;

/* Runs the GEMM of the batch at `batch` (device memory; header, table, arenas). */
int gemmd_gpu_gemm(gemmd_gpu_kernel_t kernel, const void *batch, cudaStream_t stream);

/* Quantizes the batch's raw-A jobs (BF16/FP16/FP32 → E4M3, 1×128 scales) in place. */
int gemmd_gpu_quantize_jobs(const void *batch, cudaStream_t stream);

/* Largest number of groups a batch may hold (shared memory of the tile scheduler). */
#define GEMMD_GPU_MAX_GROUPS 4096

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_KERNELS_GPU_GEMM_H_ */
