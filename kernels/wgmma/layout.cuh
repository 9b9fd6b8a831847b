// The WGMMA kernel's tile kinds and its shared memory: the CTA's threads, the ring of
// stages the producer fills and the consumers read (tiles, scales, scale chunks), the
// output staging area, and the ring's mbarriers.
#ifndef GEMMD_KERNELS_WGMMA_LAYOUT_CUH_
#define GEMMD_KERNELS_WGMMA_LAYOUT_CUH_

#include <stdint.h>

#include "kernels/group_table.h"
#include "kernels/wgmma/params.h"

namespace gemmd::wgmma {

// Tile kinds (gemmd_tile_kind_t, group_table.h), chosen per batch on the host with the
// tile width (gemmd_batch_header_t.tile_kind and .tile_n; tile_rules.h), each its own
// kernel (every width compiled in; a kernel launched on a batch of another kind does
// nothing), so a graph captured per kind replays for any batch of that kind:
//   ROWS128: BM = 128 (two consumer warpgroups × 64 rows); the epilogue stages the tile in
//     shared memory and writes 16-byte pieces;
//   ROWS128_TMA_STORE: the same tile; the staged tile leaves by TMA tensor stores (a
//     third tensor map per group, for D), which the warpgroup does not wait for;
//   ROWS256: BM = 256, each consumer warpgroup 128 rows in two 64-row halves that share
//     one block accumulator (B read once per 256 rows: fewer bytes per FLOP), in the joint
//     kernel, in 2-CTA clusters whose CTAs take adjacent column tiles and share A's rows by
//     multicast (the host counts the tiles of a pair's width); 16..128 columns, and 96
//     (promoted across B's scale rows as ROWS128_WIDE's);
//   ROWS128_SPLIT: ROWS128 tiles; those of the grid's last, partial round (all of them
//     where the batch has fewer tiles than the grid) have K cut into header.k_splits parts
//     (split-K), each part a unit of the persistent grid on a CTA that round leaves idle;
//     each part's FP32 sums go to a workspace and the last part of a tile to arrive adds
//     them all (in part order) and writes the tile;
//   ROWS128_WIDE: ROWS128 tiles of 96 or 192 columns, widths that do not divide 128 (a
//     tile's columns may cross into the next row of B's 128×128 scales: those columns are
//     promoted with that row's scale). A kernel of their own: compiled into ROWS128's they
//     more than doubled its code, and ROWS128 got up to 7% slower at K = 512.
// tile_n (16..128 columns; 96 or 192 for ROWS128_WIDE) gives the persistent grid tiles for
// every SM even when N is small (decode). The ring's stage count follows from the stage
// size.
constexpr uint32_t kThreads = 128 * (1 + kConsumers);
constexpr uint32_t kRingBytes = 227 * 1024 - 2048;  // dynamic shared memory for the ring
constexpr uint32_t kMaxStages = 16;
constexpr uint32_t kSmemBytes = kRingBytes + 1024 /* alignment */;
// Where a one-group batch has its tensor maps (its scheduling area's start: the header, its
// row and up to two quantization jobs take less, rounded up to 256 by gemmd's engine and
// gemm_bench), which the kernels of one kind prefetch into L2 at entry.
constexpr uint32_t kPrologueMaps = 256;

template <uint32_t kKind, uint32_t kRows, bool kTmaStoreOut, bool kSplitK = false>
struct Kind {
  static constexpr uint32_t kId = kKind;  // gemmd_tile_kind_t
  static constexpr uint32_t BM = kRows;
  static constexpr bool kTmaStore = kTmaStoreOut;
  static constexpr bool kSplit = kSplitK;
  static constexpr uint32_t kWgRows = BM / kConsumers;  // a consumer warpgroup's rows of the tile
  static constexpr uint32_t kHalves = kWgRows / 64;     // its 64-row WGMMA passes per K block
  static constexpr uint32_t kStageA = BM * BK;
  // Tiles in 2-CTA cluster pairs sharing A's rows (ROWS256, in the joint kernel).
  static constexpr bool kPair = kKind == GEMMD_TILE_ROWS256;
  static_assert(!(kTmaStore && kHalves > 1), "TMA stores are built for 64-row warpgroups");
  static_assert(!(kSplit && (kTmaStore || kHalves > 1)), "split-K is built for ROWS128");
};
using KindRows128 = Kind<GEMMD_TILE_ROWS128, 128, false>;
using KindRows128TmaStore = Kind<GEMMD_TILE_ROWS128_TMA_STORE, 128, true>;
using KindRows256 = Kind<GEMMD_TILE_ROWS256, 256, false>;
using KindRows128Split = Kind<GEMMD_TILE_ROWS128_SPLIT, 128, false, true>;
using KindRows128Wide = Kind<GEMMD_TILE_ROWS128_WIDE, 128, false>;

// A stage's scales, copied in by the producer warpgroup's second warp (cp.async): A's for
// the tile's BM rows at the stage's K block, and B's 128×128 block scale (b_next: the next
// row of them, for tiles whose columns cross into it).
template <uint32_t BM>
struct StageScales {
  float a[BM];
  float b;
  float b_next;
  float pad[2];
};

// Scales in chunks (256-row tiles with K >= 4096, mainloop.cuh's load_scale_chunks): the
// scale warp copies A's and B's scales four K blocks at a time, 16 bytes per row, into one
// of two chunks in shared memory, and fills each stage's scales from there. Widths that do
// not divide 128 also take the next row of B's block scales (b[4..7]).
template <uint32_t BM, uint32_t BN>
struct ScaleChunk {
  static constexpr bool kNext = 128 % BN != 0;
  float a[BM][4];
  float b[kNext ? 8 : 4];
};
template <typename K, uint32_t BN>
constexpr uint32_t kScaleChunkBytes = K::BM == 256 ? 2 * sizeof(ScaleChunk<K::BM, BN>) : 0;

// The TMA-store epilogue's staging, per consumer warpgroup: BN / kCols boxes of 64 rows ×
// kCols 2-byte values, dense and swizzled as D's tensor map reads them.
template <uint32_t BN>
struct TmaBoxes {
  static constexpr uint32_t kCols = BN < 64 ? BN : 64;
  static constexpr uint32_t kBytes = 64 * kCols * 2;
  static constexpr uint32_t kWgBytes = 64 * BN * 2;
};

template <typename K, uint32_t BN>
struct Ring {
  static constexpr uint32_t kStageBytes = K::kStageA + BN * BK;
  static constexpr uint32_t kPerStage = kStageBytes + sizeof(StageScales<K::BM>);
  // The output staging area: with TMA stores, per consumer warpgroup, 64 rows × BN 2-byte
  // values as TmaBoxes<BN> boxes (1024-aligned); otherwise the tile's BM rows of BN 2-byte
  // values, each row padded by 16 bytes where needed so a warp's pair writes (8 rows × 4
  // pairs) fall in 32 different banks (an odd number of 16-byte pieces per row).
  static constexpr uint32_t kOutPitch = BN * 2 + ((BN * 2 / 16) % 2 == 0 ? 16 : 0);
  static constexpr uint32_t kOutBytes = K::kTmaStore ? 2 * 64 * BN * 2 + 1024 : K::BM * kOutPitch;
  static constexpr uint32_t kChunkBytes = kScaleChunkBytes<K, BN>;
  static constexpr uint32_t kStages = (kRingBytes - kOutBytes - kChunkBytes) / kPerStage < kMaxStages
                                          ? (kRingBytes - kOutBytes - kChunkBytes) / kPerStage
                                          : kMaxStages;
  // The stages' tiles (1024-byte aligned), then their scales, then the scale chunks (if
  // any), then the output staging.
  __device__ static StageScales<K::BM> &scales(uint8_t *ring, uint32_t stage) {
    return reinterpret_cast<StageScales<K::BM> *>(ring + kStages * kStageBytes)[stage];
  }
  __device__ static ScaleChunk<K::BM, BN> &chunk(uint8_t *ring, uint32_t i) {
    return reinterpret_cast<ScaleChunk<K::BM, BN> *>(ring + kStages * kStageBytes +
                                                     kStages * sizeof(StageScales<K::BM>))[i];
  }
  __device__ static uint8_t *out_staging(uint8_t *ring) {
    const uint32_t at = kStages * kStageBytes + kStages * sizeof(StageScales<K::BM>) + kChunkBytes;
    return ring + (K::kTmaStore ? (at + 1023) / 1024 * 1024 : at);
  }
  static_assert(kStages >= 2 && kStages * kPerStage + kOutBytes + kChunkBytes <= kRingBytes, "the ring fits");
  static_assert(sizeof(StageScales<K::BM>) % 16 == 0 && sizeof(ScaleChunk<K::BM, BN>) % 16 == 0,
                "the chunks and the output staging stay 16-byte aligned");
  static_assert(kStageBytes % 1024 == 0, "128B-swizzled tiles are 1024-byte aligned");
  // n0 is a multiple of BN: a tile's columns cross at most one row boundary of B's scales.
  static_assert(BN % 8 == 0 && (128 % BN == 0 || BN == 96 || BN == 192), "a width the kernel handles");
};

// The ring's barriers: a stage is "full" when its TMA bytes and its scales have landed, and
// "empty" when every consumer warp (of both CTAs, for paired tiles) has released it.
struct Barriers {
  uint64_t full[kMaxStages];
  uint64_t empty[kMaxStages];
};

}  // namespace gemmd::wgmma

#endif  // GEMMD_KERNELS_WGMMA_LAYOUT_CUH_
