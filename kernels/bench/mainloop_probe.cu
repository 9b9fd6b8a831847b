// Main-loop probe (docs/bench/kernels.md): the K loop of gemmd's 256-row tiles
// without its epilogue, scales or scheduling, in forms that differ only in how a consumer
// warpgroup feeds the tensor cores, so one device call can say whether shared-memory
// traffic bounds the long-K cases and what a change of form would buy.
//
// Every form computes a 2-CTA cluster's 256 × 256 outputs per unit (units M-first, as
// gemmd's scheduler walks them), 128 bytes of K per stage, 48 KB stages in a ring of S,
// one TMA thread, two consumer warpgroups (setmaxnreg 40 / 232), one K block in flight per
// warpgroup, promotion into FP32 totals after each 64 × 128 WGMMA group:
//   rows_ss: each CTA 256 rows × 128 columns (gemmd's ROWS256: the pair shares A by
//     multicast); a warpgroup's 128 rows in two 64-row halves, A and B from shared memory.
//     Per K step a warpgroup reads 2 × (2 KB of A + 4 KB of B).
//   cols_rs: each CTA 128 rows × 256 columns (the pair shares B); a warpgroup's 64 rows ×
//     256 columns in two 128-column halves, A loaded once per K block into registers
//     (ldmatrix) and used by both halves: per K step 2 KB of A + 2 × 4 KB of B, a sixth
//     less than rows_ss.
//   cols_ss: as cols_rs with A from shared memory (read by both halves): rows_ss's bytes.
//   n256_ss: as cols_ss with one 64 × 256 WGMMA per K step (no room for totals: never
//     promoted): the fewest bytes per FLOP a warpgroup can read.
//   rows3_ss: three consumer warpgroups of 64 rows × 128 columns each, so each
//     CTA 192 rows × 128 columns (the pair shares A's 192 rows by multicast, 96 rows each),
//     one 64 × 128 WGMMA group per warpgroup and K block; 40 KB stages, 512 threads
//     (setmaxnreg 24 / 160). While one warpgroup waits and promotes, the other two have
//     their groups queued: twice the window rows_ss gives a promotion.
// Shared-memory arithmetic per 256 × 128 K block of one CTA (1024 clk of WGMMA work at
// 8192 FLOP/clk): TMA writes 48 KB; WGMMA reads 96 KB (rows_ss, cols_ss), 80 KB (cols_rs,
// n256_ss); at 128 B/clk that is 1152 or 1000 clk.
//
// rows_ss also comes with its promotion cut down (none, 16 or 32 of its 64 FFMAs per
// half: timing only), as FADDs (total += blk, possible where the scales do not change
// along K), and with the two warpgroups' WGMMA groups taking strict turns.
//
// --check runs rows_ss, cols_ss and cols_rs on a small problem and compares every sum with
// an FP64 reference (the fragment layouts); timing runs report µs, TFLOPS and the SMs'
// clock (clock64 over %globaltimer per CTA).
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/fp8.h"
#include "kernels/wgmma/ptx.cuh"

