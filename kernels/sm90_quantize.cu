// GPU quantizers: see gpu_quantize.h. The arithmetic (finite amax, scale = amax/max
// clamped to FLT_MIN, value / scale rounded to nearest even and saturated) is the CPU
// quantizer's, through the same inline functions, so results match bit for bit.
#include <float.h>

#include "kernels/errors.h"
#include "kernels/gpu_gemm.h"
#include "kernels/gpu_quantize.h"
#include "kernels/quantize.h"

namespace {

constexpr int kBlock = GEMMD_SCALE_BLOCK;  // 128 columns (and rows) per scale block
constexpr int kWarp = 32;
static_assert(kBlock % kWarp == 0, "a warp covers a 128-column block in whole steps");

__device__ __forceinline__ float load_value(const void *src, gemmd_dtype_t dt, size_t i) {
  switch (dt) {
    case GEMMD_DTYPE_BF16:
      return gemmd_bf16_to_f32(static_cast<const uint16_t *>(src)[i]);
    case GEMMD_DTYPE_FP16:
      return gemmd_fp16_to_f32(static_cast<const uint16_t *>(src)[i]);
    default:
      return static_cast<const float *>(src)[i];
  }
}

__device__ __forceinline__ float finite_abs(float v) {
  const float a = fabsf(v);
  return a <= FLT_MAX ? a : 0.0f;  // NaN and Inf stay out of amax
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// One warp per (row, 128-column block); each lane holds 4 values.
__global__ void quantize_1x128_kernel(const void *src, gemmd_dtype_t src_dtype, size_t src_ld,
                                      uint32_t rows, uint32_t cols, gemmd_dtype_t fp8,
                                      uint8_t *dst, size_t dst_ld, float *scales) {
  constexpr int kPerLane = kBlock / kWarp;
  const uint32_t nbc = (cols + kBlock - 1) / kBlock;
  const uint64_t warp = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (warp >= static_cast<uint64_t>(rows) * nbc) return;
  const uint32_t r = static_cast<uint32_t>(warp / nbc), bc = static_cast<uint32_t>(warp % nbc);
  float v[kPerLane];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kPerLane; i++) {
    const uint32_t c = bc * kBlock + i * kWarp + lane;
    v[i] = c < cols ? load_value(src, src_dtype, static_cast<size_t>(r) * src_ld + c) : 0.0f;
    amax = fmaxf(amax, finite_abs(v[i]));
  }
  const float scale = gemmd_quantize_scale(fp8, warp_max(amax));
#pragma unroll
  for (int i = 0; i < kPerLane; i++) {
    const uint32_t c = bc * kBlock + i * kWarp + lane;
    if (c < cols) dst[static_cast<size_t>(r) * dst_ld + c] = gemmd_quantize_value(fp8, v[i] / scale);
  }
  if (lane == 0) scales[static_cast<size_t>(r) * nbc + bc] = scale;
}

// One thread block of 256 per 128×128 tile: amax over the tile, then encode.
constexpr int kTileThreads = 256;
__global__ void __launch_bounds__(kTileThreads)
    quantize_128x128_kernel(const void *src, gemmd_dtype_t src_dtype, size_t src_ld,
                            uint32_t rows, uint32_t cols, gemmd_dtype_t fp8, uint8_t *dst,
                            size_t dst_ld, float *scales) {
  __shared__ float warp_amax[kTileThreads / kWarp];
  const uint32_t br = blockIdx.y, bc = blockIdx.x;
  const uint32_t r0 = br * kBlock, c0 = bc * kBlock;
  const uint32_t h = min(static_cast<uint32_t>(kBlock), rows - r0);
  const uint32_t w = min(static_cast<uint32_t>(kBlock), cols - c0);
  float amax = 0.0f;
  for (uint32_t i = threadIdx.x; i < h * w; i += kTileThreads) {
    const uint32_t r = r0 + i / w, c = c0 + i % w;
    amax = fmaxf(amax, finite_abs(load_value(src, src_dtype, static_cast<size_t>(r) * src_ld + c)));
  }
  amax = warp_max(amax);
  if (threadIdx.x % kWarp == 0) warp_amax[threadIdx.x / kWarp] = amax;
  __syncthreads();
  float tile_amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kTileThreads / kWarp; i++) tile_amax = fmaxf(tile_amax, warp_amax[i]);
  const float scale = gemmd_quantize_scale(fp8, tile_amax);
  for (uint32_t i = threadIdx.x; i < h * w; i += kTileThreads) {
    const uint32_t r = r0 + i / w, c = c0 + i % w;
    const float v = load_value(src, src_dtype, static_cast<size_t>(r) * src_ld + c);
    dst[static_cast<size_t>(r) * dst_ld + c] = gemmd_quantize_value(fp8, v / scale);
  }
  if (threadIdx.x == 0) scales[static_cast<size_t>(br) * gridDim.x + bc] = scale;
}

