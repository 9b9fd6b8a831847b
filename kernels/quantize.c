#include "kernels/quantize.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "kernels/errors.h"

float gemmd_fp8_max(gemmd_dtype_t fp8) {
  switch (fp8) {
    case GEMMD_DTYPE_FP8_E4M3:
      return GEMMD_E4M3_MAX;
    case GEMMD_DTYPE_FP8_E5M2:
      return GEMMD_E5M2_MAX;
    default:
      return 0.0f;
  }
}

/* Row r of src as real values (stored × scale). */
static void load_row(const gemmd_operand_t *src, uint32_t r, float *out) {
  const size_t esz = gemmd_dtype_size(src->dtype);
  gemmd_decode_row(src->dtype, (const char *)src->data + (size_t)r * src->ld * esz, src->cols,
                   out);
  if (src->scale_layout == GEMMD_SCALE_NONE) return;
  for (uint32_t c = 0; c < src->cols; c++) out[c] *= gemmd_operand_scale(src, r, c);
}

static float finite_amax(const float *v, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; i++) {
    const float a = fabsf(v[i]);
    if (a > m && a <= FLT_MAX) m = a;
  }
  return m;
}

static void encode_span(gemmd_dtype_t fp8, const float *v, size_t n, float scale, uint8_t *dst) {
  for (size_t i = 0; i < n; i++) dst[i] = gemmd_quantize_value(fp8, v[i] / scale);
}

/* TENSOR and NONE: one scale for the whole matrix, found in a first pass. */
static int quantize_whole(const gemmd_operand_t *src, gemmd_dtype_t fp8,
                          gemmd_scale_layout_t layout, uint8_t *dst, float *scales) {
  float *row = malloc(sizeof(float) * (src->cols ? src->cols : 1));
  if (row == NULL) return GEMMD_ENOMEM;
  float scale = 1.0f;
  if (layout == GEMMD_SCALE_TENSOR) {
    float amax = 0.0f;
    for (uint32_t r = 0; r < src->rows; r++) {
      load_row(src, r, row);
      const float m = finite_amax(row, src->cols);
      if (m > amax) amax = m;
    }
    scale = gemmd_quantize_scale(fp8, amax);
    scales[0] = scale;
  }
  for (uint32_t r = 0; r < src->rows; r++) {
    load_row(src, r, row);
    encode_span(fp8, row, src->cols, scale, dst + (size_t)r * src->cols);
  }
  free(row);
  return GEMMD_OK;
}

/* ROW, 1×128 and 128×128: bands of 1 or 128 rows, each band's blocks independent. */
static int quantize_banded(const gemmd_operand_t *src, gemmd_dtype_t fp8,
                           gemmd_scale_layout_t layout, uint8_t *dst, float *scales) {
  const uint32_t rows = src->rows, cols = src->cols;
  const uint32_t band = layout == GEMMD_SCALE_BLOCK_128X128 ? GEMMD_SCALE_BLOCK : 1;
  const uint32_t bw = layout == GEMMD_SCALE_ROW ? cols : GEMMD_SCALE_BLOCK;
  const uint32_t nbc = cols == 0 ? 0 : (cols + bw - 1) / bw;
  float *tile = malloc(sizeof(float) * (size_t)band * (cols ? cols : 1));
  if (tile == NULL) return GEMMD_ENOMEM;
  for (uint32_t r0 = 0; r0 < rows; r0 += band) {
    const uint32_t h = rows - r0 < band ? rows - r0 : band;
    for (uint32_t i = 0; i < h; i++) load_row(src, r0 + i, tile + (size_t)i * cols);
    for (uint32_t j = 0; j < nbc; j++) {
      const uint32_t c0 = j * bw, w = cols - c0 < bw ? cols - c0 : bw;
      float amax = 0.0f;
      for (uint32_t i = 0; i < h; i++) {
        const float m = finite_amax(tile + (size_t)i * cols + c0, w);
        if (m > amax) amax = m;
      }
      const float scale = gemmd_quantize_scale(fp8, amax);
      scales[(size_t)(r0 / band) * nbc + j] = scale;
      for (uint32_t i = 0; i < h; i++) {
        encode_span(fp8, tile + (size_t)i * cols + c0, w, scale,
                    dst + (size_t)(r0 + i) * cols + c0);
      }
    }
  }
  free(tile);
  return GEMMD_OK;
}

int gemmd_quantize(const gemmd_operand_t *src, gemmd_dtype_t fp8, gemmd_scale_layout_t layout,
                   uint8_t *dst, float *scales) {
  if (src == NULL || dst == NULL || !gemmd_dtype_is_fp8(fp8) ||
      !gemmd_dtype_is_valid((int)src->dtype) || !gemmd_scale_layout_is_valid((int)layout)) {
    return GEMMD_EINVAL;
  }
  if (layout != GEMMD_SCALE_NONE && scales == NULL) return GEMMD_EINVAL;
  if (layout == GEMMD_SCALE_NONE || layout == GEMMD_SCALE_TENSOR) {
    return quantize_whole(src, fp8, layout, dst, scales);
  }
  return quantize_banded(src, fp8, layout, dst, scales);
}
