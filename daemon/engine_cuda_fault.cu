// Tests only: a kernel that writes through a wild pointer, so the device reports
// cudaErrorIllegalAddress, a sticky error, exactly as a real fault would.
#include "daemon/engine_cuda_fault.h"

namespace {
__global__ void wild_write(int *p) { p[threadIdx.x] = 1; }
}  // namespace

extern "C" int gemmd_cuda_inject_fault(cudaStream_t stream) {
  wild_write<<<1, 32, 0, stream>>>(reinterpret_cast<int *>(0x10));
  return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