namespace {

constexpr uint32_t BK = 128;

enum Form : uint32_t { kRowsSS = 0, kColsRS = 1, kColsSS = 2, kN256SS = 3, kRows3SS = 4 };
const char *const kFormNames[] = {"rows_ss", "cols_rs", "cols_ss", "n256_ss", "rows3_ss"};

// A CTA's rows of A per unit, its threads (a producer warpgroup and 2 or 3 consumer ones)
// and its stage's bytes (its A rows and 128 rows of B, or 128 rows of A and 256 of B).
constexpr uint32_t rows_of(uint32_t f) { return f == kRows3SS ? 192 : 256; }
constexpr uint32_t threads_of(uint32_t f) { return f == kRows3SS ? 512 : 384; }
constexpr uint32_t stage_bytes_of(uint32_t f) { return f == kRows3SS ? 40 * 1024 : 48 * 1024; }
constexpr uint32_t kMaxThreads = 512;

struct Params {
  uint32_t m, n, k;             // multiples of the form's rows (256 or 192), 256 and 128
  uint32_t loads;               // 0: after the ring's first pass the stages are not loaded again;
                                // 2 (rows forms): B only in even K blocks (half B's L2 bytes;
                                // odd blocks reuse what the stage holds: timing only)
  float *d;                     // --check: the sums, m × n row-major; else null
  float *sink;                  // a value per thread, so no sum is dead
  unsigned long long *clocks;   // per CTA: clock64 and %globaltimer at start and end
};

// gemmd's kernel's PTX wrappers (kernels/wgmma/ptx.cuh): the same instructions.
using gemmd::wgmma::cluster_rank;
using gemmd::wgmma::cluster_sync;
using gemmd::wgmma::desc_of_lo;  // K-major 128-byte rows, 128-byte swizzle, 8-row groups 1024 bytes apart
using gemmd::wgmma::ld_shared_f32;
using gemmd::wgmma::mbar_arrive;
using gemmd::wgmma::mbar_arrive_expect_tx;
using gemmd::wgmma::mbar_arrive_peer;
using gemmd::wgmma::mbar_init;
using gemmd::wgmma::smem_addr;
using gemmd::wgmma::tma_load_2d;
using gemmd::wgmma::tma_load_2d_multicast;  // into the same offset of both CTAs of the pair
using gemmd::wgmma::wgmma_commit;
using gemmd::wgmma::wgmma_fence;
using gemmd::wgmma::wgmma_wait;

// Waits until the phase with this parity has completed: a spin in one asm, without the
// kernel's timeout.
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred p;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// One K block (4 WGMMAs of 32 bytes of K) from shared memory.
template <uint32_t N>
__device__ __forceinline__ void issue_ss(float (&d)[N / 2], uint32_t a_lo, uint32_t b_lo) {
  __syncwarp();
  wgmma_fence();
#pragma unroll
  for (uint32_t kk = 0; kk < BK / 32; kk++) {
    WgmmaM64K32<N, false, false>::run(d, desc_of_lo(a_lo + kk * 2), desc_of_lo(b_lo + kk * 2), kk > 0 ? 1u : 0u);
  }
  wgmma_commit();
}

// The same with A from registers (a[kk]: the warp's 16 rows at K step kk).
__device__ __forceinline__ void issue_rs(float (&d)[64], const uint32_t (&a)[BK / 32][4], uint32_t b_lo) {
  __syncwarp();
  wgmma_fence();
#pragma unroll
  for (uint32_t kk = 0; kk < BK / 32; kk++) {
    WgmmaM64K32Rs<128, false, false>::run(d, a[kk], desc_of_lo(b_lo + kk * 2), kk > 0 ? 1u : 0u);
  }
  wgmma_commit();
}

// The warp's 16 rows (from `row`) of a 128-byte-swizzled tile at `tile` (1024-aligned), all
// four K steps, in WGMMA's register layout for A: matrix i of each ldmatrix.x4 is rows
// +8·(i & 1), bytes 16·(i >> 1) of the step; lane L gives row L % 8 of matrix L / 8.
__device__ __forceinline__ void load_a_frags(uint32_t (&a)[BK / 32][4], uint32_t tile, uint32_t row) {
  const uint32_t lane = threadIdx.x % 32, mi = lane / 8;
  const uint32_t r = row + (mi & 1) * 8 + lane % 8;
#pragma unroll
  for (uint32_t kk = 0; kk < BK / 32; kk++) {
    const uint32_t chunk = kk * 2 + (mi >> 1);
    const uint32_t addr = tile + r * BK + ((chunk ^ (r & 7)) << 4);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a[kk][0]), "=r"(a[kk][1]), "=r"(a[kk][2]), "=r"(a[kk][3])
                 : "r"(addr)
                 : "memory");
  }
}

// How a 64 × 128 block result joins the totals. Only kFfma64, kFadd64 and kMulAdd64 give the
// sums (the probe's scales are all 1); the others time a share of the instructions.
// kMulAdd64: each element scaled by an FMUL, then added by an FADD (two
// 2-source instructions instead of one 3-source FFMA).
enum Promo : uint32_t { kNone = 0, kFfma16 = 1, kFfma32 = 2, kFfma64 = 3, kFadd64 = 4, kMulAdd64 = 5 };
const char *const kPromoNames[] = {"none", "ffma16", "ffma32", "ffma64", "fadd64", "muladd"};

