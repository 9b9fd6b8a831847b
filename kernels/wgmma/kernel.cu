// The Hopper grouped FP8 GEMM: TMA loads into a shared-memory ring guarded by mbarriers,
// one producer warpgroup and two consumer warpgroups (setmaxnreg), WGMMA m64nNk32 with FP32
// promotion every 128 of K, a persistent grid over every group of the device-resident batch
// (group_table.h) that gpu_gemm.cu routes here (all but FP32 outputs). This file holds the
// __global__ kernels, the roles they run, and their launch; the parts are beside it:
//   ptx.cuh        the PTX wrappers (mbarrier, TMA, cp.async, WGMMA; wgmma_ops.cuh generated)
//   layout.cuh     the tile kinds and the shared-memory ring
//   scheduler.cuh  the persistent grid's units: a unit's group, rows, columns and K blocks
//   mainloop.cuh   the producer (TMA loads, scales) and the consumers' K blocks and promotion
//   epilogue.cuh   split-K's sum of parts, scaling, rounding and the stores
//   stamps.cuh     the one instrumentation switch, GEMMD_WGMMA_STAMPS (off in gemmd's build)
//   prepare.cc     the host's part of a batch (tensor maps, prefix sums, tile configuration)
//   tile_rules.cc  the host's choice of tile kind, width and K parts
//
// Per output tile of BM × BN (group g, rows m0.., columns n0..; BM 128 or 256 by the batch's
// kind of tile, BN the batch's tile_n):
//   producer warpgroup, thread 0: for each 128-wide K block, two TMA loads (A's BM rows, B's
//     BN rows, 128 bytes of K each) into the next free stage of the ring;
//   producer warpgroup, warp 1: the same stages' scales (A's for the tile's BM rows, B's
//     128×128 block) by cp.async; its 32 lanes are the other arrivals the "full" barrier
//     waits for;
//   consumers (warpgroups 1 and 2, rows +0 and +BM/2), one K block at a time: wait "full",
//     issue the block's four WGMMAs (K = 32 each) into the block accumulator, read its
//     scales from shared memory while they run, wait for them, release the stage ("empty",
//     one arrive per warp) and promote: total += block · sa(row, kb) · sb(n-block, kb)
//     (128×128 B scales; 1 otherwise). While one warpgroup promotes, the other's WGMMAs
//     keep the tensor cores busy. With 256-row tiles each warpgroup does this for its two
//     64-row halves in turn;
//   epilogue: B's per-row or per-tensor scale, rounding to BF16/FP16, stores.
//
// The host side (gemmd_gpu_gemm_prepare) picks the kind and tile_n and writes, into the
// batch before its upload, three tensor maps per group (A in the batch's A arena, B
// wherever the weight lives, D for TMA stores) and the groups' tile prefix sums; the kernel
// binary-searches those to map a tile to its group (or divides, where every group has as
// many tiles). The grid (one CTA per SM) and the code are fixed (every tile_n and every kind
// is compiled in and chosen at run time from the header), so a captured graph replays for
// any batch.
#include <cuda.h>
#include <stdint.h>

#include <algorithm>
#include <mutex>
#include <type_traits>

#include "kernels/errors.h"
#include "kernels/gpu_gemm.h"
#include "kernels/gpu_gemm_bench.h"
#include "kernels/gpu_gemm_device.cuh"
#include "kernels/gpu_gemm_kernels.h"
#include "kernels/wgmma/epilogue.cuh"
#include "kernels/wgmma/layout.cuh"
#include "kernels/wgmma/mainloop.cuh"
#include "kernels/wgmma/params.h"
#include "kernels/wgmma/ptx.cuh"
#include "kernels/wgmma/scheduler.cuh"
#include "kernels/wgmma/stamps.cuh"

