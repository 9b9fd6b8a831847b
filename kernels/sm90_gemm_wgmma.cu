// The Hopper grouped FP8 GEMM (issue 6), v1: TMA loads into a shared-memory ring guarded by
// mbarriers, one producer warp and two consumer warpgroups (setmaxnreg), WGMMA
// m64n128k32 with FP32 promotion every 128 of K, a persistent grid over every group of
// the device-resident batch (group_table.h).
//
// Per output tile of 128×128 (group g, rows m0.., columns n0..):
//   producer (warpgroup 0, one thread): for each 128-wide K block, wait for the stage to be
//     empty, arm its "full" barrier with the bytes to come, and issue two TMA loads: A rows
//     m0..m0+127 and B rows n0..n0+127, 128 bytes of K each, 128-byte swizzled. TMA fills
//     rows past m or n and bytes past lda or ldb with zeros.
//   consumers (warpgroups 1 and 2, rows +0 and +64): wait "full", four WGMMAs (K = 32 each)
//     into a block accumulator, wait for them, release the stage ("empty"), then promote:
//     total += block · sa(row, kb) · sb(n-block, kb) (128×128 B scales; 1 otherwise).
//   epilogue: B's per-row or per-tensor scale, rounding to BF16/FP16/FP32, bounds-checked
//     stores straight from registers.
//
// The host side (gemmd_gpu_gemm_prepare) writes, into the batch before its upload, two
// tensor maps per group (A in the batch's A arena, B wherever the weight lives) and the
// groups' tile prefix sums; the kernel binary-searches those to map a tile to its group.
// The grid (one CTA per SM) and everything else is fixed, so a captured graph replays for
// any batch.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdint.h>

#include <mutex>

#include "kernels/errors.h"
#include "kernels/gpu_gemm.h"
#include "kernels/gpu_gemm_device.cuh"
#include "kernels/gpu_gemm_kernels.h"

namespace {

constexpr uint32_t BM = 128;  // two consumer warpgroups × 64 rows
constexpr uint32_t BN = 128;
constexpr uint32_t BK = 128;  // bytes of K per stage = one scale block = the swizzle width
constexpr uint32_t kStages = 6;
constexpr uint32_t kConsumers = 2;
constexpr uint32_t kThreads = 128 * (1 + kConsumers);
constexpr uint32_t kStageA = BM * BK, kStageB = BN * BK;
constexpr uint32_t kSmemBytes = kStages * (kStageA + kStageB) + 1024 /* barriers */ + 1024 /* alignment */;
static_assert(BK == GEMMD_SCALE_BLOCK, "promotion once per scale block");
static_assert(BN == GEMMD_SCALE_BLOCK, "a tile's columns share one row of 128x128 B scales");
static_assert(kStageA % 1024 == 0 && kStageB % 1024 == 0, "128B-swizzled tiles are 1024-byte aligned");
static_assert(GEMMD_GPU_TMAP_BYTES == 128, "a CUtensorMap is 128 bytes");

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarriers -----------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Waits until the phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

// ---- TMA -----------------------------------------------------------------------------------

// The tensor map was written by the host into global memory (the batch upload): order
// this thread's later tensor-map reads after that write.
__device__ __forceinline__ void tmap_acquire(const void *tmap) {
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(tmap) : "memory");
}

// Rows y.. of the map's 2D tensor, bytes x.. of each, into `dst`; completion counted on `bar`.
__device__ __forceinline__ void tma_load_2d(void *dst, const void *tmap, uint64_t *bar, uint32_t x, uint32_t y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          smem_addr(dst)),
      "l"(tmap), "r"(x), "r"(y), "r"(smem_addr(bar))
      : "memory");
}

// ---- WGMMA ---------------------------------------------------------------------------------

// Shared-memory matrix descriptor: K-major rows of 128 bytes, 128-byte swizzle, 8-row
// groups 1024 bytes apart (SBO); the leading offset is unused for swizzled K-major.
__device__ __forceinline__ uint64_t smem_desc(const void *p) {
  const uint64_t addr = smem_addr(p);
  return ((addr & 0x3FFFF) >> 4) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

#define GEMMD_WGMMA_D_REGS                                                   \
  "%0, %1, %2, %3, %4, %5, %6, %7, "                                         \
  "%8, %9, %10, %11, %12, %13, %14, %15, "                                   \
  "%16, %17, %18, %19, %20, %21, %22, %23, "                                 \
  "%24, %25, %26, %27, %28, %29, %30, %31, "                                 \
  "%32, %33, %34, %35, %36, %37, %38, %39, "                                 \
  "%40, %41, %42, %43, %44, %45, %46, %47, "                                 \
  "%48, %49, %50, %51, %52, %53, %54, %55, "                                 \
  "%56, %57, %58, %59, %60, %61, %62, %63"

#define GEMMD_WGMMA_D_OUTS                                                                                  \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),           \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),            \
      "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),            \
      "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),            \
      "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),            \
      "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),            \
      "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]),            \
      "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// d (64 FP32 per thread: the warpgroup's 64×128 block) = [d +] A(64×32) · B(128×32)ᵀ.
