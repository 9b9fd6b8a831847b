// The WGMMA kernel's tile configuration for a batch, on the host: the kind of tile
// (gemmd_tile_kind_t), its width, and for ROWS128_SPLIT the K parts per tile, by rules and
// cost models measured on the H200 (docs/bench/kernels.md, "Tile kinds and the rule that
// picks them"). tile_rules_test.cc holds the choices those runs found best.
#ifndef GEMMD_KERNELS_WGMMA_TILE_RULES_H_
#define GEMMD_KERNELS_WGMMA_TILE_RULES_H_

#include <stdint.h>

#include "kernels/group_table.h"

namespace gemmd::wgmma {

// Most K parts per tile (ROWS128_SPLIT).
constexpr uint32_t kMaxKSplits = 8;

// A tile configuration.
struct TileConfig {
  uint32_t kind;      // gemmd_tile_kind_t
  uint32_t tile_n;    // columns per tile: 16, 32, 64 or 128; 96 or 192 for ROWS128_WIDE; 96 for ROWS256
  uint32_t k_splits;  // K parts per tile (1 but for ROWS128_SPLIT)
};

// The configuration for a batch whose table is `table`, on a GPU of `sms` SMs (0 counts as
// 1). Batches whose groups all have at least 256 rows and 512 columns take the kind and
// width whose rounds of tiles over the SMs (ROWS256's pairs over half as many clusters)
// cost the least, each priced per output and K block as measured. Others: ROWS256 where
// every group has 256 rows or more and 256-row tiles need at most about half the waves of
// 128-row ones, else ROWS128; for ROWS128, ROWS128_SPLIT where K parts pay (`split`:
// whether they may), and ROWS128_WIDE where 96 or 192 columns cost less than every width
// of ROWS128 (where 128 × 192 tiles would win, 256 × 96 ROWS256 tiles run instead); then
// the width with the least estimated time (waves of tiles over the SMs times a per-K-block
// cost). Groups with FP32 output run on the other kernel and do not count.
TileConfig choose_tiles(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms, bool split = true);

// The width for tiles of `bm` rows of an unsplit kind other than ROWS128_WIDE (16..128) by
// the width cost model; ROWS128_WIDE's (96 or 192).
uint32_t choose_width(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms, uint32_t bm);
uint32_t choose_wide_width(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms);

// Split-K's width and K parts: `tile_n` / `parts` 0 leave them to the model (parts 1 in the
// result: no split). The parts split the tiles of the grid's last, partial round (every
// tile of a batch of one round), and only where those tiles × parts fit the grid; left to
// the model, only batches of one round are split.
struct SplitChoice {
  uint32_t tile_n, parts;
};
SplitChoice choose_split(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms, uint32_t tile_n,
                         uint32_t parts);

// The rows of a kind's tile (256 for ROWS256, else 128).
inline uint32_t kind_rows(uint32_t kind) { return kind == GEMMD_TILE_ROWS256 ? 256 : 128; }

// Whether the WGMMA kernel runs the group: all but FP32 outputs (gpu_gemm.cu says why).
inline bool runs_here(const gemmd_group_params_t &p) { return p.out_dtype != GEMMD_DTYPE_FP32; }

}  // namespace gemmd::wgmma

#endif  // GEMMD_KERNELS_WGMMA_TILE_RULES_H_