namespace gemmd::wgmma {

// One tile for consumer warpgroup `wg` (rows +kWgRows·wg of the tile, in kHalves 64-row
// halves): its K blocks (mainloop.cuh), split-K's sum of parts and the epilogue
// (epilogue.cuh).
template <typename K, uint32_t BN, bool kAE5M2, bool kBE5M2>
__device__ __forceinline__ void consume_tile(const BatchView &v, const gemmd_group_params_t &g, const TileRef &tr,
                                             bool tr_last, uint8_t *ring, Barriers &bars, uint32_t &stage,
                                             uint32_t &phase, uint32_t wg) {
  constexpr uint32_t kRegs = BN / 2, kHalves = K::kHalves, kWgRows = K::kWgRows;
  const uint32_t tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  const KRange kr = k_range<K>(tr, gemmd_ceil_div(g.k, BK));
  if (tr.m0 + wg * kWgRows >= g.m) {
    // None of this warpgroup's rows are the group's: only keep the ring turning (every
    // K part of the tile does the same, so split-K has nothing to add either).
    skip_k_blocks<K, BN>(kr, bars, stage, phase);
    if (K::kTmaStore && tid == 0 && tr_last) bulk_wait_all();  // earlier tiles' stores
    return;
  }
  const uint32_t row0 = tr.m0 + wg * kWgRows + warp * 16 + lane / 4, row1 = row0 + 8;  // in half 0
  const uint32_t r = row0 - tr.m0;  // the tile's row, for the stage's scales
  const bool b_block = g.b_layout == GEMMD_SCALE_BLOCK_128X128;
  const uint32_t jb = (128 - tr.n0 % 128) / 8;  // column groups before B's next 128
  // With TMA stores D's map is fetched now, off the tile's critical path.
  const uint8_t *tm_d = v.tmaps + ((size_t)tr.group * kMapsPerGroup + 2) * GEMMD_GPU_TMAP_BYTES;
  if (K::kTmaStore && tid == 0 && stages_tile(g, v.d_arena + g.d_offset)) {
    tmap_acquire(tm_d);
    tmap_prefetch(tm_d);
  }
  // The K blocks: total (the warpgroup's kHalves 64-row halves, kRegs values each per
  // thread) = the sum of the blocks, each promoted with its scales (mainloop.cuh). Written
  // out here rather than as a helper: as a helper of its own, the compiler made other code
  // for the split-K and wide kinds (docs/bench/kernels.md, "Reading the kernel's SASS").
  float total[kHalves * kRegs];
#pragma unroll
  for (uint32_t i = 0; i < kHalves * kRegs; i++) total[i] = 0.0f;
  if constexpr (kHalves > 1) {
    float blk[kRegs];
    Shadow sh;
    sh.full0 = smem_addr(&bars.full[0]);
    sh.lo0 = desc_lo(ring);
    asm volatile("" : "+r"(sh.full0), "+r"(sh.lo0));  // computed once, kept in registers
    sh.lo = sh.lo0 + stage * (Ring<K, BN>::kStageBytes / 16);
    sh.ready = false;
    for (uint32_t kb = kr.kb0; kb < kr.kb1; kb++) {
      k_block_halves<K, BN, kAE5M2, kBE5M2>(total, blk, stage, phase, ring, bars, wg, r, b_block, sh, kb + 1 < kr.kb1,
                                            jb);
    }
  } else {
    float blk0[kRegs], blk1[kRegs];
    // Two K blocks per iteration, into two accumulator arrays that take turns: the same
    // work as one array, but ptxas schedules it better (docs/bench/kernels.md).
    for (uint32_t kb = kr.kb0; kb < kr.kb1; kb += 2) {
      k_block<K, BN, kAE5M2, kBE5M2>(total, blk0, stage, phase, ring, bars, wg, r, b_block, jb);
      if (kb + 1 < kr.kb1) k_block<K, BN, kAE5M2, kBE5M2>(total, blk1, stage, phase, ring, bars, wg, r, b_block, jb);
    }
  }
  if constexpr (K::kSplit) {
    if (tr.parts > 1 && !add_parts<BN>(v, tr, wg, tid, total)) return;  // not the tile's last part
  }
  store_tile<K, BN>(v, g, tr, tr_last, ring, wg, ThreadRows{tid, warp, lane, row0, row1}, tm_d, total);
}

// A consumer warpgroup: every unit of the CTA, each with the WGMMA instructions of its
// group's input types.
template <typename K, uint32_t BN>
__device__ __forceinline__ void consume(const BatchView &v, uint8_t *ring, Barriers &bars, uint32_t wg) {
  uint32_t stage = 0, phase = 0;
  const bool stamper = kStamps && wg == 0 && threadIdx.x % 128 == 0;
  if (stamper && first_unit<K>() < v.total_tiles) {
    mbar_wait(&bars.full[0], 0);  // (waited again by the first K block: the phase stays done)
    stamp(kStampFirstFull);
  }

  for (uint32_t t = first_unit<K>(); t < v.total_tiles; t += unit_step<K>()) {
    const TileRef tr = locate_unit<K, BN>(v, t);
    const bool last = t + unit_step<K>() >= v.total_tiles;  // the CTA's last tile
    // By reference: the fields are read from the table (L1) where used, not held in
    // registers through the K loop.
    const gemmd_group_params_t &g = v.table[tr.group];
    const bool ae5 = g.a_dtype == GEMMD_DTYPE_FP8_E5M2, be5 = g.b_dtype == GEMMD_DTYPE_FP8_E5M2;
    if (!ae5 && !be5) {
      consume_tile<K, BN, false, false>(v, g, tr, last, ring, bars, stage, phase, wg);
    } else if (!ae5 && be5) {
      consume_tile<K, BN, false, true>(v, g, tr, last, ring, bars, stage, phase, wg);
    } else if (ae5 && !be5) {
      consume_tile<K, BN, true, false>(v, g, tr, last, ring, bars, stage, phase, wg);
    } else {
      consume_tile<K, BN, true, true>(v, g, tr, last, ring, bars, stage, phase, wg);
    }
    if (stamper && t == first_unit<K>()) stamp(kStampFirstTile);
    if (stamper && last) stamp(kStampLastTile);
  }
}

// Runs f(std::integral_constant<uint32_t, BN>{}) for the batch's tile width BN: every
// width is compiled in, and each role picks its instance from the batch header.
template <typename F>
__device__ __forceinline__ void with_tile_n(uint32_t tile_n, F &&f) {
  switch (tile_n) {
    case 128:
      return f(std::integral_constant<uint32_t, 128>{});
    case 64:
      return f(std::integral_constant<uint32_t, 64>{});
    case 32:
      return f(std::integral_constant<uint32_t, 32>{});
    default:
      return f(std::integral_constant<uint32_t, 16>{});
  }
}

// with_tile_n for ROWS256: 96 columns too.
template <typename F>
__device__ __forceinline__ void with_rows256_width(uint32_t tile_n, F &&f) {
  if (tile_n == 96) return f(std::integral_constant<uint32_t, 96>{});
  return with_tile_n(tile_n, f);
}

// with_tile_n for the kernel of kind K: ROWS128_WIDE has 96 and 192 columns only.
template <typename K, typename F>
__device__ __forceinline__ void with_kind_width(uint32_t tile_n, F &&f) {
  if constexpr (K::kId == GEMMD_TILE_ROWS128_WIDE) {
    if (tile_n == 192) return f(std::integral_constant<uint32_t, 192>{});
    return f(std::integral_constant<uint32_t, 96>{});
  } else if constexpr (K::kId == GEMMD_TILE_ROWS256) {
    return with_rows256_width(tile_n, f);
  } else {
    return with_tile_n(tile_n, f);
  }
}

// Runs f(K{}, std::integral_constant<uint32_t, BN>{}) for tile kind `kind` (ROWS256,
// ROWS128_TMA_STORE, else ROWS128) and width `tile_n`: the joint kernel's dispatch.
template <typename F>
__device__ __forceinline__ void with_kind(uint32_t kind, uint32_t tile_n, F &&f) {
  if (kind == GEMMD_TILE_ROWS256) {
    return with_rows256_width(tile_n, [&](auto bn) { f(KindRows256{}, bn); });
  }
  if (kind == GEMMD_TILE_ROWS128_TMA_STORE) {
    return with_tile_n(tile_n, [&](auto bn) { f(KindRows128TmaStore{}, bn); });
  }
  return with_tile_n(tile_n, [&](auto bn) { f(KindRows128{}, bn); });
}

// Thread 0 initializes the ring's barriers: "full" waits for the TMA thread and the scale
// warp's 32 lanes, "empty" for `consumer_warps` consumer warps. The caller then meets the
// threads that use them.
__device__ __forceinline__ void init_barriers(Barriers &bars, uint32_t consumer_warps) {
  if (threadIdx.x == 0) {
    for (uint32_t s = 0; s < kMaxStages; s++) {
      mbar_init(&bars.full[s], 1 + 32);
      mbar_init(&bars.empty[s], consumer_warps);
    }
    stamps_init();
    mbar_init_fence();
  }
}

// The kernel of tile kind K; on a batch prepared for another kind it returns at once.
template <typename K>
__global__ void __launch_bounds__(kThreads, 1) wgmma_gemm_kernel(const uint8_t *batch, float *ws) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ Barriers bars;
  uint8_t *ring = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));

  if (threadIdx.x == 0) stamp(kStampEntry);
  // Global reads the launch's first loads wait for, started now: the first group's table
  // row, and a one-group batch's tensor maps (its scheduling area at kPrologueMaps), so the
  // TMA unit's fetch of the maps is an L2 hit.
  if (threadIdx.x == 32) prefetch_l2(batch + sizeof(gemmd_batch_header_t));
  if (threadIdx.x == 64) {
    prefetch_l2(batch + kPrologueMaps);
    prefetch_l2(batch + kPrologueMaps + GEMMD_GPU_TMAP_BYTES);
  }
  // The header's fields are read before the CTA's setup and used after it.
  const gemmd_batch_header_t header = *reinterpret_cast<const gemmd_batch_header_t *>(batch);
  init_barriers(bars, 4 * kConsumers);  // one arrival per consumer warp
  __syncthreads();
  const gemmd_batch_header_t *hdr = &header;
  if (hdr->tile_kind != K::kId) return;
  if (threadIdx.x == 0) stamp(kStampHeader);
  BatchView v;
  v.n_groups = hdr->n_groups;
  v.tiles = hdr->total_tiles;
  v.total_tiles = v.tiles;
  v.parts = 1;
  v.whole = v.tiles;
  v.tail = 1;
  if (K::kSplit && hdr->k_splits > 1) {
    // The tiles of the grid's last round, split in K over the CTAs that round leaves idle:
    // the host's parts, or as many as fit a smaller grid (the workspace holds a grid's).
    const uint32_t tail = v.tiles % gridDim.x, parts = min((uint32_t)hdr->k_splits, gridDim.x / max(tail, 1u));
    if (tail > 0 && parts > 1) {
      v.parts = parts;
      v.whole = v.tiles - tail;
      v.tail = tail;
      v.total_tiles = v.whole + tail * parts;
    }
  }
  v.ws = ws;
  v.table = reinterpret_cast<const gemmd_group_params_t *>(batch + sizeof(gemmd_batch_header_t));
  v.tmaps = batch + hdr->sched_arena;
  v.starts = reinterpret_cast<const uint32_t *>(v.tmaps + (size_t)v.n_groups * kMapsPerGroup * GEMMD_GPU_TMAP_BYTES);
  v.group_tiles = group_tiles_of(v);
  if (threadIdx.x == 0) stamp(kStampSched, v.group_tiles);
  v.sa_arena = reinterpret_cast<const float *>(batch + hdr->sa_arena);
  v.d_arena = const_cast<uint8_t *>(batch) + hdr->d_arena;
  const uint32_t tile_n = hdr->tile_n;

  // The producer warpgroup gives its registers to the consumers; each role then runs the
  // batch's tile width.
  if (threadIdx.x < 128) {
    setmaxnreg_dec<40>();
    if (threadIdx.x / 32 == 1) {
      return with_kind_width<K>(tile_n, [&](auto bn) { load_scales<K, decltype(bn)::value>(v, ring, bars); });
    }
    if (threadIdx.x != 0) return;
    stamp(kStampSynced);
    return with_kind_width<K>(tile_n, [&](auto bn) { produce<K, decltype(bn)::value>(v, ring, bars); });
  }
  setmaxnreg_inc<232>();
  // Warp-uniform; through a shuffle ptxas knows it, and keeps what derives from it (the
  // WGMMA descriptors) in uniform registers.
  const uint32_t wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0) - 1;
  with_kind_width<K>(tile_n, [&](auto bn) { consume<K, decltype(bn)::value>(v, ring, bars, wg); });
}

