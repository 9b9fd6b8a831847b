/* The kernels behind gemmd_gpu_gemm (gpu_gemm.h), one launcher per source file. Private
 * to kernels/: callers use gemmd_gpu_gemm. */
#ifndef GEMMD_KERNELS_GPU_GEMM_KERNELS_H_
#define GEMMD_KERNELS_GPU_GEMM_KERNELS_H_

#include <cuda_runtime_api.h>

/* sm90_gemm_simple.cu; fp32_out_only: only the groups whose output is FP32. */
int gemmd_gpu_gemm_simple(const void *batch, bool fp32_out_only, cudaStream_t stream);
int gemmd_gpu_gemm_wgmma(const void *batch, cudaStream_t stream);  /* sm90_gemm_wgmma.cu */

#endif /* GEMMD_KERNELS_GPU_GEMM_KERNELS_H_ */
