// gemmd_gpu_gemm: the kernel the caller named.
#include "kernels/errors.h"
#include "kernels/gpu_gemm.h"
#include "kernels/gpu_gemm_kernels.h"

extern "C" int gemmd_gpu_gemm(gemmd_gpu_kernel_t kernel, const void *batch, cudaStream_t stream) {
  if (batch == nullptr) return GEMMD_EINVAL;
  switch (kernel) {
    case GEMMD_GPU_KERNEL_SIMPLE:
      return gemmd_gpu_gemm_simple(batch, stream);
    case GEMMD_GPU_KERNEL_WGMMA:
      return gemmd_gpu_gemm_wgmma(batch, stream);
  }
  return GEMMD_EINVAL;
}
