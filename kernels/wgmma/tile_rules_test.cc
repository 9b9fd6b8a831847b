// The tile rules (tile_rules.h), on the host, no GPU needed: for the shapes of the H200
// width sweep (docs/bench/kernels.md) it must pick the width that was measured fastest
// there, or one measured within 5% of it; for the shapes where each kind of tile was timed,
// a kind measured within 3% of the fastest. Also the launches a batch needs
// (gemmd_gpu_gemm_parts) and the forced configurations gemmd_gpu_gemm_prepare_split refuses.
#include "kernels/wgmma/tile_rules.h"

#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/errors.h"
#include "kernels/gpu_gemm.h"
#include "kernels/gpu_gemm_bench.h"
#include "kernels/testutil.h"

namespace {

struct Case {
  const char *name;
  uint32_t groups, m, n, k;
  std::vector<uint32_t> good;  // widths measured fastest (within 5%)
};

gemmd::wgmma::TileConfig choose_tiles(uint32_t groups, uint32_t m, uint32_t n, uint32_t k, uint8_t out) {
  std::vector<gemmd_group_params_t> t(groups);
  for (auto &g : t) {
    g = gemmd_group_params_t{};
    g.m = m, g.n = n, g.k = k;
    g.out_dtype = out;
  }
  return gemmd::wgmma::choose_tiles(t.data(), groups, 132);
}

uint32_t choose(uint32_t groups, uint32_t m, uint32_t n, uint32_t k, uint8_t out) {
  return choose_tiles(groups, m, n, k, out).tile_n;
}

struct KindCase {
  const char *name;
  uint32_t groups, m, n, k;
  uint32_t good;  // kinds within 3% of the fastest, as a mask of 1 << gemmd_tile_kind_t
};

}  // namespace