template <uint32_t R, uint32_t P>
__device__ __forceinline__ void promote(float *total, const float (&blk)[R], float s0, float s1) {
  if constexpr (P == kFfma64 || P == kFfma32 || P == kFfma16) {
    constexpr uint32_t n = P == kFfma64 ? R / 4 : P == kFfma32 ? R / 8 : R / 16;
#pragma unroll
    for (uint32_t j = 0; j < n; j++) {
      total[j * 4 + 0] += blk[j * 4 + 0] * s0;
      total[j * 4 + 1] += blk[j * 4 + 1] * s0;
      total[j * 4 + 2] += blk[j * 4 + 2] * s1;
      total[j * 4 + 3] += blk[j * 4 + 3] * s1;
    }
  } else if constexpr (P == kFadd64) {
#pragma unroll
    for (uint32_t j = 0; j < R; j++) total[j] += blk[j];
  } else if constexpr (P == kMulAdd64) {
#pragma unroll
    for (uint32_t j = 0; j < R / 4; j++) {
#pragma unroll
      for (uint32_t e = 0; e < 4; e++) {
        total[j * 4 + e] = __fadd_rn(total[j * 4 + e], __fmul_rn(blk[j * 4 + e], e < 2 ? s0 : s1));
      }
    }
  } else {
    total[0] += blk[0] * s0;  // the WGMMAs' results stay used
  }
}

// Turns (rows_ss): the two warpgroups' WGMMA groups strictly alternate on named barriers 1
// (warpgroup 0's turn) and 2 (warpgroup 1's), the turn passed on when a group has completed
// (kTurnDone) or as soon as it is issued (kTurnIssued).
enum Turns : uint32_t { kFree = 0, kTurnDone = 1, kTurnIssued = 2 };
const char *const kTurnNames[] = {"free", "done", "issued"};
__device__ __forceinline__ void bar_sync(uint32_t id) { asm volatile("bar.sync %0, 256;" ::"r"(id) : "memory"); }
__device__ __forceinline__ void bar_arrive(uint32_t id) { asm volatile("bar.arrive %0, 256;" ::"r"(id) : "memory"); }

// A consumer warp is done with a stage: its arrival on the stage's barrier in both CTAs
// (the stage holds the other CTA's multicast too).
__device__ __forceinline__ void release(uint64_t *bar) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) {
    mbar_arrive(bar);
    mbar_arrive_peer(bar);
  }
}

