// The host's part of a batch for the WGMMA kernel (gemmd_gpu_gemm_prepare): the tile
// configuration (tile_rules.h), three tensor maps per group (encoded once per distinct set
// of inputs: kernels/tmap_cache.h) and the tile prefix sums, written into the batch's host
// copy before its upload.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

#include <mutex>

#include "kernels/errors.h"
#include "kernels/gpu_gemm.h"
#include "kernels/gpu_gemm_bench.h"
#include "kernels/tmap_cache.h"
#include "kernels/wgmma/params.h"
#include "kernels/wgmma/tile_rules.h"

static_assert(GEMMD_GPU_MAX_K_SPLITS == gemmd::wgmma::kMaxKSplits, "one limit on K parts");

namespace gemmd::wgmma {

int sm_count() {
  static int sms = 0;
  if (sms == 0) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      sms = 132;
    }
  }
  return sms;
}

namespace {

PFN_cuTensorMapEncodeTiled_v12000 g_encode = nullptr;
std::once_flag g_encode_once;

void load_encode() {
  void *fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess) {
    g_encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }
}

// Every map this process encoded, by its inputs (tmap_cache.h); made on first use.
gemmd::TmapCache &map_cache() {
  static gemmd::TmapCache cache;
  return cache;
}

// A 2D map over `rows` rows of `cols` bytes, `ld` bytes apart, at `addr`: boxes of 128
// bytes × box_rows rows, 128-byte swizzle, zeros outside (past k as well as past m or n).
// Encoded once per distinct set of inputs (map_cache).
bool encode_now(void *out, uint64_t addr, uint32_t cols, uint32_t ld, uint32_t rows, uint32_t box_rows) {
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {ld};
  const cuuint32_t box[2] = {BK, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  return g_encode(static_cast<CUtensorMap *>(out), CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, reinterpret_cast<void *>(addr),
                  dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool encode(void *out, uint64_t addr, uint32_t cols, uint32_t ld, uint32_t rows, uint32_t box_rows) {
  return map_cache().get(gemmd::TmapKey{addr, 0, cols, ld, rows, BK, box_rows}, out,
                         [&](void *dst) { return encode_now(dst, addr, cols, ld, rows, box_rows); });
}

// D's map for the TMA-store epilogue: n columns × m rows of 2-byte values (rows n apart),
// boxes of 64 rows × min(tile_n, 64) columns, swizzled as the kernel stages them.
bool encode_d_now(void *out, uint64_t addr, uint32_t n, uint32_t m, uint32_t tile_n) {
  const uint32_t box_cols = tile_n < 64 ? tile_n : 64;
  const cuuint64_t dims[2] = {n, m};
  const cuuint64_t strides[1] = {(cuuint64_t)n * 2};
  const cuuint32_t box[2] = {box_cols, 64};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUtensorMapSwizzle swizzle = box_cols == 64   ? CU_TENSOR_MAP_SWIZZLE_128B
                                     : box_cols == 32 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                      : CU_TENSOR_MAP_SWIZZLE_32B;
  return g_encode(static_cast<CUtensorMap *>(out), CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, reinterpret_cast<void *>(addr),
                  dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                  CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool encode_d(void *out, uint64_t addr, uint32_t n, uint32_t m, uint32_t tile_n) {
  return map_cache().get(gemmd::TmapKey{addr, 1, n, 2 * n, m, tile_n, 64}, out,
                         [&](void *dst) { return encode_d_now(dst, addr, n, m, tile_n); });
}

}  // namespace
}  // namespace gemmd::wgmma

using namespace gemmd::wgmma;

extern "C" uint64_t gemmd_gpu_gemm_sched_bytes(uint32_t n_groups) {
  return (uint64_t)n_groups * kMapsPerGroup * GEMMD_GPU_TMAP_BYTES + 4ull * (n_groups + 2);
}

extern "C" void gemmd_gpu_gemm_forget_maps(void) { map_cache().clear(); }

extern "C" int gemmd_gpu_gemm_prepare(gemmd_gpu_kernel_t kernel, void *host_batch, uint64_t dev_batch) {
  return gemmd_gpu_gemm_prepare_tiles(kernel, host_batch, dev_batch, GEMMD_GPU_TILE_KIND_AUTO, 0);
}

extern "C" int gemmd_gpu_gemm_prepare_tiles(gemmd_gpu_kernel_t kernel, void *host_batch, uint64_t dev_batch,
                                            uint32_t kind, uint32_t tile_n) {
  return gemmd_gpu_gemm_prepare_split(kernel, host_batch, dev_batch, kind, tile_n, 0);
}

extern "C" int gemmd_gpu_gemm_prepare_split(gemmd_gpu_kernel_t kernel, void *host_batch, uint64_t dev_batch,
                                            uint32_t kind, uint32_t tile_n, uint32_t k_splits) {
  auto *hdr = static_cast<gemmd_batch_header_t *>(host_batch);
  if (host_batch == nullptr || dev_batch == 0) return GEMMD_EINVAL;
  if (k_splits > GEMMD_GPU_MAX_K_SPLITS) return GEMMD_EINVAL;
  const bool wide_n = tile_n == 96 || tile_n == 192;
  if (tile_n != 0 && tile_n != 16 && tile_n != 32 && tile_n != 64 && tile_n != 128 && !wide_n) return GEMMD_EINVAL;
  if (kind != GEMMD_GPU_TILE_KIND_AUTO && kind >= GEMMD_TILE_KINDS) return GEMMD_EINVAL;
  // 96 columns are ROWS256's too; the other wide widths are ROWS128_WIDE's alone (asked
  // for with AUTO, they choose it).
  const bool rows256_96 = kind == GEMMD_TILE_ROWS256 && tile_n == 96;
  if (tile_n != 0 && !rows256_96 && wide_n != (kind == GEMMD_TILE_ROWS128_WIDE) && kind != GEMMD_GPU_TILE_KIND_AUTO) {
    return GEMMD_EINVAL;
  }
  if (wide_n && !rows256_96) {
    if (k_splits > 1) return GEMMD_EINVAL;
    kind = GEMMD_TILE_ROWS128_WIDE;
  }
  // K parts are the split kind's alone (asked for with AUTO, they choose it).
  if (k_splits > 1 && kind != GEMMD_GPU_TILE_KIND_AUTO && kind != GEMMD_TILE_ROWS128_SPLIT) return GEMMD_ENOTSUP;
  if (k_splits > 1) kind = GEMMD_TILE_ROWS128_SPLIT;
  if (kernel != GEMMD_GPU_KERNEL_WGMMA) return GEMMD_OK;  // the others need nothing
  if (hdr->sched_arena == 0 || hdr->sched_arena % GEMMD_GPU_TMAP_BYTES != 0) return GEMMD_EINVAL;
  auto *bytes = static_cast<uint8_t *>(host_batch);
  const auto *table = reinterpret_cast<const gemmd_group_params_t *>(bytes + sizeof *hdr);
  uint8_t *tmaps = bytes + hdr->sched_arena;
  auto *starts = reinterpret_cast<uint32_t *>(tmaps + (size_t)hdr->n_groups * kMapsPerGroup * GEMMD_GPU_TMAP_BYTES);
  const uint32_t sms = (uint32_t)sm_count();
  // The rule's configuration, where it decides the kind or the width.
  const bool auto_kind = kind == GEMMD_GPU_TILE_KIND_AUTO;
  const TileConfig rule = auto_kind || tile_n == 0 ? choose_tiles(table, hdr->n_groups, sms, auto_kind && k_splits != 1)
                                                   : TileConfig{GEMMD_TILE_KINDS, 0, 1};
  if (auto_kind) {
    kind = rule.kind;
    if (kind == GEMMD_TILE_ROWS128_WIDE && tile_n != 0) kind = GEMMD_TILE_ROWS128;  // a narrow width asked for
  }
  // No width asked for and the rule's kind: the rule's width (split-K's comes with its parts
  // from choose_split below).
  if (tile_n == 0 && kind == rule.kind && kind != GEMMD_TILE_ROWS128_SPLIT) tile_n = rule.tile_n;
  const uint32_t bm = kind_rows(kind);
  uint32_t parts = 1;
  if (kind == GEMMD_TILE_ROWS128_SPLIT && k_splits != 1) {
    // The rule's parts where it chose them; else the split model's for what was asked.
    const bool rules = kind == rule.kind && tile_n == 0 && k_splits == 0;
    const SplitChoice c =
        rules ? SplitChoice{rule.tile_n, rule.k_splits} : choose_split(table, hdr->n_groups, sms, tile_n, k_splits);
    if (k_splits > 1 && c.parts != k_splits) return GEMMD_EINVAL;  // the tail's units would not fit the grid
    tile_n = c.tile_n;
    parts = c.parts;
  }
  if (tile_n == 0) {
    tile_n = kind == GEMMD_TILE_ROWS128_WIDE ? choose_wide_width(table, hdr->n_groups, sms)
                                             : choose_width(table, hdr->n_groups, sms, bm);
  }
  std::call_once(g_encode_once, load_encode);
  if (g_encode == nullptr) return GEMMD_EDEVICE;
  // Paired ROWS256 tiles (the joint kernel): units of two column tiles; each CTA of the pair
  // loads half of A's rows (all of them from rank 0 for a group of fewer rows).
  const bool pair = kind == GEMMD_TILE_ROWS256;
  const uint32_t unit_n = pair ? 2 * tile_n : tile_n;
  uint64_t tiles = 0;
  for (uint32_t g = 0; g < hdr->n_groups; g++) {
    const gemmd_group_params_t &p = table[g];
    if (p.m == 0 || p.n == 0 || p.k == 0 || p.lda < p.k || p.ldb < p.k || p.lda % 16 || p.ldb % 16 || p.b_data % 16) {
      return GEMMD_EINVAL;
    }
    starts[g] = static_cast<uint32_t>(tiles);
    if (!runs_here(p)) continue;
    uint8_t *tm = tmaps + (size_t)g * kMapsPerGroup * GEMMD_GPU_TMAP_BYTES;
    const uint32_t a_box = pair && p.m >= bm ? bm / 2 : a_box_rows(p.m, bm), b_box = tile_n;
    if (!encode(tm, dev_batch + hdr->a_arena + p.a_offset, p.k, p.lda, p.m, a_box) ||
        !encode(tm + GEMMD_GPU_TMAP_BYTES, p.b_data, p.k, p.ldb, p.n, b_box)) {
      return GEMMD_EINVAL;
    }
    // D's map, with TMA stores, for the groups whose epilogue stages (the kernel's
    // condition: half output, rows a multiple of 16 bytes, D 16-byte aligned); the others
    // store directly.
    const uint64_t d_addr = dev_batch + hdr->d_arena + p.d_offset;
    if (kind == GEMMD_TILE_ROWS128_TMA_STORE && p.n % 8 == 0 && d_addr % 16 == 0 &&
        !encode_d(tm + 2 * GEMMD_GPU_TMAP_BYTES, d_addr, p.n, p.m, tile_n)) {
      return GEMMD_EINVAL;
    }
    tiles += (uint64_t)((p.m + bm - 1) / bm) * ((p.n + unit_n - 1) / unit_n);
    if (tiles > 0xFFFFFFFFull) return GEMMD_EINVAL;
  }
  starts[hdr->n_groups] = static_cast<uint32_t>(tiles);
  // Every group's tiles where all groups have as many (the kernel then finds a tile's
  // group by a division instead of a search), else 0.
  const uint32_t first_tiles = hdr->n_groups > 0 ? starts[1] : 0;
  bool uniform = hdr->n_groups > 0 && first_tiles > 0;
  for (uint32_t g = 0; uniform && g < hdr->n_groups; g++) uniform = starts[g + 1] - starts[g] == first_tiles;
  starts[hdr->n_groups + 1] = uniform ? first_tiles : 0;
  if (tiles * parts > 0xFFFFFFFFull) return GEMMD_EINVAL;  // the kernel's units: at most tiles × parts
  hdr->total_tiles = static_cast<uint32_t>(tiles);
  hdr->k_splits = static_cast<uint8_t>(parts);
  hdr->tile_n = static_cast<uint16_t>(tile_n);
  hdr->tile_kind = static_cast<uint8_t>(kind);
  return GEMMD_OK;
}
