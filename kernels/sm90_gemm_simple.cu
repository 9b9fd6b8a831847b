// The first correct grouped FP8 GEMM for sm_90a (issue 5): mma.sync m16n8k32 on FP8,
// shared-memory tiles, FP32 promotion every 128 of K with the scales applied there, a
// persistent grid that walks every group of the device-resident table. Speed is issue 6's
// (wgmma/kernel.cu, with TMA and WGMMA); this one is the correctness baseline and the
// fallback for any shape.
//
// Phases of the kernel, per output tile of BM×BN:
//   shared-memory plan: A tile BM×BK and B tile BN×BK bytes, rows padded by 16 bytes;
//   load: 16-byte chunks, zero outside the group (rows ≥ m or n, bytes ≥ lda or ldb);
//   MMA: each warp owns a 32×32 piece: 2×4 mma.sync tiles per 32 of K;
//   promotion: after each BK = 128 block, final += block_acc · sa(m, kb) · sb(n, kb);
//   epilogue: round to the output dtype and store, bounds-checked.
#include <stdint.h>

#include "kernels/errors.h"
#include "kernels/gpu_gemm.h"
#include "kernels/gpu_gemm_device.cuh"
#include "kernels/gpu_gemm_kernels.h"

namespace {

constexpr int BM = 64;
constexpr int BN = 64;
constexpr int BK = 128;  // one scale block of K
constexpr int kThreads = 128;
constexpr int kRowPad = 16;  // bytes: rows 144 apart spread 16-byte loads over the banks
constexpr int kSmemRow = BK + kRowPad;
static_assert(BK == GEMMD_SCALE_BLOCK, "promotion happens once per scale block");
static_assert(BM % 32 == 0 && BN % 32 == 0, "warps own 32x32 pieces");
static_assert((BM / 32) * (BN / 32) * 32 == kThreads, "one warp per 32x32 piece");
static_assert(BN <= GEMMD_SCALE_BLOCK && GEMMD_SCALE_BLOCK % BN == 0,
              "a tile's columns share one 128-row block of B's 128x128 scales");

struct SharedTiles {
  uint8_t a[BM][kSmemRow];
  uint8_t b[BN][kSmemRow];
  uint32_t tile_start[GEMMD_GPU_MAX_GROUPS + 1];
};

// 16 bytes of a row, or zeros past the row's stride.
__device__ __forceinline__ uint4 load_chunk(const uint8_t *row, uint32_t byte, uint32_t ld) {
  if (byte + 16 <= ld) return *reinterpret_cast<const uint4 *>(row + byte);
  return make_uint4(0, 0, 0, 0);
}

template <bool kAE5M2, bool kBE5M2>
__device__ __forceinline__ void mma_fp8(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (!kAE5M2 && !kBE5M2) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else if constexpr (!kAE5M2 && kBE5M2) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else if constexpr (kAE5M2 && !kBE5M2) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

__device__ __forceinline__ float b_scale(const gemmd_group_params_t &g, uint32_t n, uint32_t kb) {
  const float *s = reinterpret_cast<const float *>(g.b_scales);
  switch (g.b_layout) {
    case GEMMD_SCALE_TENSOR:
      return s[0];
    case GEMMD_SCALE_ROW:
      return s[n];
    case GEMMD_SCALE_BLOCK_128X128:
      return s[(size_t)(n / 128) * gemmd_ceil_div(g.k, 128) + kb];
    default:
      return 1.0f;
  }
}

// One BM×BN tile of group g: rows m0.., columns n0...
template <bool kAE5M2, bool kBE5M2>
__device__ void tile(SharedTiles &sm, const gemmd_group_params_t &g, const uint8_t *a_arena,
                     const float *sa_arena, uint8_t *d_arena, uint32_t m0, uint32_t n0) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = (warp / (BN / 32)) * 32, wn = (warp % (BN / 32)) * 32;
  const int group_id = lane / 4, tig = lane % 4;
  const uint8_t *A = a_arena + g.a_offset;
  const uint8_t *B = reinterpret_cast<const uint8_t *>(g.b_data);
  const float *SA = sa_arena + g.sa_offset;
  const uint32_t kblocks = gemmd_ceil_div(g.k, BK);

  float final_acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) final_acc[i][j][e] = 0.0f;