template <uint32_t F, uint32_t S, uint32_t P, uint32_t T>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(threads_of(F), 1)
    mainloop_kernel(const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b, Params p) {
  constexpr uint32_t kThreads = threads_of(F), kStageBytes = stage_bytes_of(F), kRows = rows_of(F);
  constexpr uint32_t kConsumerWarps = (kThreads - 128) / 32;
  extern __shared__ uint8_t smem_raw[];
  __shared__ uint64_t full[S], empty[S];
  __shared__ float scales[S][256];  // the stages' A scales (all 1: --check's sums are plain)
  uint8_t *ring = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const uint32_t rank = cluster_rank();
  unsigned long long clk0 = 0, ns0 = 0;
  if (threadIdx.x == 0) {
    asm volatile("mov.u64 %0, %%clock64;\n\tmov.u64 %1, %%globaltimer;" : "=l"(clk0), "=l"(ns0));
    for (uint32_t s = 0; s < S; s++) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 2 * kConsumerWarps);  // each consumer warp of both CTAs
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  for (uint32_t i = threadIdx.x; i < S * 256; i += kThreads) scales[i / 256][i % 256] = 1.0f;
  __syncthreads();
  cluster_sync();  // the other CTA's barriers are ready for multicasts and arrivals

  const uint32_t mb = p.m / kRows, units = mb * (p.n / 256), kblocks = p.k / BK;
  const uint32_t cluster = blockIdx.x / 2, clusters = gridDim.x / 2;
  if (threadIdx.x < 128) {
    if constexpr (F == kRows3SS) {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
    } else {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    }
    if (threadIdx.x == 0) {
      uint32_t stage = 0, phase = 0, loads = 0;
      for (uint32_t u = cluster; u < units; u += clusters) {
        const uint32_t m0 = (u % mb) * kRows, n0 = (u / mb) * 256;
        for (uint32_t kb = 0; kb < kblocks; kb++) {
          mbar_wait(&empty[stage], phase ^ 1);
          uint8_t *dst = ring + stage * kStageBytes;
          const bool skip_b = p.loads == 2 && (kb & 1) && loads >= S && (F == kRowsSS || F == kRows3SS);
          if (!p.loads && loads >= S) {
            mbar_arrive(&full[stage]);
          } else {
            mbar_arrive_expect_tx(&full[stage], kStageBytes - (skip_b ? 128 * BK : 0));
            if (F == kRows3SS) {  // A's 192 rows shared (this CTA brings 96), B's own 128
              tma_load_2d_multicast(dst + rank * 96 * BK, &tm_a, &full[stage], kb * BK, m0 + 96 * rank);
              if (!skip_b) tma_load_2d(dst + 192 * BK, &tm_b, &full[stage], kb * BK, n0 + 128 * rank);
            } else if (F == kRowsSS) {  // A's 256 rows shared (this CTA brings half), B's own 128
              tma_load_2d_multicast(dst + rank * 16384, &tm_a, &full[stage], kb * BK, m0 + 128 * rank);
              if (!skip_b) tma_load_2d(dst + 32768, &tm_b, &full[stage], kb * BK, n0 + 128 * rank);
            } else {  // A's own 128 rows, B's 256 shared (this CTA brings half)
              tma_load_2d(dst, &tm_a, &full[stage], kb * BK, m0 + 128 * rank);
              tma_load_2d_multicast(dst + 16384 + rank * 16384, &tm_b, &full[stage], kb * BK, n0 + 128 * rank);
            }
          }
          loads++;
          if (++stage == S) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    if constexpr (F == kRows3SS) {
      asm volatile("setmaxnreg.inc.sync.aligned.u32 160;");
    } else {
      asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    }
    const uint32_t wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0) - 1;
    const uint32_t tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
    const uint32_t lo0 = smem_addr(ring) >> 4;
    uint32_t stage = 0, phase = 0;
    float sink = 0.0f;
    // This warpgroup's WGMMA groups (turns): 2 per K block of each of the cluster's units
    // (rows_ss, the only form with turns).
    const uint32_t my_units = cluster < units ? (units - cluster + clusters - 1) / clusters : 0;
    [[maybe_unused]] const uint32_t groups = my_units * kblocks * 2;
    [[maybe_unused]] uint32_t group = 0;
    for (uint32_t u = cluster; u < units; u += clusters) {
      const uint32_t m0 = (u % mb) * kRows, n0 = (u / mb) * 256;
      constexpr uint32_t kTotals = F == kRows3SS ? 64 : 128;
      float total[kTotals];
#pragma unroll
      for (uint32_t i = 0; i < kTotals; i++) total[i] = 0.0f;
      for (uint32_t kb = 0; kb < kblocks; kb++) {
        mbar_wait(&full[stage], phase);
        const uint32_t lo = lo0 + stage * (kStageBytes / 16);
        const float *sc = scales[stage];
        if constexpr (F == kRows3SS) {
          float blk[64];
          issue_ss<128>(blk, lo + wg * 64 * (BK / 16), lo + 192 * BK / 16);
          const uint32_t r = wg * 64 + warp * 16 + lane / 4;
          const float s0 = ld_shared_f32(&sc[r]), s1 = ld_shared_f32(&sc[r + 8]);
          wgmma_wait<0>();
          release(&empty[stage]);
          promote<64, P>(total, blk, s0, s1);
        } else if constexpr (F == kRowsSS) {
          float blk[64];
#pragma unroll
          for (uint32_t h = 0; h < 2; h++) {
            const bool first = group == 0, last = group + 1 == groups;
            if (T != kFree && (wg == 1 || !first)) bar_sync(1 + wg);
            issue_ss<128>(blk, lo + (wg * 128 + h * 64) * (BK / 16), lo + 32768 / 16);
            if (T == kTurnIssued && (wg == 0 || !last)) bar_arrive(2 - wg);
            const uint32_t r = wg * 128 + h * 64 + warp * 16 + lane / 4;
            const float s0 = ld_shared_f32(&sc[r]), s1 = ld_shared_f32(&sc[r + 8]);
            wgmma_wait<0>();
            if (T == kTurnDone && (wg == 0 || !last)) bar_arrive(2 - wg);
            group++;
            if (h == 1) release(&empty[stage]);
            promote<64, P>(total + h * 64, blk, s0, s1);
          }
        } else if constexpr (F == kColsRS || F == kColsSS) {
          float blk[64];
          uint32_t a[BK / 32][4];
          const uint32_t a_lo = lo + wg * 64 * (BK / 16);
          if constexpr (F == kColsRS) load_a_frags(a, lo << 4, wg * 64 + warp * 16);
          const uint32_t r = wg * 64 + warp * 16 + lane / 4;
          const float s0 = ld_shared_f32(&sc[r]), s1 = ld_shared_f32(&sc[r + 8]);
#pragma unroll
          for (uint32_t c = 0; c < 2; c++) {
            const uint32_t b_lo = lo + (16384 + c * 16384) / 16;
            if constexpr (F == kColsRS) {
              issue_rs(blk, a, b_lo);
            } else {
              issue_ss<128>(blk, a_lo, b_lo);
            }
            const float sb = ld_shared_f32(&sc[128 + c]);
            wgmma_wait<0>();
            if (c == 1) release(&empty[stage]);
            promote<64, P>(total + c * 64, blk, s0 * sb, s1 * sb);
          }
        } else {
          float blk[128];
          issue_ss<256>(blk, lo + wg * 64 * (BK / 16), lo + 16384 / 16);
          const float s0 = ld_shared_f32(&sc[wg * 64 + warp * 16 + lane / 4]);
          wgmma_wait<0>();
          release(&empty[stage]);
          total[0] += blk[0] * s0;
        }
        if (++stage == S) {
          stage = 0;
          phase ^= 1;
        }
      }
      // Element j·4 + e of a 64-row part: row warp·16 + lane/4 (+8 for e ≥ 2), column 8j +
      // 2·(lane % 4) + (e & 1).
      if (p.d != nullptr && F != kN256SS) {
#pragma unroll
        for (uint32_t part = 0; part < kTotals / 64; part++) {
          const uint32_t row_base = F == kRows3SS ? m0 + wg * 64
                                    : F == kRowsSS ? m0 + wg * 128 + part * 64
                                                   : m0 + 128 * rank + wg * 64;
          const uint32_t col_base = F == kRowsSS || F == kRows3SS ? n0 + 128 * rank : n0 + part * 128;
#pragma unroll
          for (uint32_t j = 0; j < 16; j++) {
#pragma unroll
            for (uint32_t e = 0; e < 4; e++) {
              const uint32_t row = row_base + warp * 16 + lane / 4 + (e >= 2 ? 8 : 0);
              const uint32_t col = col_base + 8 * j + 2 * (lane % 4) + (e & 1);
              p.d[(size_t)row * p.n + col] = total[part * 64 + j * 4 + e];
            }
          }
        }
      }
#pragma unroll
      for (uint32_t i = 0; i < kTotals; i++) sink += total[i];
    }
    p.sink[blockIdx.x * kThreads + threadIdx.x] = sink;
  }
  __syncwarp();
  cluster_sync();  // neither CTA leaves while the other may multicast into it or arrive on it
  if (threadIdx.x == 0) {
    unsigned long long clk1, ns1;
    asm volatile("mov.u64 %0, %%clock64;\n\tmov.u64 %1, %%globaltimer;" : "=l"(clk1), "=l"(ns1));
    p.clocks[blockIdx.x * 4 + 0] = clk0;
    p.clocks[blockIdx.x * 4 + 1] = clk1;
    p.clocks[blockIdx.x * 4 + 2] = ns0;
    p.clocks[blockIdx.x * 4 + 3] = ns1;
  }
}

// Random E4M3 codes (no NaN), from a hash of the index and seed.
__global__ void fill_fp8(uint8_t *x, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    uint8_t c = (uint8_t)h;
    if ((c & 0x7F) == 0x7F) c ^= 1;
    x[i] = c;
  }
}

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  if (fn == nullptr) {
    void *f = nullptr;
    cudaDriverEntryPointQueryResult q;
    CUDA_OK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess) {
      std::fprintf(stderr, "no cuTensorMapEncodeTiled\n");
      std::exit(1);
    }
    fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }
  return fn;
}

