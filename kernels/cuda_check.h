// Test and benchmark helper: CUDA_OK(call) prints the call, where, and CUDA's message,
// then exits 1, when a CUDA runtime call fails.
#ifndef GEMMD_KERNELS_CUDA_CHECK_H_
#define GEMMD_KERNELS_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#define CUDA_OK(x)                                                                              \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

#endif  // GEMMD_KERNELS_CUDA_CHECK_H_