  for (uint32_t kb = 0; kb < kblocks; kb++) {
    // Load: (BM + BN) rows of BK bytes in 16-byte chunks.
    constexpr int kChunks = BK / 16;
    for (int c = threadIdx.x; c < (BM + BN) * kChunks; c += kThreads) {
      const int row = c / kChunks, byte = (c % kChunks) * 16;
      const uint32_t kbyte = kb * BK + byte;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (row < BM) {
        if (m0 + row < g.m) v = load_chunk(A + (size_t)(m0 + row) * g.lda, kbyte, g.lda);
        *reinterpret_cast<uint4 *>(&sm.a[row][byte]) = v;
      } else {
        const int r = row - BM;
        if (n0 + r < g.n) v = load_chunk(B + (size_t)(n0 + r) * g.ldb, kbyte, g.ldb);
        *reinterpret_cast<uint4 *>(&sm.b[r][byte]) = v;
      }
    }
    __syncthreads();

    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
      for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 32) {
      uint32_t af[2][4], bf[4][2];
#pragma unroll
      for (int mt = 0; mt < 2; mt++) {
        const int r = wm + mt * 16 + group_id;
        af[mt][0] = *reinterpret_cast<const uint32_t *>(&sm.a[r][kk + tig * 4]);
        af[mt][1] = *reinterpret_cast<const uint32_t *>(&sm.a[r + 8][kk + tig * 4]);
        af[mt][2] = *reinterpret_cast<const uint32_t *>(&sm.a[r][kk + 16 + tig * 4]);
        af[mt][3] = *reinterpret_cast<const uint32_t *>(&sm.a[r + 8][kk + 16 + tig * 4]);
      }
#pragma unroll
      for (int nt = 0; nt < 4; nt++) {
        const int c = wn + nt * 8 + group_id;
        bf[nt][0] = *reinterpret_cast<const uint32_t *>(&sm.b[c][kk + tig * 4]);
        bf[nt][1] = *reinterpret_cast<const uint32_t *>(&sm.b[c][kk + 16 + tig * 4]);
      }
#pragma unroll
      for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < 4; nt++) mma_fp8<kAE5M2, kBE5M2>(acc[mt][nt], af[mt], bf[nt]);
    }

    // Promotion: the block's FP32 sums, scaled, into the FP32 totals.
    const uint32_t sa_ld = kblocks;
#pragma unroll
    for (int mt = 0; mt < 2; mt++) {
#pragma unroll
      for (int half = 0; half < 2; half++) {
        const uint32_t row = m0 + wm + mt * 16 + group_id + half * 8;
        const float sa = row < g.m ? SA[(size_t)row * sa_ld + kb] : 0.0f;
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
#pragma unroll
          for (int j = 0; j < 2; j++) {
            const uint32_t col = n0 + wn + nt * 8 + tig * 2 + j;
            const float sb = col < g.n ? b_scale(g, col, kb) : 0.0f;
            final_acc[mt][nt][half * 2 + j] += acc[mt][nt][half * 2 + j] * (sa * sb);
          }
        }
      }
    }
    __syncthreads();
  }

  uint8_t *D = d_arena + g.d_offset;
#pragma unroll
  for (int mt = 0; mt < 2; mt++)
#pragma unroll
    for (int half = 0; half < 2; half++) {
      const uint32_t row = m0 + wm + mt * 16 + group_id + half * 8;
      if (row >= g.m) continue;
#pragma unroll
      for (int nt = 0; nt < 4; nt++)
#pragma unroll
        for (int j = 0; j < 2; j++) {
          const uint32_t col = n0 + wn + nt * 8 + tig * 2 + j;
          if (col < g.n) gemmd_store_out(D, g.out_dtype, (size_t)row * g.n + col, final_acc[mt][nt][half * 2 + j]);
        }
    }
}

