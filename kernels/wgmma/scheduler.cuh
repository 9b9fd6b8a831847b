// The WGMMA kernel's tile scheduler: what every role reads from the batch (BatchView), and
// the persistent grid's units: which units a CTA takes, and a unit's group, rows, columns
// and K blocks. Every role of a CTA walks the same units in the same order.
#ifndef GEMMD_KERNELS_WGMMA_SCHEDULER_CUH_
#define GEMMD_KERNELS_WGMMA_SCHEDULER_CUH_

#include <stdint.h>

#include "kernels/gpu_gemm_device.cuh"
#include "kernels/group_table.h"
#include "kernels/wgmma/layout.cuh"
#include "kernels/wgmma/ptx.cuh"

namespace gemmd::wgmma {

struct TileRef {
  uint32_t group, m0, n0;
  uint32_t tile;   // the output tile (the unit less its K part)
  uint32_t part;   // its K part, of `parts`
  uint32_t parts;  // the K parts of this unit's tile: 1 but for split-K's tail units
};

// Unit t of the batch. With split-K (`parts` > 1) the units are the `whole` output tiles of
// the grid's full rounds, each one unit, then the `tail` tiles of the last, partial round,
// each in `parts` K parts: unit whole + u is part u / tail of tile whole + u % tail (a batch
// of fewer tiles than the grid has no full round: every tile is split). Else tile t. A
// tile's group, rows and columns. The group: t / group_tiles where every
// group has group_tiles tiles (decode batches: no load), else a binary search over the
// prefix sums (one dependent global load per step, ~7 for 128 groups, at every tile).
// Within a group, consecutive tiles walk M first, so CTAs running together share B tiles.
template <typename K, uint32_t BN>
__device__ __forceinline__ TileRef locate(const gemmd_group_params_t *table, const uint32_t *starts, uint32_t n_groups,
                                          uint32_t group_tiles, uint32_t t, uint32_t parts = 1, uint32_t whole = 0,
                                          uint32_t tail = 1) {
  uint32_t part = 0, tile_parts = 1;
  if (K::kSplit && parts > 1 && t >= whole) {
    const uint32_t u = t - whole;
    part = u / tail;
    t = whole + (u - part * tail);
    tile_parts = parts;
  }
  uint32_t lo = 0, local = t;
  if (group_tiles != 0) {
    lo = t / group_tiles;
    local = t - lo * group_tiles;
  } else {
    uint32_t hi = n_groups;
    while (hi - lo > 1) {
      const uint32_t mid = (lo + hi) / 2;
      if (starts[mid] <= t) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    local = t - starts[lo];
  }
  const uint32_t m_tiles = gemmd_ceil_div(table[lo].m, K::BM);
  return {lo, (local % m_tiles) * K::BM, (local / m_tiles) * BN, t, part, tile_parts};
}

// The K blocks [kb0, kb1) of a unit whose tile has `kblocks`: all, or its part's even share.
struct KRange {
  uint32_t kb0, kb1;
};
template <typename K>
__device__ __forceinline__ KRange k_range(const TileRef &tr, uint32_t kblocks) {
  if (K::kSplit && tr.parts > 1) return {tr.part * kblocks / tr.parts, (tr.part + 1) * kblocks / tr.parts};
  return {0, kblocks};
}

// What every role of the kernel reads from the batch.
struct BatchView {
  const gemmd_group_params_t *table;
  const uint32_t *starts;  // tile prefix sums, n_groups + 1, then group_tiles
  uint32_t group_tiles;    // every group's tiles where all have as many, else 0 (starts[n_groups + 1])
  const uint8_t *tmaps;    // kMapsPerGroup per group: A, B, D
  const float *sa_arena;
  uint8_t *d_arena;
  uint32_t n_groups, total_tiles;  // total_tiles: the grid's units
  uint32_t tiles;                  // output tiles
  uint32_t parts, whole, tail;     // split-K (locate): K parts of a tail tile (1: none), the
                                   // tiles before the tail, the tail's tiles
  float *ws;                       // split-K's workspace (ROWS128_SPLIT)
};

// BatchView::group_tiles (v.tiles and v.starts set): a one-group batch's are the batch's,
// so no prefix sum is read before the first loads (through an asm, so the compiler cannot
// specialize the kernel on the value).
__device__ __forceinline__ uint32_t group_tiles_of(const BatchView &v) {
  uint32_t group_tiles = v.n_groups == 1 ? v.tiles : v.starts[v.n_groups + 1];
  asm volatile("mov.u32 %0, %0;" : "+r"(group_tiles));
  return group_tiles;
}

// The units of this CTA: from first_unit, every unit_step. Paired tiles (K::kPair): a unit
// is a pair of adjacent column tiles of the same rows (the host counts the tiles of a width
// 2·BN), the cluster's; its CTA of rank r takes the pair's column tile r, or, where the
// group has no such tile, the pair's first again (both write the same values).
template <typename K>
__device__ __forceinline__ uint32_t first_unit() {
  return K::kPair ? blockIdx.x / 2 : blockIdx.x;
}
template <typename K>
__device__ __forceinline__ uint32_t unit_step() {
  return K::kPair ? gridDim.x / 2 : gridDim.x;
}
template <typename K, uint32_t BN>
__device__ __forceinline__ TileRef locate_unit(const BatchView &v, uint32_t t) {
  if constexpr (K::kPair) {
    TileRef tr = locate<K, 2 * BN>(v.table, v.starts, v.n_groups, v.group_tiles, t);
    const uint32_t n0 = tr.n0 + cluster_rank() * BN;
    if (n0 < v.table[tr.group].n) tr.n0 = n0;
    return tr;
  } else {
    return locate<K, BN>(v.table, v.starts, v.n_groups, v.group_tiles, t, v.parts, v.whole, v.tail);
  }
}

}  // namespace gemmd::wgmma

#endif  // GEMMD_KERNELS_WGMMA_SCHEDULER_CUH_
