// What the WGMMA kernel (kernel.cu) and its host side (prepare.cc, tile_rules.cc) both rely
// on: the K block, the consumer warpgroups, the tensor maps per group, the rows of A one TMA
// box brings, and split-K's workspace layout. Compiled by nvcc and by the host compiler.
#ifndef GEMMD_KERNELS_WGMMA_PARAMS_H_
#define GEMMD_KERNELS_WGMMA_PARAMS_H_

#include <stdint.h>

#include "kernels/gpu_gemm.h"
#include "kernels/operand.h"

#ifdef __CUDACC__
#define GEMMD_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GEMMD_HOST_DEVICE inline
#endif

namespace gemmd::wgmma {

constexpr uint32_t BK = 128;  // bytes of K per stage = one scale block = the swizzle width
constexpr uint32_t kConsumers = 2;  // consumer warpgroups per CTA
static_assert(BK == GEMMD_SCALE_BLOCK, "promotion once per scale block");

// Tensor maps per group in the batch's scheduling area: A, B, and D (written only for the
// TMA-store kind). Then the tile prefix sums (gemmd_gpu_gemm_sched_bytes).
constexpr uint32_t kMapsPerGroup = 3;
static_assert(GEMMD_GPU_TMAP_BYTES == 128, "a CUtensorMap is 128 bytes");

// Rows of A one TMA box brings for tiles of bm rows: all bm for big groups; for a small
// group only its rows rounded up to 8 (one swizzle atom), so a decode batch does not
// stream zeros into shared memory. Rows of the tile past the box hold stale bytes: they
// feed only accumulator rows past m, which are never stored. The host encodes A's map
// with the same box.
GEMMD_HOST_DEVICE uint32_t a_box_rows(uint32_t m, uint32_t bm) { return m >= bm ? bm : (m + 7) / 8 * 8; }

// Split-K's workspace (gemmd_gpu_gemm_workspace_bytes; zeroed once, before first use): for
// each split unit (the tail's tiles × parts, at most gridDim.x) and each consumer
// warpgroup, 64 × 128 floats of partial sums in the accumulators' register order (thread
// tid's element i at i·128 + tid: coalesced, no index math); then an arrival counter per
// tail tile and warpgroup, which the tile's last part sets back to zero.
constexpr uint32_t kSplitSlotFloats = 64 * 128;

constexpr uint64_t split_ws_bytes(uint32_t grid) {
  return (uint64_t)grid * kConsumers * (kSplitSlotFloats * 4 + 4);
}

// The SMs of the current device (132 if it cannot be asked): the persistent grid's size
// and the tile rules' slots. Host only (prepare.cc).
int sm_count();

}  // namespace gemmd::wgmma

#endif  // GEMMD_KERNELS_WGMMA_PARAMS_H_
