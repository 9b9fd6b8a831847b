#include "kernels/l2_scrub.h"

#include <stdint.h>

namespace {

__device__ uint32_t g_sink;

__global__ void read_all(const uint4 *p, size_t n) {
  uint32_t x = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint4 v = __ldcg(p + i);  // through L2, not L1
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u) g_sink = x;  // keeps the loads
}

}  // namespace

extern "C" cudaError_t gemmd_l2_read_all(const void *buf, size_t bytes, cudaStream_t stream) {
  read_all<<<1024, 512, 0, stream>>>(static_cast<const uint4 *>(buf), bytes / 16);
  return cudaGetLastError();
}