#define GEMMD_WGMMA_M64N128K32(ATYPE, BTYPE)                                                          \
  asm volatile(                                                                                       \
      "{\n"                                                                                           \
      ".reg .pred p;\n"                                                                               \
      "setp.ne.b32 p, %66, 0;\n"                                                                      \
      "wgmma.mma_async.sync.aligned.m64n128k32.f32." ATYPE "." BTYPE " {" GEMMD_WGMMA_D_REGS "}, %64, %65, p, 1, 1;\n" \
      "}\n"                                                                                           \
      : GEMMD_WGMMA_D_OUTS                                                                            \
      : "l"(da), "l"(db), "r"(accumulate))

template <bool kAE5M2, bool kBE5M2>
__device__ __forceinline__ void wgmma_k32(float (&d)[64], uint64_t da, uint64_t db, uint32_t accumulate) {
  if constexpr (!kAE5M2 && !kBE5M2) {
    GEMMD_WGMMA_M64N128K32("e4m3", "e4m3");
  } else if constexpr (!kAE5M2 && kBE5M2) {
    GEMMD_WGMMA_M64N128K32("e4m3", "e5m2");
  } else if constexpr (kAE5M2 && !kBE5M2) {
    GEMMD_WGMMA_M64N128K32("e5m2", "e4m3");
  } else {
    GEMMD_WGMMA_M64N128K32("e5m2", "e5m2");
  }
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }

// The 4 WGMMAs of one 128-byte K block: descriptors advance 32 bytes inside the swizzle atom.
template <bool kAE5M2, bool kBE5M2>
__device__ __forceinline__ void block_mma(float (&d)[64], const uint8_t *a, const uint8_t *b) {
  __syncwarp();  // .aligned: the warp arrives together after its barrier wait
  wgmma_fence();
#pragma unroll
  for (uint32_t kk = 0; kk < BK / 32; kk++) {
    wgmma_k32<kAE5M2, kBE5M2>(d, smem_desc(a + kk * 32), smem_desc(b + kk * 32), kk > 0 ? 1u : 0u);
  }
  wgmma_commit();
  wgmma_wait_all();
}

// ---- Tiles ---------------------------------------------------------------------------------

struct TileRef {
  uint32_t group, m0, n0;
};

// Tile t of the batch: its group (binary search over the prefix sums), rows and columns.
// Within a group, consecutive tiles walk M first, so CTAs running together share B tiles.
__device__ __forceinline__ TileRef locate(const gemmd_group_params_t *table, const uint32_t *starts,
                                          uint32_t n_groups, uint32_t t) {
  uint32_t lo = 0, hi = n_groups;
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (starts[mid] <= t) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const uint32_t local = t - starts[lo];
  const uint32_t m_tiles = gemmd_ceil_div(table[lo].m, BM);
  return {lo, (local % m_tiles) * BM, (local / m_tiles) * BN};
}

struct Shared {
  uint64_t full[kStages];
  uint64_t empty[kStages];
};

