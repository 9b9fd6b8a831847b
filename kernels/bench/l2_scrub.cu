#include "kernels/bench/l2_scrub.h"

#include <stdint.h>

namespace {

__device__ uint32_t g_sink;

// Reads nr 16-byte pieces at src through L2 (not L1) and writes nw pieces of zeros at dst
// (none for the clean flush), each once. Each thread reads kUnroll pieces per pass
// (independent loads, all in flight before the first is used) and writes as many; the grid
// strides over both ranges.
constexpr uint32_t kUnroll = 4;

__global__ void __launch_bounds__(512) stream_floor(const uint4 *src, size_t nr, uint4 *dst, size_t nw) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t n = nr > nw ? nr : nw;
  uint32_t x = 0;
  for (size_t base = blockIdx.x * (size_t)blockDim.x + threadIdx.x; base < n; base += stride * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (uint32_t u = 0; u < kUnroll; u++) {
      const size_t i = base + u * stride;
      v[u] = i < nr ? __ldcg(src + i) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (uint32_t u = 0; u < kUnroll; u++) {
      const size_t i = base + u * stride;
      if (i < nw) dst[i] = make_uint4(0, 0, 0, 0);
      x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
  }
  if (x == 0x9e3779b9u) g_sink = x;  // keeps the loads
}

__device__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void clock_probe(uint64_t spin_ns, unsigned long long *out) {
  const uint64_t t0 = globaltimer();
  const long long c0 = clock64();
  uint64_t t1 = t0;
  while (t1 - t0 < spin_ns) t1 = globaltimer();
  const long long c1 = clock64();
  out[0] = (unsigned long long)(c1 - c0);
  out[1] = (unsigned long long)(t1 - t0);
}

}  // namespace

extern "C" double gemmd_sm_clock_mhz(uint64_t spin_ns, cudaStream_t stream) {
  unsigned long long *d = nullptr, h[2] = {0, 0};
  if (cudaMalloc(&d, sizeof h) != cudaSuccess) return 0.0;
  clock_probe<<<1, 1, 0, stream>>>(spin_ns, d);
  const bool ok = cudaGetLastError() == cudaSuccess &&
                  cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, stream) == cudaSuccess &&
                  cudaStreamSynchronize(stream) == cudaSuccess;
  cudaFree(d);
  return ok && h[1] > 0 ? (double)h[0] * 1e3 / (double)h[1] : 0.0;
}

extern "C" cudaError_t gemmd_l2_read_all(const void *buf, size_t bytes, cudaStream_t stream) {
  stream_floor<<<1024, 512, 0, stream>>>(static_cast<const uint4 *>(buf), bytes / 16, nullptr, 0);
  return cudaGetLastError();
}

extern "C" cudaError_t gemmd_stream_floor(const void *src, size_t read_bytes, void *dst, size_t write_bytes, int sms,
                                          cudaStream_t stream) {
  // Four 512-thread CTAs per SM (2048 threads, the SM's most), fewer where the bytes are few.
  const size_t pieces = (read_bytes > write_bytes ? read_bytes : write_bytes) / 16;
  size_t ctas = (pieces + 512 * kUnroll - 1) / (512 * kUnroll);
  if (ctas > (size_t)sms * 4) ctas = (size_t)sms * 4;
  if (ctas == 0) ctas = 1;
  stream_floor<<<(unsigned)ctas, 512, 0, stream>>>(static_cast<const uint4 *>(src), read_bytes / 16,
                                                   static_cast<uint4 *>(dst), write_bytes / 16);
  return cudaGetLastError();
}
