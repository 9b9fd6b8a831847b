/* The grouped-GEMM parameter table: one row per GEMM group of a batch.
 *
 * A group is D_g = A_g · B_gᵀ, where A_g stacks the rows of every request in the batch
 * that uses the same weight, A dtype and output dtype. Rows are plain old data, the same
 * bytes on the host and on the device, so the CUDA engine uploads the table as is and
 * its persistent kernel reads shapes and offsets from it (a captured graph never needs
 * recapture). Offsets are into the batch's arenas:
 *   A arena:       FP8 bytes, each group's m rows with row stride lda (≥ k, zero padded);
 *   A-scale arena: FP32, each group's m × ceil(k/128) block (the 1×128 layout);
 *   D arena:       output bytes, each group's m×n block row-major in out_dtype.
 * The kernels address an operand as its arena's base plus the offset in 64-bit arithmetic,
 * so an offset may also reach memory outside the batch buffer (address − base, mod 2^64):
 * the CUDA engine points a group at a client's device memory that way (engine_cuda.c,
 * operands_in_place).
 * B is a registered weight (or a request's inline B): FP8, n rows with row stride ldb
 * (≥ k, zero padded), its own scale layout (NONE, TENSOR, ROW or BLOCK_128X128),
 * addressed directly.
 *
 * On the device a batch is one buffer: a gemmd_batch_header_t, then n_groups table rows,
 * then n_quant_jobs quantization jobs, then the arenas at the offsets the header gives.
 */
#ifndef GEMMD_KERNELS_GROUP_TABLE_H_
#define GEMMD_KERNELS_GROUP_TABLE_H_

#include <stdint.h>

#include "kernels/operand.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gemmd_group_params_s {
  uint32_t m, n, k;
  uint8_t a_dtype;   /* GEMMD_DTYPE_FP8_E4M3 or _E5M2 */
  uint8_t b_dtype;   /* GEMMD_DTYPE_FP8_E4M3 or _E5M2 */
  uint8_t b_layout;  /* gemmd_scale_layout_t: NONE, TENSOR, ROW or BLOCK_128X128 */
  uint8_t out_dtype; /* GEMMD_DTYPE_BF16, _FP16 or _FP32 */
  uint64_t a_offset;  /* bytes into the A arena */
  uint64_t sa_offset; /* floats into the A-scale arena */
  uint64_t d_offset;  /* bytes into the D arena */
  uint64_t b_data;    /* address of B (host or device, as the engine needs) */
  uint64_t b_scales;  /* address of B's scales (0 for NONE) */
  uint32_t lda;       /* bytes between rows of A (≥ k) */
  uint32_t ldb;       /* bytes between rows of B (≥ k) */
} gemmd_group_params_t;

/* A request whose A arrived as BF16/FP16/FP32: the GPU quantizes it to E4M3 with 1×128
 * scales (docs/api.md §1) into its place in the A and A-scale arenas, before the GEMM. */
typedef struct gemmd_quant_job_s {
  uint64_t src_offset; /* bytes into the raw-A arena: rows × cols of src_dtype, dense */
  uint64_t a_offset;   /* bytes into the A arena (row stride lda) */
  uint64_t sa_offset;  /* floats into the A-scale arena */
  uint32_t rows, cols;
  uint32_t lda;
  uint8_t src_dtype; /* GEMMD_DTYPE_BF16, _FP16 or _FP32 */
  uint8_t reserved[3];
  uint64_t reserved2;
} gemmd_quant_job_t;

/* The WGMMA kernel's kinds of output tile (wgmma/layout.cuh), chosen per batch with the
 * tile width. */
typedef enum {
  GEMMD_TILE_ROWS128 = 0,           /* 128 rows; the epilogue writes 16-byte pieces */
  GEMMD_TILE_ROWS128_TMA_STORE = 1, /* 128 rows; the epilogue writes by TMA tensor stores */
  GEMMD_TILE_ROWS256 = 2,           /* 256 rows, each consumer warpgroup two 64-row halves */
  GEMMD_TILE_ROWS128_SPLIT = 3,     /* ROWS128, the last round's tiles in header.k_splits K parts */
  GEMMD_TILE_ROWS128_WIDE = 4,      /* ROWS128 at the widths that do not divide 128 (96, 192) */
  GEMMD_TILE_KINDS = 5
} gemmd_tile_kind_t;

/* A kind's name in tools and logs ("rows128", "tma_store", "rows256", "split", "wide"; "?"
 * past the last). */
static inline const char *gemmd_tile_kind_name(uint32_t kind) {
  static const char *const names[GEMMD_TILE_KINDS] = {"rows128", "tma_store", "rows256", "split", "wide"};
  return kind < GEMMD_TILE_KINDS ? names[kind] : "?";
}

/* The first 64 bytes of a batch on the device. */
typedef struct gemmd_batch_header_s {
  uint32_t n_groups;
  uint32_t n_quant_jobs;
  uint32_t total_tiles; /* filled by gemmd_gpu_gemm_prepare, for the tile scheduler */
  uint16_t tile_n;      /* columns per output tile, chosen by gemmd_gpu_gemm_prepare */
  uint8_t tile_kind;    /* gemmd_tile_kind_t, chosen with tile_n */
  uint8_t k_splits;     /* ROWS128_SPLIT: K parts of the grid's last round's tiles; else 1 */
  uint64_t a_arena;  /* byte offsets from the start of the batch buffer */
  uint64_t sa_arena;
  uint64_t raw_arena;
  uint64_t b_arena;  /* inline B operands */
  uint64_t d_arena;
  uint64_t sched_arena; /* kernels that need it (gpu_gemm.h): tensor maps, tile prefix sums */
} gemmd_batch_header_t;

#ifdef __cplusplus
static_assert(sizeof(gemmd_group_params_t) == 64, "one table row is 64 bytes");
static_assert(sizeof(gemmd_quant_job_t) == 48, "one quantization job is 48 bytes");
static_assert(sizeof(gemmd_batch_header_t) == 64, "the batch header is 64 bytes");
#else
_Static_assert(sizeof(gemmd_group_params_t) == 64, "one table row is 64 bytes");
_Static_assert(sizeof(gemmd_quant_job_t) == 48, "one quantization job is 48 bytes");
_Static_assert(sizeof(gemmd_batch_header_t) == 64, "the batch header is 64 bytes");
#endif

/* Floats of A-scales for an m×k group (1×128 layout). */
static inline uint64_t gemmd_group_sa_count(uint32_t m, uint32_t k) {
  return (uint64_t)m * ((k + 127u) / 128u);
}

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_KERNELS_GROUP_TABLE_H_ */