int main() {
  const Case cases[] = {
      // split-K (ROWS128_SPLIT; unsplit, 16 columns were fastest at 18.3 µs): 2 parts of 32
      // columns or 4 of 64, 15.0–15.6 µs
      {"8x2112x7168", 1, 8, 2112, 7168, {32, 64}},
      {"8x4096x7168", 1, 8, 4096, 7168, {32}},
      {"8x7168x16384", 1, 8, 7168, 16384, {64}},
      // 2 K parts of 128 columns (split-K: 50.0–50.5 µs vs 51.5–52.6 unsplit at 64)
      {"128x7168x16384", 1, 128, 7168, 16384, {128}},
      // ROWS128_WIDE at 96 columns: 19.7–19.8 µs vs 20.0 at 64 and 21.6–22.0 at 128
      {"8x24576x1536", 1, 8, 24576, 1536, {96, 64}},
      {"128x24576x1536", 1, 128, 24576, 1536, {96}},
      {"8x32768x512", 1, 8, 32768, 512, {128}},
      {"8x7168x2048", 1, 8, 7168, 2048, {32, 64, 128}},
      {"4096x7168x16384", 1, 4096, 7168, 16384, {128}},
      // the stream-K tail (ROWS128_SPLIT, 3 or 4 parts of 128 columns in the last round):
      // 130.3 / 128.7 µs vs ROWS256/96's 137.6 (2026-12-06, H100); before it, ROWS256 at 96
      // columns: 134.2 µs vs ROWS128_WIDE's 192 141.2, ROWS256's 128 144.8
      {"4096x2112x7168", 1, 4096, 2112, 7168, {128}},
      {"3840x2112x7168", 1, 3840, 2112, 7168, {128}},
      // ROWS128 at 64 columns where the batch has few tiles: 23.9 µs vs ROWS128_WIDE's
      // 96 29.6 at M = 256; 42.2 vs ROWS256's 96 47.8 at M = 1024; at M = 512 x 4096 x 7168
      // 128 columns stay (30.5 vs 42.5 at 64)
      {"256x2112x7168", 1, 256, 2112, 7168, {64}},
      {"256x4096x7168", 1, 256, 4096, 7168, {64}},
      {"512x2112x7168", 1, 512, 2112, 7168, {64}},
      {"1024x2112x7168", 1, 1024, 2112, 7168, {64}},
      {"512x4096x7168", 1, 512, 4096, 7168, {128}},
      {"decode 64x8 own 4096x4096", 64, 8, 4096, 4096, {128}},
      {"decode 128x4 own 2048x2048", 128, 4, 2048, 2048, {128}},
  };
  int bad = 0;
  for (const Case &c : cases) {
    const uint32_t got = choose(c.groups, c.m, c.n, c.k, GEMMD_DTYPE_BF16);
    bool ok = false;
    for (uint32_t w : c.good) ok = ok || w == got;
    if (!ok) {
      std::fprintf(stderr, "%s: chose width %u, measured best: %u\n", c.name, got, c.good[0]);
      bad++;
    }
  }
  // The kind of tile: where each kind was timed as its own kernel (docs/bench/kernels.md,
  // raw/2026-12-01-s8-call1-gemm_bench.log), those within 3% of the fastest.
  constexpr uint32_t R128 = 1u << GEMMD_TILE_ROWS128, TMA = 1u << GEMMD_TILE_ROWS128_TMA_STORE,
                     R256 = 1u << GEMMD_TILE_ROWS256, WIDE = 1u << GEMMD_TILE_ROWS128_WIDE;
  const KindCase kinds[] = {
      {"4096x7168x16384", 1, 4096, 7168, 16384, R256},           // 1054 / 1065 / 1001 µs
      // ROWS128/128 109.8 µs vs ROWS256/128 143.8 (every kind forced: ROWS128/128
      // 110.7-111.8, ROWS256/96 136.6)
      {"3840x2112x7168", 1, 3840, 2112, 7168, R128},
      {"1024x2112x7168", 1, 1024, 2112, 7168, R128},  // at 64 columns (above)
      {"2048x7168x16384", 1, 2048, 7168, 16384, R256},  // 419.9 µs vs ROWS128/128 434.5
      {"8192x8192x8192", 1, 8192, 8192, 8192, R256},             // 1244 / 1249 / 1199
      // the stream-K tail 130.3 µs vs ROWS256/96 137.6 (above)
      {"4096x2112x7168", 1, 4096, 2112, 7168, 1u << GEMMD_TILE_ROWS128_SPLIT},
      {"4096x4096x7168", 1, 4096, 4096, 7168, R128 | TMA | R256},  // 256 / 261 / 262
      {"4096x32768x512", 1, 4096, 32768, 512, R256},             // 234 / 260 / 225
      {"4096x24576x1536", 1, 4096, 24576, 1536, R128 | R256},    // 360 / 372 / 358
      {"4096x7168x2048", 1, 4096, 7168, 2048, R128 | R256},      // 144 / 153 / 141
      {"stacked 4x8192 7168x2048", 4, 8192, 7168, 2048, R256},   // 1096 / 1105 / 1039
      {"stacked 8x4096 4096x7168", 8, 4096, 4096, 7168, R128 | TMA | R256},  // 2033 / 2065 / 2073
      {"128x32768x512", 1, 128, 32768, 512, R128},
      {"128x7168x2048", 1, 128, 7168, 2048, R128 | TMA},
      {"64x7168x16384", 1, 64, 7168, 16384, R128 | TMA},
      {"decode 64x8 own 4096x4096", 64, 8, 4096, 4096, R128 | TMA},
      // split-K where it won (−15%), not where it lost (4096×7168: +16% with 4 parts of 128
      // columns; K = 2048: +35%)
      {"64x2112x7168", 1, 64, 2112, 7168, 1u << GEMMD_TILE_ROWS128_SPLIT},
      {"128x2112x7168", 1, 128, 2112, 7168, 1u << GEMMD_TILE_ROWS128_SPLIT},
      {"64x4096x7168", 1, 64, 4096, 7168, R128 | TMA},
      {"64x24576x1536", 1, 64, 24576, 1536, WIDE},  // 20.3 µs vs 22.5 at 128
      // 2 parts of twice the width where 128-row A tiles are long (128x4096x7168 23.8 → 22.5
      // µs, 128x7168x16384 51.5 → 50.0), not at K = 2048
      {"128x4096x7168", 1, 128, 4096, 7168, 1u << GEMMD_TILE_ROWS128_SPLIT},
      {"128x7168x16384", 1, 128, 7168, 16384, 1u << GEMMD_TILE_ROWS128_SPLIT},
      {"128x7168x2048 (K parts)", 1, 128, 7168, 2048, R128},
      {"8x7168x2048", 1, 8, 7168, 2048, R128 | TMA},
  };
  for (const KindCase &c : kinds) {
    const uint32_t got = choose_tiles(c.groups, c.m, c.n, c.k, GEMMD_DTYPE_BF16).kind;
    if (!((c.good >> got) & 1u)) {
      std::fprintf(stderr, "%s: chose kind %u, measured within 3%% of the fastest: mask %u\n", c.name, got, c.good);
      bad++;
    }
  }
  // K parts go with the split kind alone.
  for (const KindCase &c : kinds) {
    const gemmd::wgmma::TileConfig t = choose_tiles(c.groups, c.m, c.n, c.k, GEMMD_DTYPE_BF16);
    if ((t.k_splits > 1) != (t.kind == GEMMD_TILE_ROWS128_SPLIT) || t.k_splits < 1) {
      std::fprintf(stderr, "%s: kind %u with %u K parts\n", c.name, t.kind, t.k_splits);
      bad++;
    }
  }
  // Split-K's tail: K parts asked for a batch of several rounds split its last round's
  // tiles where they times the parts fit the grid (4096x2112x7168: 544 tiles of 128
  // columns, 4 rounds of 132 and 16: up to 8 parts), and not where they do not (4096x1536:
  // 384 tiles, 120 in the last round) or where the rounds are full (4096x2112 at 64
  // columns: 1056 tiles, 8 rounds).
  {
    gemmd_group_params_t g = {};
    g.m = 4096, g.n = 2112, g.k = 7168, g.out_dtype = GEMMD_DTYPE_BF16;
    for (uint32_t parts : {2u, 4u, 8u}) {
      const gemmd::wgmma::SplitChoice c = gemmd::wgmma::choose_split(&g, 1, 132, 128, parts);
      TEST_CHECK(c.parts == parts && c.tile_n == 128, "tail of 16 tiles in %u parts: got %u", parts, c.parts);
    }
    TEST_CHECK(gemmd::wgmma::choose_split(&g, 1, 132, 64, 2).parts == 1, "full rounds: no tail to split");
    g.n = 1536;
    TEST_CHECK(gemmd::wgmma::choose_split(&g, 1, 132, 128, 2).parts == 1, "a tail of 120 tiles in 2 parts");
    // Left free, split-K's own choice does not split a batch of several rounds; the rounds
    // rule does, where its model gains 5% or more: 4096x2112x7168 (3 parts of 128 columns,
    // modelled 131.5 against ROWS256/96's 140.4), not 4096x576x7168 (46.2 against 46.8,
    // measured slower) nor 4352x2112x7168 (4.9%), and not with split-K off.
    g.n = 2112;
    TEST_CHECK(gemmd::wgmma::choose_split(&g, 1, 132, 0, 0).parts == 1, "free choice, several rounds");
    gemmd::wgmma::TileConfig t = gemmd::wgmma::choose_tiles(&g, 1, 132);
    TEST_CHECK(t.kind == GEMMD_TILE_ROWS128_SPLIT && t.tile_n == 128 && t.k_splits == 3,
               "4096x2112x7168's tail: got %s/%u in %u parts", gemmd_tile_kind_name(t.kind), t.tile_n, t.k_splits);
    t = gemmd::wgmma::choose_tiles(&g, 1, 132, false);
    TEST_CHECK(t.kind == GEMMD_TILE_ROWS256 && t.k_splits == 1, "split-K off: got %s", gemmd_tile_kind_name(t.kind));
    g.n = 576;
    t = gemmd::wgmma::choose_tiles(&g, 1, 132);
    TEST_CHECK(t.kind == GEMMD_TILE_ROWS256 && t.k_splits == 1, "4096x576x7168 under the margin: got %s in %u parts",
               gemmd_tile_kind_name(t.kind), t.k_splits);
    g.m = 4352, g.n = 2112;
    t = gemmd::wgmma::choose_tiles(&g, 1, 132);
    TEST_CHECK(t.k_splits == 1, "4352x2112x7168 under the margin: got %s in %u parts", gemmd_tile_kind_name(t.kind),
               t.k_splits);
  }
  // 256-row tiles pick their width for 256 rows: 4096x7168x16384 stays at 128 columns.
  TEST_CHECK(choose_tiles(1, 4096, 7168, 16384, GEMMD_DTYPE_BF16).tile_n == 128, "rows256 width");
  // Groups with FP32 output run on the other kernel and do not count; with none left the
  // choice is the default width.
  TEST_CHECK(choose(4, 8, 2112, 7168, GEMMD_DTYPE_FP32) == 128, "FP32-only batch");
  TEST_CHECK(choose(0, 1, 1, 1, GEMMD_DTYPE_BF16) == 128, "empty batch");
  // The launches a batch needs: one kind of output skips the other kind's kernel.
  {
    gemmd_group_params_t t[3] = {};
    t[0].out_dtype = GEMMD_DTYPE_BF16, t[1].out_dtype = GEMMD_DTYPE_FP16, t[2].out_dtype = GEMMD_DTYPE_FP32;
    TEST_CHECK(gemmd_gpu_gemm_parts(t, 2) == GEMMD_GPU_PART_HALF_OUT, "half outputs only");
    TEST_CHECK(gemmd_gpu_gemm_parts(t + 2, 1) == GEMMD_GPU_PART_FP32_OUT, "FP32 outputs only");
    TEST_CHECK(gemmd_gpu_gemm_parts(t, 3) == (GEMMD_GPU_PART_HALF_OUT | GEMMD_GPU_PART_FP32_OUT), "both");
    TEST_CHECK(gemmd_gpu_gemm_parts(t, 0) == 0, "no groups");
    // Once prepared, the half-output part is the kernel of the batch's tile kind.
    std::vector<uint8_t> hb(sizeof(gemmd_batch_header_t) + sizeof t, 0);
    auto *hh = reinterpret_cast<gemmd_batch_header_t *>(hb.data());
    std::memcpy(hb.data() + sizeof *hh, t, sizeof t);
    for (uint32_t kind = 0; kind < GEMMD_TILE_KINDS; kind++) {
      hh->tile_kind = static_cast<uint8_t>(kind);
      hh->n_groups = 3;
      TEST_CHECK(gemmd_gpu_gemm_prepared_parts(hb.data()) == (GEMMD_GPU_PART_KIND(kind) | GEMMD_GPU_PART_FP32_OUT),
                 "prepared parts, kind %u", kind);
      hh->n_groups = 2;
      TEST_CHECK(gemmd_gpu_gemm_prepared_parts(hb.data()) == GEMMD_GPU_PART_KIND(kind), "kind %u alone", kind);
    }
    std::memcpy(hb.data() + sizeof *hh, t + 2, sizeof t[0]);
    hh->n_groups = 1;
    TEST_CHECK(gemmd_gpu_gemm_prepared_parts(hb.data()) == GEMMD_GPU_PART_FP32_OUT, "FP32 alone: no WGMMA kernel");
    TEST_CHECK(gemmd_gpu_gemm_prepared_parts(nullptr) == 0, "no batch");
    // Nothing to launch returns before touching the device; bad masks are refused.
    int dummy = 0;
    TEST_CHECK(gemmd_gpu_gemm_parts_run(GEMMD_GPU_KERNEL_WGMMA, &dummy, 0, nullptr) == GEMMD_OK, "empty mask");
    TEST_CHECK(gemmd_gpu_gemm_parts_run(GEMMD_GPU_KERNEL_SIMPLE, &dummy, 0, nullptr) == GEMMD_OK, "empty mask");
    TEST_CHECK(gemmd_gpu_gemm_parts_run(GEMMD_GPU_KERNEL_WGMMA, &dummy, GEMMD_GPU_PARTS_ALL + 1, nullptr) ==
                   GEMMD_EINVAL,
               "bad mask");
    TEST_CHECK(gemmd_gpu_gemm_parts_run(GEMMD_GPU_KERNEL_WGMMA, nullptr, 1, nullptr) == GEMMD_EINVAL, "no batch");
  }
  // A forced configuration outside the kernel's is refused before anything is written.
  {
    // A batch the kernel would take (no groups, a scheduling area), so each refusal below
    // comes from its own check.
    std::vector<uint8_t> host(512, 0);
    reinterpret_cast<gemmd_batch_header_t *>(host.data())->sched_arena = 128;
    const std::vector<uint8_t> before = host;
    const uint64_t dev = 1u << 20;  // never touched: the checks come first
    struct Refusal {
      const char *what;
      uint32_t kind, tile_n, k_splits;
      int rc;
    };
    const uint32_t AUTO = GEMMD_GPU_TILE_KIND_AUTO;
    const Refusal refusals[] = {
        {"width 48", GEMMD_TILE_ROWS128, 48, 0, GEMMD_EINVAL},
        {"kind past the last", GEMMD_TILE_KINDS, 0, 0, GEMMD_EINVAL},
        // 96 and 192 columns are ROWS128_WIDE's, 96 also ROWS256's; ROWS128_WIDE has
        // no others.
        {"width 96 on ROWS128", GEMMD_TILE_ROWS128, 96, 0, GEMMD_EINVAL},
        {"width 96 on ROWS128_TMA_STORE", GEMMD_TILE_ROWS128_TMA_STORE, 96, 0, GEMMD_EINVAL},
        {"width 192 on ROWS256", GEMMD_TILE_ROWS256, 192, 0, GEMMD_EINVAL},
        {"width 64 on ROWS128_WIDE", GEMMD_TILE_ROWS128_WIDE, 64, 0, GEMMD_EINVAL},
        {"K parts at width 96", AUTO, 96, 2, GEMMD_EINVAL},
        {"too many K parts", AUTO, 0, GEMMD_GPU_MAX_K_SPLITS + 1, GEMMD_EINVAL},
        // K parts are the split kind's alone, and only where the last round's tiles ×
        // parts fit the grid (here: no tiles at all).
        {"K parts that do not fit", AUTO, 0, 2, GEMMD_EINVAL},
        {"K parts of another kind", GEMMD_TILE_ROWS256, 0, 2, GEMMD_ENOTSUP},
    };
    for (const Refusal &r : refusals) {
      TEST_CHECK(gemmd_gpu_gemm_prepare_split(GEMMD_GPU_KERNEL_WGMMA, host.data(), dev, r.kind, r.tile_n, r.k_splits) ==
                     r.rc,
                 "%s", r.what);
    }
    TEST_CHECK(gemmd_gpu_gemm_prepare_tiles(GEMMD_GPU_KERNEL_WGMMA, nullptr, dev, GEMMD_GPU_TILE_KIND_AUTO, 0) ==
                   GEMMD_EINVAL,
               "no batch");
    TEST_CHECK(gemmd_gpu_gemm_prepare_tiles(GEMMD_GPU_KERNEL_WGMMA, host.data(), 0, GEMMD_GPU_TILE_KIND_AUTO, 0) ==
                   GEMMD_EINVAL,
               "no device batch");
    TEST_CHECK(host == before, "a refused configuration writes nothing");
  }
  std::printf("tile_rules_test: %zu widths and %zu kinds, %d wrong\n", sizeof cases / sizeof cases[0],
              sizeof kinds / sizeof kinds[0], bad);
  return bad == 0 ? 0 : 1;
}