// ROWS256 batches run in this kernel: the three unsplit kinds' code in one function, picked
// by the header's kind. Here ptxas issues each 64-row half's four QGMMAs back to back
// (their descriptors made ahead), as it does not in a kernel of ROWS256 alone: 6–11% faster
// at M ≥ 4096 (docs/bench/kernels.md). A batch of another kind returns at once (checked on
// a copy the compiler cannot see through, so it keeps the other kinds' code).
// It runs in 2-CTA clusters (launch_joint_pairs), its ROWS256 tiles paired (K::kPair): both
// CTAs' barriers exist before either CTA's loads or arrivals reach the other, and neither
// leaves before the other is done, so the producer warpgroup's idle threads wait at the
// closing cluster barrier instead of exiting.
// Its body is wgmma_gemm_kernel's with that dispatch, written out: sharing more of the two
// through helpers (the BatchView's fill, say) changes both kernels' SASS, since the compiler
// simplifies a helper before inlining it, and these are the measured ones.
__global__ void __launch_bounds__(kThreads, 1) wgmma_gemm_kernel_joint(const uint8_t *batch, float *ws) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ Barriers bars;
  uint8_t *ring = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));

  if (threadIdx.x == 0) stamp(kStampEntry);
  if (threadIdx.x == 32) prefetch_l2(batch + sizeof(gemmd_batch_header_t));  // the first group
  const auto *hdr = reinterpret_cast<const gemmd_batch_header_t *>(batch);
  const uint32_t kind = hdr->tile_kind;
  uint32_t opaque_kind;  // the same value, hidden from the compiler by the asm
  asm volatile("mov.u32 %0, %1;" : "=r"(opaque_kind) : "r"(kind));
  if (opaque_kind != KindRows256::kId) return;
  if (threadIdx.x == 0) stamp(kStampHeader);
  BatchView v;
  v.n_groups = hdr->n_groups;
  v.total_tiles = hdr->total_tiles;
  v.tiles = v.total_tiles;
  v.parts = 1;
  v.whole = v.tiles;
  v.tail = 1;
  v.ws = ws;
  v.table = reinterpret_cast<const gemmd_group_params_t *>(batch + sizeof(gemmd_batch_header_t));
  v.tmaps = batch + hdr->sched_arena;
  v.starts = reinterpret_cast<const uint32_t *>(v.tmaps + (size_t)v.n_groups * kMapsPerGroup * GEMMD_GPU_TMAP_BYTES);
  v.group_tiles = group_tiles_of(v);
  if (threadIdx.x == 0) stamp(kStampSched, v.group_tiles);
  v.sa_arena = reinterpret_cast<const float *>(batch + hdr->sa_arena);
  v.d_arena = const_cast<uint8_t *>(batch) + hdr->d_arena;
  const uint32_t tile_n = hdr->tile_n;

  init_barriers(bars, 2 * 4 * kConsumers);  // every consumer warp of both CTAs
  cluster_sync();  // both CTAs' barriers exist before either's loads or arrivals reach the other
  if (threadIdx.x < 128) {
    setmaxnreg_dec<40>();
    if (threadIdx.x / 32 == 1) {
      with_kind(kind, tile_n,
                [&](auto k, auto bn) { load_scales<decltype(k), decltype(bn)::value>(v, ring, bars); });
    } else if (threadIdx.x == 0) {
      stamp(kStampSynced);
      with_kind(kind, tile_n, [&](auto k, auto bn) { produce<decltype(k), decltype(bn)::value>(v, ring, bars); });
    }
  } else {
    setmaxnreg_inc<232>();
    // Warp-uniform; through a shuffle ptxas knows it, and keeps what derives from it (the
    // WGMMA descriptors) in uniform registers.
    const uint32_t wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0) - 1;
    with_kind(kind, tile_n, [&](auto k, auto bn) { consume<decltype(k), decltype(bn)::value>(v, ring, bars, wg); });
  }
  // Neither CTA leaves while the other may still multicast into it or arrive on its
  // barriers.
  __syncwarp();
  cluster_sync();
}

