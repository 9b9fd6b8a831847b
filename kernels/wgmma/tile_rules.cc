// The WGMMA kernel's tile rules (tile_rules.h). The numbers in them were measured on the
// H200; docs/bench/kernels.md keeps the runs.
#include "kernels/wgmma/tile_rules.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "kernels/wgmma/params.h"

namespace gemmd::wgmma {
namespace {

// The stream-K tail's least modelled gain over the best unsplit tiles (choose_by_rounds).
constexpr double kTailMargin = 0.95;

// Split-K's trip through the workspace, in ns (choose_split's fit): 3 µs + 20 ns per column
// and part past the first.
double trip_ns(uint32_t tn, uint32_t parts) { return parts > 1 ? 3000.0 + 20.0 * tn * (parts - 1) : 0.0; }

// The tiles of `bm` rows × `tn` columns of the groups the WGMMA kernel runs, and their K
// blocks summed over the tiles.
struct TileCount {
  uint64_t tiles;
  double kblocks;
};

TileCount count_tiles(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t bm, uint32_t tn) {
  TileCount c = {0, 0.0};
  for (uint32_t g = 0; g < n_groups; g++) {
    if (!runs_here(table[g])) continue;
    const uint64_t t = (uint64_t)((table[g].m + bm - 1) / bm) * ((table[g].n + tn - 1) / tn);
    c.tiles += t;
    c.kblocks += (double)t * ((table[g].k + BK - 1) / BK);
  }
  return c;
}

// The fewest rows and columns among the groups the WGMMA kernel runs (0xFFFFFFFF with none).
struct GroupExtent {
  uint32_t min_m, min_n;
};
GroupExtent group_extent(const gemmd_group_params_t *table, uint32_t n_groups) {
  GroupExtent e = {0xFFFFFFFFu, 0xFFFFFFFFu};
  for (uint32_t g = 0; g < n_groups; g++) {
    if (runs_here(table[g])) {
      e.min_m = std::min(e.min_m, table[g].m);
      e.min_n = std::min(e.min_n, table[g].n);
    }
  }
  return e;
}

struct WidthChoice {
  uint32_t tile_n;
  double cost;  // the model's, in ns; 0 with no group to run
};

// The width cost model: the tile width with the least estimated time for tiles of `bm` rows
// is the one whose waves of tiles over the SMs times the average tile's K blocks times the
// cost of one K block at that width is least. Fitted to a width sweep on the H200
// (tools/bench/fit_tile_model.py refits it): a K block takes about 219 ns + 2.66 ns per
// tile column when memory-bound; wider tiles stream more bytes per stage, narrower tiles
// give more SMs work. The cheapest of `widths`; ties (within 0.1%) go to the first, the
// wider.
WidthChoice best_width(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms, uint32_t bm,
                       std::initializer_list<uint32_t> widths) {
  WidthChoice best = {*widths.begin(), 0.0};
  bool first = true;
  for (uint32_t tn : widths) {
    const TileCount c = count_tiles(table, n_groups, bm, tn);
    if (c.tiles == 0) return best;
    const double waves = (double)((c.tiles + sms - 1) / sms);
    const double cost = waves * (c.kblocks / (double)c.tiles) * (219.0 + 2.66 * tn);
    if (first || cost < best.cost * 0.999) best = {tn, cost};
    first = false;
  }
  return best;
}

// The best of the widths every kind but ROWS128_WIDE has.
WidthChoice choose_narrow(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms, uint32_t bm) {
  return best_width(table, n_groups, sms, bm, {128u, 64u, 32u, 16u});
}

// ROWS128_WIDE's width by the same model: 96, or 192 where every group has 256 rows or
// more. Measured in one binary: 96 beat 128 by 6–11% on N×K 24576×1536 at every M ≤ 128;
// 192 beat 128 by 7% on 4096×2112×7168 but lost at M ≤ 128 (24576×1536: 2–7% slower than
// 96) and on the decode batches (1%).
WidthChoice choose_wide(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms) {
  const uint32_t min_m = group_extent(table, n_groups).min_m;
  if (min_m != 0xFFFFFFFFu && min_m >= 256) return best_width(table, n_groups, sms, 128, {192u, 96u});
  return best_width(table, n_groups, sms, 128, {96u});
}

// Waves of 128-column tiles of `bm` rows over the SMs.
uint64_t waves(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms, uint32_t bm) {
  uint64_t tiles = 0;
  for (uint32_t g = 0; g < n_groups; g++) {
    if (runs_here(table[g])) tiles += (uint64_t)((table[g].m + bm - 1) / bm) * ((table[g].n + 127) / 128);
  }
  return (tiles + sms - 1) / sms;
}

// The kind of tile for batches the rounds rule does not take. With each kind its own
// kernel (ROWS256 in the joint kernel), every kind was timed on the reference cases:
// ROWS256 is 7–14% faster than ROWS128 at every M ≥ 4096 case except where 256-row tiles
// leave the last wave emptier (4096×2112×7168: +14%). So ROWS256 when every group has ≥ 256
// rows and 256-row tiles take at most 1.05× half the waves of 128-row ones; else ROWS128.
// The TMA-store kind won nowhere (at best 0.2% faster than ROWS128, up to 12% slower) and
// is never chosen; it stays built, for forced runs.
uint32_t choose_kind(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms) {
  const uint32_t min_m = group_extent(table, n_groups).min_m;  // 0xFFFFFFFF with no group to run: ROWS128
  if (min_m != 0xFFFFFFFFu && min_m >= 256 &&
      2.0 * waves(table, n_groups, sms, 256) <= 1.05 * waves(table, n_groups, sms, 128)) {
    return GEMMD_TILE_ROWS256;
  }
  return GEMMD_TILE_ROWS128;
}

// The rounds rule, for batches whose groups all have >= 256 rows and >= 512 columns: the
// kind and width whose rounds cost the least: rounds of units over the grid (ROWS256's pair
// units over sms / 2 clusters) times the average unit's K blocks times the tile's outputs
// times that kind and width's price per output and K block, measured at N x K 2112 x 7168
// (ps: ROWS256/128 27, ROWS128/128 30-32 (31: M = 3840 and 4608 both right), ROWS256/96 34,
// ROWS128_WIDE/192 35, /96 39) and, for ROWS128 at 64 columns, 46 ps (43-48 where its
// tiles take two or more rounds; the six DeepGEMM N x K at M = 256 ... 8192 with every kind
// and width forced). choose_kind counts ROWS256's waves in tiles, not pairs, and prices
// widths by a small-M model: it gave 3840x2112x7168 ROWS256/128 at 143.8 us where
// ROWS128/128 takes 109.8. Where a batch has few tiles, 128 x 64 tiles fill the SMs that
// wider ones leave idle: 256x2112x7168 29.6 -> 23.9 us, 1024x2112x7168 47.8 -> 42.2.
// tools/bench/rounds_rule_model.py scores the rule against logs.
struct RoundsChoice {
  uint32_t kind, tile_n;
  double cost;  // < 0: the batch is not one for this rule
  uint32_t parts;
};
RoundsChoice choose_by_rounds(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms, bool split) {
  RoundsChoice best = {0, 0, -1.0, 1}, tail_best = {0, 0, -1.0, 1};
  const GroupExtent e = group_extent(table, n_groups);
  if (e.min_m == 0xFFFFFFFFu || e.min_m < 256 || e.min_n < 512) return best;
  struct Candidate {
    uint32_t kind, bm, tn;
    bool paired;
    double ps;
  };
  const Candidate cands[] = {{GEMMD_TILE_ROWS256, 256, 128, true, 27.0},
                             {GEMMD_TILE_ROWS256, 256, 96, true, 34.0},
                             {GEMMD_TILE_ROWS128, 128, 128, false, 31.0},
                             {GEMMD_TILE_ROWS128, 128, 64, false, 46.0},
                             {GEMMD_TILE_ROWS128_WIDE, 128, 192, false, 35.0},
                             {GEMMD_TILE_ROWS128_WIDE, 128, 96, false, 39.0}};
  for (const Candidate &c : cands) {
    const TileCount t = count_tiles(table, n_groups, c.bm, c.paired ? 2 * c.tn : c.tn);
    if (t.tiles == 0) continue;
    const uint64_t slots = c.paired ? sms / 2 : sms;
    const double rounds = (double)((t.tiles + slots - 1) / slots);
    const double cost = rounds * (t.kblocks / (double)t.tiles) * c.bm * c.tn * c.ps;
    if (best.cost < 0 || cost < best.cost * 0.999) best = {c.kind, c.tn, cost, 1};
    // ROWS128 tiles with the last round's tiles in K parts (ROWS128_SPLIT, the stream-K
    // tail): the full rounds, then a part's share of the K blocks, then the parts' trip
    // through the workspace.
    const uint64_t tail = t.tiles % sms;
    if (!split || c.kind != GEMMD_TILE_ROWS128 || tail == 0 || t.tiles < sms) continue;
    const double kb = t.kblocks / (double)t.tiles;
    for (uint32_t p = 2; p <= kMaxKSplits && tail * p <= sms; p++) {
      const double tail_cost = ((double)(t.tiles / sms) * kb + std::ceil(kb / p)) * c.bm * c.tn * c.ps +
                               trip_ns(c.tn, p) * 1000.0;
      if (tail_best.cost < 0 || tail_cost < tail_best.cost * 0.999) {
        tail_best = {GEMMD_TILE_ROWS128_SPLIT, c.tn, tail_cost, p};
      }
    }
  }
  // The tail is taken only where the model gains 5% or more over the best whole tiles. It
  // erred by 1.1 and 2.8 points on the two shapes measured: 6.3% for 4096x2112x7168
  // (measured 5.2%, 137.6 -> 130.4 us), 1.3% for 4096x576x7168 (measured 1.6% slower);
  // docs/bench/kernels.md. Shapes between 3% and 5% (4352x2112x7168 4.9%, 6400x2112x7168
  // 3.9%) stay whole until measured.
  if (tail_best.cost >= 0 && tail_best.cost < best.cost * kTailMargin) return tail_best;
  return best;
}

}  // namespace

uint32_t choose_width(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms, uint32_t bm) {
  return choose_narrow(table, n_groups, sms, bm).tile_n;
}

uint32_t choose_wide_width(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms) {
  return choose_wide(table, n_groups, sms).tile_n;
}

// Split-K (ROWS128_SPLIT): K parts for the 128-row tiles of the grid's last, partial round
// (every tile, for a batch of one round) and the width to go with them, by the width cost
// model plus the sums' trip through the workspace: each part writes 64 × tn floats per
// warpgroup and the last reads the others'. The tail's units (tiles × parts) fit the grid.
// Left free (`parts` 0) it splits batches whose unsplit width would be 16 by that model, and
// long-K 65–128-row batches in 2 parts (below); no others: measured, split-K won only there
// (N = 2112 at M ≤ 128: 18.3 → 15.0 µs) and lost elsewhere (4096×7168 at M ≤ 128: 19.9 →
// 23.0 µs with 4 parts of 128 columns; K = 2048: 11.9 → 16.0); the trip, inferred from those
// times against this model, 3–12 µs: about 3 µs + 20 ns per column and part past the first.
SplitChoice choose_split(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms, uint32_t tile_n,
                         uint32_t parts) {
  const uint32_t unsplit = choose_width(table, n_groups, sms, 128);
  SplitChoice best = {tile_n != 0 ? tile_n : unsplit, 1};
  if (parts == 0 && tile_n == 0 && unsplit != 16) {
    // Two parts at twice the width where every group fills both consumer warpgroups (65 to
    // 128 rows: A's rows are most of each stage's bytes at 32 or 64 columns, and every column
    // tile reads them again) and K is long (48 blocks or more): measured 3–11% faster at
    // M = 128 with N×K 4096×7168 and 7168×16384, but slower at M ≤ 64 and at K = 2048.
    bool long_full = unsplit <= 64;
    for (uint32_t g = 0; long_full && g < n_groups; g++) {
      if (runs_here(table[g])) long_full = table[g].m > 64 && table[g].m <= 128 && (table[g].k + BK - 1) / BK >= 48;
    }
    if (long_full) {
      const TileCount c = count_tiles(table, n_groups, 128, 2 * unsplit);
      if (c.tiles > 0 && c.tiles * 2 <= sms) return {2 * unsplit, 2};
    }
    return best;
  }
  double best_cost = -1;
  // The tiles of a last, partial round are split where its parts are asked for (the rounds
  // rule's tail); left free, only batches of one round, where split-K was measured to win.
  const bool tails = parts != 0;
  for (uint32_t tn : {128u, 64u, 32u, 16u}) {
    if (tile_n != 0 && tn != tile_n) continue;
    const TileCount c = count_tiles(table, n_groups, 128, tn);
    if (c.tiles == 0) return best;
    const uint64_t tail = c.tiles % sms, full = c.tiles / sms;
    const double kb = c.kblocks / (double)c.tiles;
    for (uint32_t p = 1; p <= kMaxKSplits; p++) {
      if ((parts != 0 && p != parts) || (p > 1 && (tail == 0 || tail * p > sms || (full > 0 && !tails)))) continue;
      const double cost = p == 1 ? (double)((c.tiles + sms - 1) / sms) * std::ceil(kb) * (219.0 + 2.66 * tn)
                                 : ((double)full * kb + std::ceil(kb / p)) * (219.0 + 2.66 * tn) + trip_ns(tn, p);
      if (best_cost < 0 || cost < best_cost * 0.999) {
        best = {tn, p};
        best_cost = cost;
      }
    }
  }
  return best;
}

TileConfig choose_tiles(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms, bool split) {
  if (sms == 0) sms = 1;
  const RoundsChoice r = choose_by_rounds(table, n_groups, sms, split);
  if (r.cost >= 0) return TileConfig{r.kind, r.tile_n, r.parts};
  const uint32_t kind = choose_kind(table, n_groups, sms);
  if (kind == GEMMD_TILE_ROWS128) {
    if (split) {
      const SplitChoice c = choose_split(table, n_groups, sms, 0, 0);
      if (c.parts > 1) return TileConfig{GEMMD_TILE_ROWS128_SPLIT, c.tile_n, c.parts};
    }
    const WidthChoice narrow = choose_narrow(table, n_groups, sms, 128);
    const WidthChoice wide = choose_wide(table, n_groups, sms);
    if (wide.cost < narrow.cost * 0.999) {
      // Where 128 × 192 tiles win, 256 × 96 ones of the same area, paired: 4096x2112x7168 is
      // 352 tiles either way, but 256-row pairs bring 28 KB per SM and K block from L2
      // where 128 x 192 tiles bring 40 (0.95-0.96x the time).
      if (wide.tile_n == 192) return TileConfig{GEMMD_TILE_ROWS256, 96, 1};
      return TileConfig{GEMMD_TILE_ROWS128_WIDE, wide.tile_n, 1};
    }
    return TileConfig{kind, narrow.tile_n, 1};
  }
  return TileConfig{kind, choose_width(table, n_groups, sms, kind_rows(kind)), 1};
}

}  // namespace gemmd::wgmma
