// The WGMMA kernel's epilogue, per consumer warpgroup and tile: split-K's sum of the K
// parts (add_parts), then B's per-row or per-tensor scale, rounding to BF16/FP16, and the
// stores (store_tile): the warpgroup's rows staged in shared memory and written out in
// 16-byte pieces, or by TMA tensor stores (the TMA-store kind); direct stores from
// registers for FP32 outputs or rows that are not 16-byte aligned.
#ifndef GEMMD_KERNELS_WGMMA_EPILOGUE_CUH_
#define GEMMD_KERNELS_WGMMA_EPILOGUE_CUH_

#include <stdint.h>

#include "kernels/gpu_gemm_device.cuh"
#include "kernels/group_table.h"
#include "kernels/wgmma/layout.cuh"
#include "kernels/wgmma/ptx.cuh"
#include "kernels/wgmma/scheduler.cuh"

namespace gemmd::wgmma {

// A split unit's part of its tile's sums (split-K's tail): written to the workspace
// (params.h); the part that arrives last adds all parts in part order (the same sum
// whichever comes last) into `total` and returns true: it writes the tile. The others
// return false.
template <uint32_t BN>
__device__ __forceinline__ bool add_parts(const BatchView &v, const TileRef &tr, uint32_t wg, uint32_t tid,
                                          float (&total)[BN / 2]) {
  constexpr uint32_t kRegs = BN / 2;
  __shared__ uint32_t arrivals[kConsumers];  // the parts of the warpgroup's tile that arrived before it
  const uint32_t local = tr.tile - v.whole;  // the tile's place in the tail
  float *const partials = v.ws;
  uint32_t *const counter = reinterpret_cast<uint32_t *>(v.ws + (size_t)gridDim.x * kConsumers * kSplitSlotFloats) +
                            local * kConsumers + wg;
  auto slot = [&](uint32_t part) {
    return partials + ((size_t)(part * v.tail + local) * kConsumers + wg) * kSplitSlotFloats + tid;
  };
  float *mine = slot(tr.part);
#pragma unroll
  for (uint32_t i = 0; i < kRegs; i++) __stcg(mine + i * 128, total[i]);
  __threadfence();  // the sums are visible before the arrival that announces them
  warpgroup_sync(wg);
  if (tid == 0) arrivals[wg] = atomicAdd(counter, 1u);
  warpgroup_sync(wg);
  if (*reinterpret_cast<volatile uint32_t *>(&arrivals[wg]) + 1 < tr.parts) return false;
  __threadfence();  // every other part's sums are read after their arrivals
  float sum[kRegs];
#pragma unroll
  for (uint32_t i = 0; i < kRegs; i++) sum[i] = 0.0f;
  for (uint32_t p = 0; p < tr.parts; p++) {
    const float *theirs = slot(p);
#pragma unroll
    for (uint32_t i = 0; i < kRegs; i++) sum[i] += p == tr.part ? total[i] : __ldcg(theirs + i * 128);
  }
#pragma unroll
  for (uint32_t i = 0; i < kRegs; i++) total[i] = sum[i];
  if (tid == 0) *counter = 0;  // for the next launch
  return true;
}

// Whether the epilogue stages the tile: half outputs, rows a multiple of 16 bytes, D
// 16-byte aligned (the host encodes D's map for the same groups).
__device__ __forceinline__ bool stages_tile(const gemmd_group_params_t &p, const uint8_t *d) {
  return p.out_dtype != GEMMD_DTYPE_FP32 && p.n % 8 == 0 && reinterpret_cast<uintptr_t>(d) % 16 == 0;
}

// Where a consumer thread's accumulators are: its index in the warpgroup (tid = 32·warp +
// lane), and the tile rows of its first half's elements, row0 and row1 = row0 + 8 (the
// caller's values, so the epilogue reuses what the K loop computed).
struct ThreadRows {
  uint32_t tid, warp, lane;
  uint32_t row0, row1;
};

// Writes consumer warpgroup `wg`'s rows of the tile (`total`: its kHalves 64-row halves) to
// D. Accumulator element j*4 + {0,1} is (row0, col), {2,3} is (row1, col), with col = n0 +
// 8j + 2·(lane % 4) + {0, 1}. tm_d: D's tensor map (TMA-store kind); tr_last: the CTA's last
// tile, whose TMA stores must complete before the CTA exits.
template <typename K, uint32_t BN>
__device__ __forceinline__ void store_tile(const BatchView &v, const gemmd_group_params_t &g, const TileRef &tr,
                                           bool tr_last, uint8_t *ring, uint32_t wg, const ThreadRows &th,
                                           [[maybe_unused]] const uint8_t *tm_d,
                                           const float (&total)[K::kHalves * BN / 2]) {
  using R = Ring<K, BN>;
  constexpr uint32_t kRegs = BN / 2, kHalves = K::kHalves, kWgRows = K::kWgRows;
  const uint32_t tid = th.tid, warp = th.warp, lane = th.lane, row0 = th.row0, row1 = th.row1;
  // The group's fields are copied out of the table first: D may alias it as far as the
  // compiler knows, so every store would otherwise re-read them.
  const uint32_t m = g.m, n = g.n;
  const uint8_t out_dtype = g.out_dtype, b_layout = g.b_layout;
  uint8_t *D = v.d_arena + g.d_offset;
  const float *SB = reinterpret_cast<const float *>(g.b_scales);
  const float sb_tensor = b_layout == GEMMD_SCALE_TENSOR ? SB[0] : 1.0f;
  // Column pair j's B scales (per-row B: one per column; otherwise the tensor's or 1).
  auto col_scales = [&](uint32_t col, float &c0, float &c1) {
    c0 = c1 = sb_tensor;
    if (b_layout == GEMMD_SCALE_ROW) {
      c0 = col < n ? SB[col] : 0.0f;
      c1 = col + 1 < n ? SB[col + 1] : 0.0f;
    }
  };
  if (stages_tile(g, D)) {
    // Through shared memory: the warpgroup's 64 × BN rounded values are staged there, then
    // written out as 16-byte pieces, a warp covering whole rows (coalesced); direct stores
    // from the accumulator layout touch 8 rows per instruction in 4-byte pieces and cost
    // half the time of short-K shapes (docs/bench/kernels.md).
    const uint32_t r0 = warp * 16 + lane / 4;  // row0 within the warpgroup's 64
    if constexpr (K::kTmaStore) {
      // The tile leaves by TMA stores that thread 0 issues and the TMA unit performs while
      // the warpgroup goes on to its next tile; before the staging area is written again,
      // the last tile's stores must have read it.
      const uint32_t row_base = tr.m0 + wg * 64;
      using Boxes = TmaBoxes<BN>;
      uint8_t *stage_out = R::out_staging(ring) + wg * Boxes::kWgBytes;
      constexpr uint32_t kRowBytes = Boxes::kCols * 2;
      if (tid == 0) bulk_wait_read();
      warpgroup_sync(wg);
#pragma unroll
      for (uint32_t j = 0; j < kRegs / 4; j++) {
        const uint32_t c = 8 * j + 2 * (lane % 4);
        float c0, c1;
        col_scales(tr.n0 + c, c0, c1);
        const float *t = total + j * 4;
        const uint32_t box = (c / Boxes::kCols) * Boxes::kBytes, cb = (c % Boxes::kCols) * 2;
        st_shared_u32(stage_out + swizzled(box + r0 * kRowBytes + cb, kRowBytes),
                      gemmd_pack_pair(out_dtype, t[0] * c0, t[1] * c1));
        st_shared_u32(stage_out + swizzled(box + (r0 + 8) * kRowBytes + cb, kRowBytes),
                      gemmd_pack_pair(out_dtype, t[2] * c0, t[3] * c1));
      }
      fence_async_shared();
      warpgroup_sync(wg);
      if (tid == 0) {
#pragma unroll
        for (uint32_t b = 0; b < BN / Boxes::kCols; b++) {
          if (tr.n0 + b * Boxes::kCols < n) {
            tma_store_2d(tm_d, stage_out + b * Boxes::kBytes, tr.n0 + b * Boxes::kCols, row_base);
          }
        }
        bulk_commit();
        if (tr_last) bulk_wait_all();  // the CTA's shared memory outlives its stores
      }
    } else {
#pragma unroll
      for (uint32_t h = 0; h < kHalves; h++) {  // each 64-row half of the warpgroup's rows
        const uint32_t row_base = tr.m0 + wg * kWgRows + h * 64;
        uint8_t *stage_out = R::out_staging(ring) + (wg * kHalves + h) * 64 * R::kOutPitch;
        warpgroup_sync(wg);  // the last tile's staged rows have all been written out
#pragma unroll
        for (uint32_t j = 0; j < kRegs / 4; j++) {
          const uint32_t c = 8 * j + 2 * (lane % 4);
          float c0, c1;
          col_scales(tr.n0 + c, c0, c1);
          const float *t = total + h * kRegs + j * 4;
          st_shared_u32(stage_out + r0 * R::kOutPitch + c * 2, gemmd_pack_pair(out_dtype, t[0] * c0, t[1] * c1));
          st_shared_u32(stage_out + (r0 + 8) * R::kOutPitch + c * 2, gemmd_pack_pair(out_dtype, t[2] * c0, t[3] * c1));
        }
        warpgroup_sync(wg);
        constexpr uint32_t kChunks = BN / 8;  // 16-byte pieces per row
        if constexpr (BN <= 128) {
          // All of the thread's pieces (at most 8) read first, then stored inside the group:
          // the reads' latencies overlap instead of each store waiting for its own read
          // behind a branch (at width 192 this spilled, so that keeps a read per store).
          constexpr uint32_t kPieces = (64 * kChunks + 127) / 128;
          uint4 piece[kPieces];
#pragma unroll
          for (uint32_t u = 0; u < kPieces; u++) {
            const uint32_t i = tid + u * 128, r = i / kChunks, ch = i % kChunks;
            if (i < 64 * kChunks) piece[u] = ld_shared_v4(stage_out + r * R::kOutPitch + ch * 16);
          }
#pragma unroll
          for (uint32_t u = 0; u < kPieces; u++) {
            const uint32_t i = tid + u * 128, r = i / kChunks, ch = i % kChunks, row = row_base + r,
                           col = tr.n0 + ch * 8;
            if (i < 64 * kChunks && row < m && col < n) {
              *reinterpret_cast<uint4 *>(D + ((size_t)row * n + col) * 2) = piece[u];
            }
          }
        } else {
#pragma unroll 4
          for (uint32_t i = tid; i < 64 * kChunks; i += 128) {
            const uint32_t r = i / kChunks, ch = i % kChunks, row = row_base + r, col = tr.n0 + ch * 8;
            if (row < m && col < n) {
              const uint4 piece = ld_shared_v4(stage_out + r * R::kOutPitch + ch * 16);
              *reinterpret_cast<uint4 *>(D + ((size_t)row * n + col) * 2) = piece;
            }
          }
        }
      }
    }
    return;
  }
  // Direct from registers (FP32 out, or rows not 16-byte aligned): each pair of columns
  // goes out in one store.
#pragma unroll
  for (uint32_t h = 0; h < kHalves; h++) {
    const uint32_t hr0 = row0 + h * 64, hr1 = row1 + h * 64;
#pragma unroll
    for (uint32_t j = 0; j < kRegs / 4; j++) {
      const uint32_t col = tr.n0 + 8 * j + 2 * (lane % 4);
      if (col >= n) continue;
      float c0, c1;
      col_scales(col, c0, c1);
      const float *t = total + h * kRegs + j * 4;
      if (col + 1 < n) {
        if (hr0 < m) gemmd_store_out_pair(D, out_dtype, (size_t)hr0 * n + col, t[0] * c0, t[1] * c1);
        if (hr1 < m) gemmd_store_out_pair(D, out_dtype, (size_t)hr1 * n + col, t[2] * c0, t[3] * c1);
      } else {
        if (hr0 < m) gemmd_store_out(D, out_dtype, (size_t)hr0 * n + col, t[0] * c0);
        if (hr1 < m) gemmd_store_out(D, out_dtype, (size_t)hr1 * n + col, t[2] * c0);
      }
    }
  }
  if (K::kTmaStore && tid == 0 && tr_last) bulk_wait_all();  // earlier tiles' stores
}

}  // namespace gemmd::wgmma

#endif  // GEMMD_KERNELS_WGMMA_EPILOGUE_CUH_