// ---- Launch --------------------------------------------------------------------------------

// Launches kKernel on `batch` (one CTA per SM); its shared-memory limit is set once, on
// the first launch (a thread-safe static).
template <void (*kKernel)(const uint8_t *, float *)>
int launch(const uint8_t *batch, float *ws, cudaStream_t stream) {
  static const bool ready =
      cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmemBytes) == cudaSuccess;
  if (!ready) return GEMMD_EDEVICE;
  kKernel<<<sm_count(), kThreads, kSmemBytes, stream>>>(batch, ws);
  return cudaGetLastError() == cudaSuccess ? GEMMD_OK : GEMMD_EDEVICE;
}

// Launches the joint kernel in 2-CTA clusters, as many as fit at once (a GPC with an odd
// number of free SMs leaves one idle; a larger persistent grid would run a second wave).
int launch_joint_pairs(const uint8_t *batch, float *ws, cudaStream_t stream) {
  static int grid = 0;
  static std::once_flag once;
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = 2;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmemBytes;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  std::call_once(once, [&] {
    if (cudaFuncSetAttribute(wgmma_gemm_kernel_joint, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmemBytes) !=
        cudaSuccess) {
      return;
    }
    cudaLaunchConfig_t probe = cfg;
    probe.gridDim = dim3(2 * (unsigned)sm_count());
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, wgmma_gemm_kernel_joint, &probe) == cudaSuccess && clusters > 0) {
      grid = std::min(2 * clusters, sm_count() / 2 * 2);
    }
  });
  if (grid == 0) return GEMMD_EDEVICE;
  cfg.gridDim = dim3((unsigned)grid);
  cfg.stream = stream;
  if (cudaLaunchKernelEx(&cfg, wgmma_gemm_kernel_joint, batch, ws) != cudaSuccess) return GEMMD_EDEVICE;
  return cudaGetLastError() == cudaSuccess ? GEMMD_OK : GEMMD_EDEVICE;
}