// The batch's quantization jobs (group_table.h): blocks take jobs in turn; within a job
// each warp takes (row, 128-column block) pieces, as quantize_1x128_kernel does.
constexpr int kJobThreads = 256;
__global__ void __launch_bounds__(kJobThreads) quantize_jobs_kernel(uint8_t *batch) {
  const auto *hdr = reinterpret_cast<const gemmd_batch_header_t *>(batch);
  const auto *jobs = reinterpret_cast<const gemmd_quant_job_t *>(
      batch + sizeof(gemmd_batch_header_t) + (size_t)hdr->n_groups * sizeof(gemmd_group_params_t));
  const uint8_t *raw = batch + hdr->raw_arena;
  uint8_t *a = batch + hdr->a_arena;
  float *sa = reinterpret_cast<float *>(batch + hdr->sa_arena);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  constexpr int kWarps = kJobThreads / kWarp;
  constexpr int kPerLane = kBlock / kWarp;
  for (uint32_t j = blockIdx.x; j < hdr->n_quant_jobs; j += gridDim.x) {
    const gemmd_quant_job_t job = jobs[j];
    const uint32_t nbc = (job.cols + kBlock - 1) / kBlock;
    const void *src = raw + job.src_offset;
    const gemmd_dtype_t st = static_cast<gemmd_dtype_t>(job.src_dtype);
    for (uint64_t p = warp; p < (uint64_t)job.rows * nbc; p += kWarps) {
      const uint32_t r = static_cast<uint32_t>(p / nbc), bc = static_cast<uint32_t>(p % nbc);
      float v[kPerLane];
      float amax = 0.0f;
#pragma unroll
      for (int i = 0; i < kPerLane; i++) {
        const uint32_t c = bc * kBlock + i * kWarp + lane;
        v[i] = c < job.cols ? load_value(src, st, static_cast<size_t>(r) * job.cols + c) : 0.0f;
        amax = fmaxf(amax, finite_abs(v[i]));
      }
      const float scale = gemmd_quantize_scale(GEMMD_DTYPE_FP8_E4M3, warp_max(amax));
      uint8_t *dst = a + job.a_offset + static_cast<size_t>(r) * job.lda;
#pragma unroll
      for (int i = 0; i < kPerLane; i++) {
        const uint32_t c = bc * kBlock + i * kWarp + lane;
        if (c < job.cols) dst[c] = gemmd_quantize_value(GEMMD_DTYPE_FP8_E4M3, v[i] / scale);
      }
      if (lane == 0) sa[job.sa_offset + static_cast<size_t>(r) * nbc + bc] = scale;
    }
  }
}

bool args_ok(const void *src, gemmd_dtype_t src_dtype, size_t src_ld, uint32_t cols,
             gemmd_dtype_t fp8, const uint8_t *dst, size_t dst_ld, const float *scales) {
  const bool real = src_dtype == GEMMD_DTYPE_BF16 || src_dtype == GEMMD_DTYPE_FP16 ||
                    src_dtype == GEMMD_DTYPE_FP32;
  return real && gemmd_dtype_is_fp8(fp8) && src != nullptr && dst != nullptr &&
         scales != nullptr && src_ld >= cols && dst_ld >= cols;
}

}  // namespace

extern "C" int gemmd_gpu_quantize_1x128(const void *src, gemmd_dtype_t src_dtype,
                                        size_t src_ld, uint32_t rows, uint32_t cols,
                                        gemmd_dtype_t fp8, uint8_t *dst, size_t dst_ld,
                                        float *scales, cudaStream_t stream) {
  if (!args_ok(src, src_dtype, src_ld, cols, fp8, dst, dst_ld, scales)) return GEMMD_EINVAL;
  if (rows == 0 || cols == 0) return GEMMD_OK;
  const uint64_t warps = static_cast<uint64_t>(rows) * ((cols + kBlock - 1) / kBlock);
  constexpr int kThreads = 256;
  const uint64_t blocks = (warps * kWarp + kThreads - 1) / kThreads;
  if (blocks > 0x7FFFFFFFull) return GEMMD_EINVAL;
  quantize_1x128_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      src, src_dtype, src_ld, rows, cols, fp8, dst, dst_ld, scales);
  return cudaGetLastError() == cudaSuccess ? GEMMD_OK : GEMMD_EDEVICE;
}

extern "C" int gemmd_gpu_quantize_jobs(const void *batch, cudaStream_t stream) {
  if (batch == nullptr) return GEMMD_EINVAL;
  // A fixed grid (graph-safe): jobs beyond it are taken in turn by the same blocks.
  quantize_jobs_kernel<<<264, kJobThreads, 0, stream>>>(
      static_cast<uint8_t *>(const_cast<void *>(batch)));
  return cudaGetLastError() == cudaSuccess ? GEMMD_OK : GEMMD_EDEVICE;
}

extern "C" int gemmd_gpu_quantize_128x128(const void *src, gemmd_dtype_t src_dtype,
                                          size_t src_ld, uint32_t rows, uint32_t cols,
                                          gemmd_dtype_t fp8, uint8_t *dst, size_t dst_ld,
                                          float *scales, cudaStream_t stream) {
  if (!args_ok(src, src_dtype, src_ld, cols, fp8, dst, dst_ld, scales)) return GEMMD_EINVAL;
  if (rows == 0 || cols == 0) return GEMMD_OK;
  const dim3 grid((cols + kBlock - 1) / kBlock, (rows + kBlock - 1) / kBlock);
  if (grid.y > 65535) return GEMMD_EINVAL;
  quantize_128x128_kernel<<<grid, kTileThreads, 0, stream>>>(src, src_dtype, src_ld, rows, cols,
                                                             fp8, dst, dst_ld, scales);
  return cudaGetLastError() == cudaSuccess ? GEMMD_OK : GEMMD_EDEVICE;
}