template <bool kAE5M2, bool kBE5M2>
__device__ __forceinline__ void consume_tile(const gemmd_group_params_t &g, const TileRef &tr, uint8_t *tiles,
                                             Shared &sh, uint32_t &stage, uint32_t &phase, const float *sa_arena,
                                             uint8_t *d_arena, uint32_t wg) {
  const uint32_t tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  const uint32_t kblocks = gemmd_ceil_div(g.k, BK);
  const uint32_t row0 = tr.m0 + wg * 64 + warp * 16 + lane / 4, row1 = row0 + 8;
  const bool live = tr.m0 + wg * 64 < g.m;  // this warpgroup's 64 rows hold any of the group's
  const float *SA = sa_arena + g.sa_offset;
  const float *SB = reinterpret_cast<const float *>(g.b_scales);
  const bool b_blocks = g.b_layout == GEMMD_SCALE_BLOCK_128X128;
  float total[64], block[64];
#pragma unroll
  for (int i = 0; i < 64; i++) total[i] = block[i] = 0.0f;
  for (uint32_t kb = 0; kb < kblocks; kb++) {
    mbar_wait(&sh.full[stage], phase);
    const uint8_t *a = tiles + stage * (kStageA + kStageB) + wg * 64 * BK;
    const uint8_t *b = tiles + stage * (kStageA + kStageB) + kStageA;
    if (live) block_mma<kAE5M2, kBE5M2>(block, a, b);
    mbar_arrive(&sh.empty[stage]);
    if (live) {
      const float sb = b_blocks ? SB[(size_t)(tr.n0 / 128) * kblocks + kb] : 1.0f;
      const float s0 = row0 < g.m ? SA[(size_t)row0 * kblocks + kb] * sb : 0.0f;
      const float s1 = row1 < g.m ? SA[(size_t)row1 * kblocks + kb] * sb : 0.0f;
#pragma unroll
      for (int j = 0; j < 16; j++) {
        total[j * 4 + 0] += block[j * 4 + 0] * s0;
        total[j * 4 + 1] += block[j * 4 + 1] * s0;
        total[j * 4 + 2] += block[j * 4 + 2] * s1;
        total[j * 4 + 3] += block[j * 4 + 3] * s1;
      }
    }
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
  if (!live) return;
  // Epilogue: accumulator element j*4 + {0,1} is (row0, col), {2,3} is (row1, col), with
  // col = n0 + 8j + 2·(lane % 4) + {0, 1}.
  uint8_t *D = d_arena + g.d_offset;
#pragma unroll
  for (int j = 0; j < 16; j++) {
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const uint32_t col = tr.n0 + 8 * j + 2 * (lane % 4) + e;
      if (col >= g.n) continue;
      const float cs = g.b_layout == GEMMD_SCALE_ROW ? SB[col] : g.b_layout == GEMMD_SCALE_TENSOR ? SB[0] : 1.0f;
      if (row0 < g.m) gemmd_store_out(D, g.out_dtype, (size_t)row0 * g.n + col, total[j * 4 + e] * cs);
      if (row1 < g.m) gemmd_store_out(D, g.out_dtype, (size_t)row1 * g.n + col, total[j * 4 + 2 + e] * cs);
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1) wgmma_gemm_kernel(const uint8_t *batch) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t *tiles = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  Shared &sh = *reinterpret_cast<Shared *>(tiles + kStages * (kStageA + kStageB));

  const auto *hdr = reinterpret_cast<const gemmd_batch_header_t *>(batch);
  const auto *table = reinterpret_cast<const gemmd_group_params_t *>(batch + sizeof(gemmd_batch_header_t));
  const uint32_t n_groups = hdr->n_groups, total = hdr->total_tiles;
  const uint8_t *tmaps = batch + hdr->sched_arena;
  const uint32_t *starts = reinterpret_cast<const uint32_t *>(tmaps + (size_t)n_groups * 2 * GEMMD_GPU_TMAP_BYTES);

  if (threadIdx.x == 0) {
    for (uint32_t s = 0; s < kStages; s++) {
      mbar_init(&sh.full[s], 1);
      mbar_init(&sh.empty[s], 128 * kConsumers);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  const uint32_t wg = threadIdx.x / 128;
  uint32_t stage = 0, phase = 0;
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x != 0) return;
    uint32_t last_group = 0xFFFFFFFFu;
    for (uint32_t t = blockIdx.x; t < total; t += gridDim.x) {
      const TileRef tr = locate(table, starts, n_groups, t);
      const uint8_t *tm_a = tmaps + (size_t)tr.group * 2 * GEMMD_GPU_TMAP_BYTES;
      const uint8_t *tm_b = tm_a + GEMMD_GPU_TMAP_BYTES;
      if (tr.group != last_group) {
        tmap_acquire(tm_a);
        tmap_acquire(tm_b);
        last_group = tr.group;
      }
      const uint32_t kblocks = gemmd_ceil_div(table[tr.group].k, BK);
      for (uint32_t kb = 0; kb < kblocks; kb++) {
        mbar_wait(&sh.empty[stage], phase ^ 1);
        uint8_t *dst = tiles + stage * (kStageA + kStageB);
        mbar_arrive_expect_tx(&sh.full[stage], kStageA + kStageB);
        tma_load_2d(dst, tm_a, &sh.full[stage], kb * BK, tr.m0);
        tma_load_2d(dst + kStageA, tm_b, &sh.full[stage], kb * BK, tr.n0);
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1;
        }
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const float *sa_arena = reinterpret_cast<const float *>(batch + hdr->sa_arena);
  uint8_t *d_arena = const_cast<uint8_t *>(batch) + hdr->d_arena;
  for (uint32_t t = blockIdx.x; t < total; t += gridDim.x) {
    const TileRef tr = locate(table, starts, n_groups, t);
    const gemmd_group_params_t g = table[tr.group];
    const bool ae5 = g.a_dtype == GEMMD_DTYPE_FP8_E5M2, be5 = g.b_dtype == GEMMD_DTYPE_FP8_E5M2;
    if (!ae5 && !be5) {
      consume_tile<false, false>(g, tr, tiles, sh, stage, phase, sa_arena, d_arena, wg - 1);
    } else if (!ae5 && be5) {
      consume_tile<false, true>(g, tr, tiles, sh, stage, phase, sa_arena, d_arena, wg - 1);
    } else if (ae5 && !be5) {
      consume_tile<true, false>(g, tr, tiles, sh, stage, phase, sa_arena, d_arena, wg - 1);
    } else {
      consume_tile<true, true>(g, tr, tiles, sh, stage, phase, sa_arena, d_arena, wg - 1);
    }
  }
}

// ---- Host side -----------------------------------------------------------------------------

PFN_cuTensorMapEncodeTiled_v12000 g_encode = nullptr;
std::once_flag g_encode_once;

void load_encode() {
  void *fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) ==
          cudaSuccess &&
      q == cudaDriverEntryPointSuccess) {
    g_encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }
}

// A 2D map over `rows` rows of `ld` bytes at `addr`: boxes of 128 bytes × box_rows rows,
// 128-byte swizzle, zeros outside.
bool encode(void *out, uint64_t addr, uint32_t ld, uint32_t rows, uint32_t box_rows) {
  const cuuint64_t dims[2] = {ld, rows};
  const cuuint64_t strides[1] = {ld};
  const cuuint32_t box[2] = {BK, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  return g_encode(static_cast<CUtensorMap *>(out), CU_TENSOR_MAP_DATA_TYPE_UINT8, 2,
                  reinterpret_cast<void *>(addr), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

int g_grid = 0;

}  // namespace

extern "C" uint64_t gemmd_gpu_gemm_sched_bytes(uint32_t n_groups) {
  return (uint64_t)n_groups * 2 * GEMMD_GPU_TMAP_BYTES + 4ull * (n_groups + 1);
}

extern "C" int gemmd_gpu_gemm_prepare(gemmd_gpu_kernel_t kernel, void *host_batch, uint64_t dev_batch) {
  auto *hdr = static_cast<gemmd_batch_header_t *>(host_batch);
  if (host_batch == nullptr || dev_batch == 0) return GEMMD_EINVAL;
  if (kernel != GEMMD_GPU_KERNEL_WGMMA) return GEMMD_OK;  // the others need nothing
  if (hdr->sched_arena == 0 || hdr->sched_arena % GEMMD_GPU_TMAP_BYTES != 0) return GEMMD_EINVAL;
  std::call_once(g_encode_once, load_encode);
  if (g_encode == nullptr) return GEMMD_EDEVICE;
  auto *bytes = static_cast<uint8_t *>(host_batch);
  const auto *table = reinterpret_cast<const gemmd_group_params_t *>(bytes + sizeof *hdr);
  uint8_t *tmaps = bytes + hdr->sched_arena;
  auto *starts = reinterpret_cast<uint32_t *>(tmaps + (size_t)hdr->n_groups * 2 * GEMMD_GPU_TMAP_BYTES);
  uint64_t tiles = 0;
  for (uint32_t g = 0; g < hdr->n_groups; g++) {
    const gemmd_group_params_t &p = table[g];
    if (p.m == 0 || p.n == 0 || p.k == 0 || p.lda < p.k || p.ldb < p.k || p.lda % 16 || p.ldb % 16 ||
        p.b_data % 16) {
      return GEMMD_EINVAL;
    }
    uint8_t *tm = tmaps + (size_t)g * 2 * GEMMD_GPU_TMAP_BYTES;
    if (!encode(tm, dev_batch + hdr->a_arena + p.a_offset, p.lda, p.m, BM) ||
        !encode(tm + GEMMD_GPU_TMAP_BYTES, p.b_data, p.ldb, p.n, BN)) {
      return GEMMD_EINVAL;
    }
    starts[g] = static_cast<uint32_t>(tiles);
    tiles += (uint64_t)((p.m + BM - 1) / BM) * ((p.n + BN - 1) / BN);
    if (tiles > 0xFFFFFFFFull) return GEMMD_EINVAL;
  }
  starts[hdr->n_groups] = static_cast<uint32_t>(tiles);
  hdr->total_tiles = static_cast<uint32_t>(tiles);
  return GEMMD_OK;
}

int gemmd_gpu_gemm_wgmma(const void *batch, cudaStream_t stream) {
  if (g_grid == 0) {
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaFuncSetAttribute(wgmma_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmemBytes) !=
            cudaSuccess) {
      return GEMMD_EDEVICE;
    }
    g_grid = sms;
  }
  wgmma_gemm_kernel<<<g_grid, kThreads, kSmemBytes, stream>>>(static_cast<const uint8_t *>(batch));
  return cudaGetLastError() == cudaSuccess ? GEMMD_OK : GEMMD_EDEVICE;
}