// Split-K's workspace for callers that pass none (benchmarks, tests: one stream), zeroed,
// made on first use. The engine gives each of its streams its own.
float *process_workspace() {
  static float *ws = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void *p = nullptr;
    const uint64_t bytes = split_ws_bytes((uint32_t)sm_count());
    if (cudaMalloc(&p, bytes) == cudaSuccess && cudaMemset(p, 0, bytes) == cudaSuccess &&
        cudaDeviceSynchronize() == cudaSuccess) {
      ws = static_cast<float *>(p);
    }
  });
  return ws;
}

}  // namespace gemmd::wgmma

using namespace gemmd::wgmma;

extern "C" uint64_t gemmd_gpu_gemm_workspace_bytes(void) { return split_ws_bytes((uint32_t)sm_count()); }

int gemmd_gpu_gemm_wgmma(const void *batch, uint32_t kinds, void *workspace, cudaStream_t stream) {
  const auto *b = static_cast<const uint8_t *>(batch);
  float *ws = static_cast<float *>(workspace);
  if ((kinds & (1u << GEMMD_TILE_ROWS128_SPLIT)) && ws == nullptr) {
    ws = process_workspace();
    if (ws == nullptr) return GEMMD_EDEVICE;
  }
  int rc = GEMMD_OK;
  if (kinds & (1u << GEMMD_TILE_ROWS128)) rc = launch<wgmma_gemm_kernel<KindRows128>>(b, ws, stream);
  if (rc == GEMMD_OK && (kinds & (1u << GEMMD_TILE_ROWS128_TMA_STORE))) {
    rc = launch<wgmma_gemm_kernel<KindRows128TmaStore>>(b, ws, stream);
  }
  if (rc == GEMMD_OK && (kinds & (1u << GEMMD_TILE_ROWS256))) rc = launch_joint_pairs(b, ws, stream);
  if (rc == GEMMD_OK && (kinds & (1u << GEMMD_TILE_ROWS128_SPLIT))) {
    rc = launch<wgmma_gemm_kernel<KindRows128Split>>(b, ws, stream);
  }
  if (rc == GEMMD_OK && (kinds & (1u << GEMMD_TILE_ROWS128_WIDE))) {
    rc = launch<wgmma_gemm_kernel<KindRows128Wide>>(b, ws, stream);
  }
  return rc;
}

// ---- Stamps (gpu_gemm_bench.h) -------------------------------------------------------------

extern "C" const char *gemmd_gpu_gemm_stamp_name(uint32_t point) {
  return point < kStampPoints ? kStampNames[point] : "?";
}

extern "C" int gemmd_gpu_gemm_wg_stamps(uint64_t *out, uint32_t *ctas, uint32_t *blocks) {
  *ctas = kStampCtas;
  *blocks = 2 * kMaxStages;
  return read_wg_stamps(out);
}

extern "C" int gemmd_gpu_gemm_stamps(uint64_t *out, uint32_t *ctas, uint32_t *points) {
  *ctas = kStampCtas;
  *points = kStampPoints;
  return read_point_stamps(out);
}
