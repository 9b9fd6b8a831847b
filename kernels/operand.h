/* Operands of D = A·Bᵀ (docs/api.md §1): element types, scale layouts, and a view of one
 * matrix with its scales. The enum values are the numbers of gemm.proto's DType and
 * ScaleLayout, so a decoded request maps onto them without a table.
 *
 * A is M×K and B is N×K, both row-major with K contiguous; D is M×N row-major.
 * A scale is a multiplier: real value = stored value × scale.
 */
#ifndef GEMMD_KERNELS_OPERAND_H_
#define GEMMD_KERNELS_OPERAND_H_

#include <stddef.h>
#include <stdint.h>

#include "kernels/fp8.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GEMMD_DTYPE_UNSPECIFIED = 0,
  GEMMD_DTYPE_FP8_E4M3 = 1,
  GEMMD_DTYPE_FP8_E5M2 = 2,
  GEMMD_DTYPE_BF16 = 3,
  GEMMD_DTYPE_FP16 = 4,
  GEMMD_DTYPE_FP32 = 5,
} gemmd_dtype_t;

typedef enum {
  GEMMD_SCALE_NONE = 0,          /* every multiplier is 1 */
  GEMMD_SCALE_TENSOR = 1,        /* one float */
  GEMMD_SCALE_ROW = 2,           /* one float per row */
  GEMMD_SCALE_BLOCK_1X128 = 3,   /* rows × ceil(cols/128); A only */
  GEMMD_SCALE_BLOCK_128X128 = 4, /* ceil(rows/128) × ceil(cols/128); B only */
} gemmd_scale_layout_t;

#define GEMMD_SCALE_BLOCK 128

typedef enum { GEMMD_OPERAND_A = 0, GEMMD_OPERAND_B = 1 } gemmd_operand_role_t;

/* One matrix as the numerics see it. Row r starts at data + r*ld elements. */
typedef struct gemmd_operand_s {
  uint32_t rows;
  uint32_t cols;
  size_t ld; /* elements between row starts, >= cols */
  gemmd_dtype_t dtype;
  const void *data;
  gemmd_scale_layout_t scale_layout;
  const float *scales; /* gemmd_scale_count() floats, row-major; NULL for NONE */
} gemmd_operand_t;

/* Bytes per element; 0 for an unknown dtype. */
size_t gemmd_dtype_size(gemmd_dtype_t dtype);
int gemmd_dtype_is_fp8(gemmd_dtype_t dtype);
int gemmd_dtype_is_valid(int dtype);      /* a known DType other than UNSPECIFIED */
int gemmd_scale_layout_is_valid(int layout);
const char *gemmd_dtype_name(gemmd_dtype_t dtype);          /* "DTYPE_FP8_E4M3" */
const char *gemmd_scale_layout_name(gemmd_scale_layout_t l); /* "SCALE_LAYOUT_ROW" */

/* Number of floats a layout needs for a rows×cols matrix. */
size_t gemmd_scale_count(gemmd_scale_layout_t layout, uint32_t rows, uint32_t cols);

/* Whether docs/api.md §1 allows this layout for this operand (1×128 is A's, 128×128 B's). */
int gemmd_scale_layout_allowed(gemmd_scale_layout_t layout, gemmd_operand_role_t role);

/* The multiplier of element (r, c). */
static inline float gemmd_operand_scale(const gemmd_operand_t *op, uint32_t r, uint32_t c) {
  switch (op->scale_layout) {
    case GEMMD_SCALE_TENSOR:
      return op->scales[0];
    case GEMMD_SCALE_ROW:
      return op->scales[r];
    case GEMMD_SCALE_BLOCK_1X128:
      return op->scales[(size_t)r * ((op->cols + 127u) / 128u) + c / 128u];
    case GEMMD_SCALE_BLOCK_128X128:
      return op->scales[(size_t)(r / 128u) * ((op->cols + 127u) / 128u) + c / 128u];
    case GEMMD_SCALE_NONE:
    default:
      return 1.0f;
  }
}

/* The stored value of element (r, c) as FP32, before scaling. Exact. */
static inline float gemmd_operand_raw(const gemmd_operand_t *op, uint32_t r, uint32_t c) {
  const size_t i = (size_t)r * op->ld + c;
  switch (op->dtype) {
    case GEMMD_DTYPE_FP8_E4M3:
      return gemmd_e4m3_to_f32(((const uint8_t *)op->data)[i]);
    case GEMMD_DTYPE_FP8_E5M2:
      return gemmd_e5m2_to_f32(((const uint8_t *)op->data)[i]);
    case GEMMD_DTYPE_BF16:
      return gemmd_bf16_to_f32(((const uint16_t *)op->data)[i]);
    case GEMMD_DTYPE_FP16:
      return gemmd_fp16_to_f32(((const uint16_t *)op->data)[i]);
    case GEMMD_DTYPE_FP32:
      return ((const float *)op->data)[i];
    case GEMMD_DTYPE_UNSPECIFIED:
    default:
      return 0.0f;
  }
}

/* Decode n consecutive stored values of one row to FP32 (no scaling). */
void gemmd_decode_row(gemmd_dtype_t dtype, const void *src, size_t n, float *dst);

/* Encode n FP32 values as an output dtype (BF16, FP16 or FP32), nearest even. */
void gemmd_encode_row(gemmd_dtype_t dtype, const float *src, size_t n, void *dst);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_KERNELS_OPERAND_H_ */