// fp32_out_only: run only the groups with FP32 output (the WGMMA kernel leaves those here).
__global__ void __launch_bounds__(kThreads) grouped_gemm_kernel(const uint8_t *batch, bool fp32_out_only) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  SharedTiles &sm = *reinterpret_cast<SharedTiles *>(smem_raw);
  const auto *hdr = reinterpret_cast<const gemmd_batch_header_t *>(batch);
  const auto *table = reinterpret_cast<const gemmd_group_params_t *>(batch + sizeof(gemmd_batch_header_t));
  const uint32_t n_groups = hdr->n_groups;
  const uint8_t *a_arena = batch + hdr->a_arena;
  const float *sa_arena = reinterpret_cast<const float *>(batch + hdr->sa_arena);
  uint8_t *d_arena = const_cast<uint8_t *>(batch) + hdr->d_arena;

  // Tile counts of every group, then their prefix sums: the scheduler's map.
  for (uint32_t g = threadIdx.x; g < n_groups; g += kThreads) {
    const bool run = !fp32_out_only || table[g].out_dtype == GEMMD_DTYPE_FP32;
    sm.tile_start[g + 1] = run ? gemmd_ceil_div(table[g].m, BM) * gemmd_ceil_div(table[g].n, BN) : 0;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    sm.tile_start[0] = 0;
    for (uint32_t g = 0; g < n_groups; g++) sm.tile_start[g + 1] += sm.tile_start[g];
  }
  __syncthreads();
  const uint32_t total = sm.tile_start[n_groups];

  for (uint32_t t = blockIdx.x; t < total; t += gridDim.x) {
    uint32_t lo = 0, hi = n_groups;  // the group whose range holds t
    while (hi - lo > 1) {
      const uint32_t mid = (lo + hi) / 2;
      if (sm.tile_start[mid] <= t) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    const gemmd_group_params_t g = table[lo];
    const uint32_t local = t - sm.tile_start[lo];
    const uint32_t n_tiles = gemmd_ceil_div(g.n, BN);
    const uint32_t m0 = (local / n_tiles) * BM, n0 = (local % n_tiles) * BN;
    const bool ae5 = g.a_dtype == GEMMD_DTYPE_FP8_E5M2, be5 = g.b_dtype == GEMMD_DTYPE_FP8_E5M2;
    if (!ae5 && !be5) {
      tile<false, false>(sm, g, a_arena, sa_arena, d_arena, m0, n0);
    } else if (!ae5 && be5) {
      tile<false, true>(sm, g, a_arena, sa_arena, d_arena, m0, n0);
    } else if (ae5 && !be5) {
      tile<true, false>(sm, g, a_arena, sa_arena, d_arena, m0, n0);
    } else {
      tile<true, true>(sm, g, a_arena, sa_arena, d_arena, m0, n0);
    }
  }
}

int g_grid = 0;  // blocks of the persistent grid: a few per SM

}  // namespace

int gemmd_gpu_gemm_simple(const void *batch, bool fp32_out_only, cudaStream_t stream) {
  const size_t smem = sizeof(SharedTiles);
  if (g_grid == 0) {
    int dev = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaFuncSetAttribute(grouped_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smem) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grouped_gemm_kernel, kThreads,
                                                      smem) != cudaSuccess) {
      return GEMMD_EDEVICE;
    }
    g_grid = sms * (per_sm > 0 ? per_sm : 1);
  }
  grouped_gemm_kernel<<<g_grid, kThreads, smem, stream>>>(static_cast<const uint8_t *>(batch), fp32_out_only);
  return cudaGetLastError() == cudaSuccess ? GEMMD_OK : GEMMD_EDEVICE;
}