// rows × k bytes, boxes of box_rows rows × 128 bytes, 128-byte swizzle.
CUtensorMap make_map(const uint8_t *base, uint32_t rows, uint32_t k, uint32_t box_rows) {
  CUtensorMap m;
  const cuuint64_t dims[2] = {k, rows};
  const cuuint64_t strides[1] = {k};
  const cuuint32_t box[2] = {BK, box_rows};
  const cuuint32_t elem[2] = {1, 1};
  if (encode_fn()(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<uint8_t *>(base), dims, strides, box, elem,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
    std::fprintf(stderr, "tensor map encode failed\n");
    std::exit(1);
  }
  return m;
}

using KernelFn = void (*)(CUtensorMap, CUtensorMap, Params);

struct Config {
  uint32_t form, stages, promo, turns;
  KernelFn fn;
};

template <uint32_t F, uint32_t S, uint32_t P, uint32_t T = kFree>
Config config() {
  static_assert(S * stage_bytes_of(F) + 1024 + S * (16 + 1024) <= 227 * 1024, "the ring does not fit");
  return Config{F, S, P, T, mainloop_kernel<F, S, P, T>};
}

// Session 23's first call timed the forms (raw/2026-12-03-s23-call1-*); what is left is
// rows_ss's promotion: its instruction count, its kind, and the warpgroups' turns.
const Config kConfigs[] = {
    config<kRowsSS, 3, kFfma64>(),  config<kRowsSS, 3, kNone>(),   config<kRowsSS, 3, kFfma16>(),
    config<kRowsSS, 3, kFfma32>(),  config<kRowsSS, 3, kFadd64>(), config<kRowsSS, 3, kFfma64, kTurnDone>(),
    config<kRowsSS, 3, kFfma64, kTurnIssued>(), config<kRowsSS, 3, kNone, kTurnDone>(),
    config<kColsRS, 3, kFfma64>(),  config<kColsSS, 3, kFfma64>(), config<kN256SS, 3, kNone>(),
    // Session 24: three consumer warpgroups (is the promotion's cost the window it gets?).
    config<kRows3SS, 4, kFfma64>(), config<kRows3SS, 5, kFfma64>(), config<kRows3SS, 5, kNone>(),
    config<kRows3SS, 5, kFadd64>(), config<kRows3SS, 5, kFfma32>(),
    // Session 24 call 2: the promotion as FMUL + FADD.
    config<kRowsSS, 3, kMulAdd64>(), config<kRows3SS, 5, kMulAdd64>(),
};

// Whether --only's value (FORM/PROMOTE or FORM/PROMOTE/TURNS) names config c.
bool named_by(const Config &c, const std::string &only) {
  const std::string name = std::string(kFormNames[c.form]) + "/" + kPromoNames[c.promo];
  return only == name || only == name + "/" + kTurnNames[c.turns];
}

struct Device {
  uint8_t *a = nullptr, *b = nullptr;
  float *d = nullptr, *sink = nullptr;
  unsigned long long *clocks = nullptr;
  int sms = 0;
};

// One launch of `c` on m × n × k; returns its time (ms) and, through ghz, the median over
// CTAs of their clock rate.
float launch(const Config &c, const Device &dev, uint32_t m, uint32_t n, uint32_t k, uint32_t loads, bool check,
             double *ghz) {
  const CUtensorMap ta = make_map(dev.a, m, k, c.form == kRows3SS ? 96 : 128), tb = make_map(dev.b, n, k, 128);
  Params p{m, n, k, loads, check ? dev.d : nullptr, dev.sink, dev.clocks};
  const int smem = (int)(c.stages * stage_bytes_of(c.form) + 1024);
  CUDA_OK(cudaFuncSetAttribute(c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int grid = dev.sms / 2 * 2;
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  CUDA_OK(cudaEventRecord(e0));
  c.fn<<<grid, threads_of(c.form), smem>>>(ta, tb, p);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaEventRecord(e1));
  CUDA_OK(cudaEventSynchronize(e1));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
  CUDA_OK(cudaEventDestroy(e0));
  CUDA_OK(cudaEventDestroy(e1));
  std::vector<unsigned long long> clk((size_t)grid * 4);
  CUDA_OK(cudaMemcpy(clk.data(), dev.clocks, clk.size() * sizeof(clk[0]), cudaMemcpyDeviceToHost));
  std::vector<double> rates;
  for (int i = 0; i < grid; i++) {
    const double dns = (double)(clk[i * 4 + 3] - clk[i * 4 + 2]);
    if (dns > 0) rates.push_back((double)(clk[i * 4 + 1] - clk[i * 4 + 0]) / dns);
  }
  std::sort(rates.begin(), rates.end());
  *ghz = rates.empty() ? 0.0 : rates[rates.size() / 2];
  return ms;
}

std::vector<uint8_t> to_host(const uint8_t *d, size_t n) {
  std::vector<uint8_t> h(n);
  CUDA_OK(cudaMemcpy(h.data(), d, n, cudaMemcpyDeviceToHost));
  return h;
}

// Every sum of the forms that give them (rows_ss, rows3_ss, cols_ss, cols_rs) against FP64
// on a small problem. FP8 WGMMA adds within a K block with about 14 bits (kernels.md, "FP8
// WGMMA accumulates with about 14 bits"), so a sum may be off by a few 2^-13 of the
// magnitudes it adds, more than its own size where full-range random codes cancel
// (-13828 against -13409.8 seen); the bound is 2^-11 of sum |a·b| per output.
constexpr uint32_t kCheckM = 768, kCheckN = 512, kCheckK = 1024;
int check(const Device &dev) {
  const uint32_t m = kCheckM, n = kCheckN, k = kCheckK;
  const auto ha = to_host(dev.a, (size_t)m * k), hb = to_host(dev.b, (size_t)n * k);
  std::vector<double> ref((size_t)m * n), mag((size_t)m * n);
  std::vector<float> fa((size_t)m * k), fb((size_t)n * k);
  for (size_t i = 0; i < fa.size(); i++) fa[i] = gemmd_e4m3_to_f32(ha[i]);
  for (size_t i = 0; i < fb.size(); i++) fb[i] = gemmd_e4m3_to_f32(hb[i]);
  double ref_norm = 0;
  for (uint32_t i = 0; i < m; i++) {
    for (uint32_t j = 0; j < n; j++) {
      double s = 0, sa = 0;
      for (uint32_t q = 0; q < k; q++) {
        const double t = (double)fa[(size_t)i * k + q] * fb[(size_t)j * k + q];
        s += t;
        sa += std::fabs(t);
      }
      ref[(size_t)i * n + j] = s;
      mag[(size_t)i * n + j] = sa;
      ref_norm += s * s;
    }
  }
  ref_norm = std::sqrt(ref_norm);
  int failures = 0;
  for (const Config &c : kConfigs) {
    if (!(c.promo == kFfma64 || c.promo == kFadd64 || c.promo == kMulAdd64) || c.form == kN256SS) continue;
    CUDA_OK(cudaMemset(dev.d, 0xFF, (size_t)m * n * sizeof(float)));  // NaN: unwritten sums show
    double ghz;
    launch(c, dev, m, n, k, 1, true, &ghz);
    std::vector<float> d((size_t)m * n);
    CUDA_OK(cudaMemcpy(d.data(), dev.d, d.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double err = 0;
    size_t bad = 0, first_bad = 0;
    for (size_t i = 0; i < d.size(); i++) {
      const double e = std::fabs((double)d[i] - ref[i]);
      if (!(e <= std::ldexp(mag[i], -11) + 1e-6 * std::fabs(ref[i]))) {
        if (bad++ == 0) first_bad = i;
      }
      err += std::isnan(e) ? 1e300 : e * e;
    }
    const double rel = std::sqrt(err) / ref_norm;
    std::printf("check %-8s %-6s %-6s %ux%ux%u  |D - ref| / |ref| = %.3g  %zu bad%s", kFormNames[c.form],
                kPromoNames[c.promo], kTurnNames[c.turns], m, n, k, rel, bad,
                bad ? "" : "\n");
    if (bad) {
      std::printf(" (first at row %zu col %zu: %g vs %g)\n", first_bad / n, first_bad % n, d[first_bad],
                  ref[first_bad]);
      failures++;
    }
  }
  return failures;
}

}  // namespace

int main(int argc, char **argv) {
  uint32_t m = 4096, n = 7168, k = 16384, reps = 7;
  bool do_check = false;
  std::string only;  // FORM/PROMOTE[/TURNS]: time only the configs so named
  std::vector<uint32_t> loads_list = {1, 0};  // Params::loads of each timing pass
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto next = [&]() -> uint32_t { return i + 1 < argc ? (uint32_t)std::strtoul(argv[++i], nullptr, 10) : 0; };
    if (a == "--m") m = next();
    else if (a == "--n") n = next();
    else if (a == "--k") k = next();
    else if (a == "--reps") reps = next();
    else if (a == "--check") do_check = true;
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--loads" && i + 1 < argc) {
      loads_list.clear();
      const std::string v = argv[++i];
      for (size_t q = 0; q < v.size(); q += 2) {  // digits 0-2 separated by commas
        if (v[q] < '0' || v[q] > '2' || (q + 1 < v.size() && v[q + 1] != ',')) {
          loads_list.clear();
          break;
        }
        loads_list.push_back((uint32_t)(v[q] - '0'));
      }
      if (loads_list.empty()) {
        std::fprintf(stderr, "--loads takes values 0, 1, 2 separated by commas, not '%s'\n", v.c_str());
        return 2;
      }
    }
    else {
      std::fprintf(stderr,
                   "usage: %s [--m M] [--n N] [--k K] [--reps R] [--check] [--only FORM/PROMOTE[/TURNS]]\n"
                   "         [--loads 1,0]: a timing pass per value: 1 loads, 0 none after the first pass, 2 B\n"
                   "         only in even K blocks\n"
                   "  M a multiple of 256 or 192 (forms whose rows do not divide it are skipped), N of 256,\n"
                   "  K of 128; --check first compares the forms' sums with FP64\n",
                   argv[0]);
      return 2;
    }
  }
  if (m == 0 || n == 0 || k == 0 || (m % 256 && m % 192) || n % 256 || k % 128 || reps == 0) {
    std::fprintf(stderr, "M must be a multiple of 256 or 192, N of 256, K of 128, reps > 0\n");
    return 2;
  }
  if (!only.empty()) {
    bool named = false;
    for (const Config &c : kConfigs) named = named || named_by(c, only);
    if (!named) {
      std::fprintf(stderr, "--only %s names no config (FORM/PROMOTE[/TURNS], say rows_ss/ffma64/free)\n",
                   only.c_str());
      return 2;
    }
  }
  Device dev;
  CUDA_OK(cudaDeviceGetAttribute(&dev.sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t am = std::max<size_t>((size_t)m * k, (size_t)kCheckM * kCheckK),
               bm = std::max<size_t>((size_t)n * k, (size_t)kCheckN * kCheckK);
  CUDA_OK(cudaMalloc(&dev.a, am));
  CUDA_OK(cudaMalloc(&dev.b, bm));
  CUDA_OK(cudaMalloc(&dev.d, (size_t)kCheckM * kCheckN * sizeof(float)));
  CUDA_OK(cudaMalloc(&dev.sink, (size_t)dev.sms * kMaxThreads * sizeof(float)));
  CUDA_OK(cudaMalloc(&dev.clocks, (size_t)dev.sms * 4 * sizeof(unsigned long long)));
  const uint64_t seed = (uint64_t)std::time(nullptr) * 2654435761u;
  fill_fp8<<<1024, 256>>>(dev.a, am, seed);
  fill_fp8<<<1024, 256>>>(dev.b, bm, seed ^ 0x5555);
  CUDA_OK(cudaDeviceSynchronize());
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs; seed %llu; main loop only (no epilogue), %u x %u x %u, median of %u\n", prop.name,
              dev.sms, (unsigned long long)seed, m, n, k, reps);
  if (do_check && check(dev) != 0) {
    std::printf("CHECK FAILED\n");
    return 1;
  }
  const double flops = 2.0 * m * n * k;
  std::printf("%-8s %6s %7s %6s %5s %10s %8s %6s %8s\n", "form", "stages", "promote", "turns", "loads", "us", "TFLOPS",
              "GHz", "of_peak");
  for (const uint32_t loads : loads_list) {
    for (const Config &c : kConfigs) {
      if (!only.empty() && !named_by(c, only)) continue;
      if (m % rows_of(c.form) != 0) {
        std::printf("%-8s %6u %7s %6s %5d   skipped: M not a multiple of %u\n", kFormNames[c.form], c.stages,
                    kPromoNames[c.promo], kTurnNames[c.turns], (int)loads, rows_of(c.form));
        continue;
      }
      double ghz = 0;
      launch(c, dev, m, n, k, loads, false, &ghz);  // warm-up
      std::vector<float> ms;
      std::vector<double> rates;
      for (uint32_t r = 0; r < reps; r++) {
        ms.push_back(launch(c, dev, m, n, k, loads, false, &ghz));
        rates.push_back(ghz);
      }
      std::sort(ms.begin(), ms.end());
      std::sort(rates.begin(), rates.end());
      const double us = ms[ms.size() / 2] * 1e3, tf = flops / us * 1e-6, g = rates[rates.size() / 2];
      // Of the tensor cores' dense FP8 rate at the clock the SMs ran (8192 FLOP/clk/SM).
      const double peak = dev.sms * 8192.0 * g * 1e-3;
      std::printf("%-8s %6u %7s %6s %5d %10.1f %8.1f %6.3f %7.1f%%\n", kFormNames[c.form], c.stages,
                  kPromoNames[c.promo], kTurnNames[c.turns], (int)loads, us, tf, g, 100.0 * tf / peak);
    }
  }
  return 0;
}
