/* The grouped-GEMM parameter table: one row per GEMM group of a batch.
 *
 * A group is D_g = A_g · B_gᵀ, where A_g stacks the rows of every request in the batch
 * that uses the same weight, A dtype and output dtype. Rows are plain old data, the same
 * bytes on the host and on the device, so the CUDA engine uploads the table as is and
 * its persistent kernel reads shapes and offsets from it (a captured graph never needs
 * recapture). Offsets are into the batch's three arenas:
 *   A arena:       FP8 bytes, each group's m×k block row-major;
 *   A-scale arena: FP32, each group's m × ceil(k/128) block (the 1×128 layout);
 *   D arena:       output bytes, each group's m×n block row-major in out_dtype.
 * B is a registered weight (or a request's inline B): FP8, n×k row-major, with its own
 * scale layout (NONE, TENSOR, ROW or BLOCK_128X128), addressed directly.
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
  uint64_t reserved;
} gemmd_group_params_t;

#ifdef __cplusplus
static_assert(sizeof(gemmd_group_params_t) == 64, "one table row is 64 bytes");
#else
_Static_assert(sizeof(gemmd_group_params_t) == 64, "one table row is 64 bytes");
#endif

/* Floats of A-scales for an m×k group (1×128 layout). */
static inline uint64_t gemmd_group_sa_count(uint32_t m, uint32_t k) {
  return (uint64_t)m * ((k + 127u) / 128u);
}

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_KERNELS_GROUP_TABLE_H_ */
