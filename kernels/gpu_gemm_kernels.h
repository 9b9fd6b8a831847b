/* The kernels behind gemmd_gpu_gemm (gpu_gemm.h), one launcher per source file. Private
 * to kernels/: callers use gemmd_gpu_gemm. */
#ifndef GEMMD_KERNELS_GPU_GEMM_KERNELS_H_
#define GEMMD_KERNELS_GPU_GEMM_KERNELS_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

/* sm90_gemm_simple.cu; fp32_out_only: only the groups whose output is FP32. */
int gemmd_gpu_gemm_simple(const void *batch, bool fp32_out_only, cudaStream_t stream);
/* wgmma/kernel.cu; kinds: the tile kinds whose kernels to launch, 1 << gemmd_tile_kind_t
 * each (a kernel does nothing on a batch of another kind); workspace: split-K's
 * (gemmd_gpu_gemm_parts_run_ws), NULL for the process's. */
int gemmd_gpu_gemm_wgmma(const void *batch, uint32_t kinds, void *workspace, cudaStream_t stream);

#endif /* GEMMD_KERNELS_GPU_GEMM_KERNELS_H_ */
