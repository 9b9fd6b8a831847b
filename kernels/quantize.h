/* Quantizers: real-valued matrices -> FP8 with a scale layout of docs/api.md §1.
 *
 * For each scale block (the whole matrix, a row, 1×128 or 128×128 elements) the scale is
 * amax / fp8_max, where amax is the largest finite |value| in the block; an all-zero
 * block gets scale 1, and a scale never goes below FLT_MIN (2^-126), so that blocks of
 * tiny values stay representable. Each element becomes encode(value / scale) rounded to
 * nearest even and saturated to ±fp8_max. NaN stays NaN; ±Inf becomes NaN in E4M3 (it
 * has no Inf) and ±Inf in E5M2. With SCALE_NONE every scale is 1 and values saturate.
 */
#ifndef GEMMD_KERNELS_QUANTIZE_H_
#define GEMMD_KERNELS_QUANTIZE_H_

#include <float.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/operand.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest finite value of an FP8 dtype; 0 for other dtypes. */
float gemmd_fp8_max(gemmd_dtype_t fp8);

/* Encode one already-scaled value to an FP8 dtype the way the quantizers do. Shared with
 * the GPU quantizers (kernels/sm90_quantize.cu), which must give the same bits. */
GEMMD_HD uint8_t gemmd_quantize_value(gemmd_dtype_t fp8, float v) {
  const uint32_t u = gemmd_f32_bits(v);
  if ((u & 0x7FFFFFFFu) == 0x7F800000u) { /* ±Inf */
    return fp8 == GEMMD_DTYPE_FP8_E4M3 ? (uint8_t)(0x7Fu | ((u >> 24) & 0x80u))
                                       : (uint8_t)(0x7Cu | ((u >> 24) & 0x80u));
  }
  return fp8 == GEMMD_DTYPE_FP8_E4M3 ? gemmd_e4m3_from_f32(v, GEMMD_SAT)
                                     : gemmd_e5m2_from_f32(v, GEMMD_SAT);
}

/* The scale of a block whose largest finite magnitude is amax. */
GEMMD_HD float gemmd_quantize_scale(gemmd_dtype_t fp8, float amax) {
  if (!(amax > 0.0f)) return 1.0f;
  const float s = amax / (fp8 == GEMMD_DTYPE_FP8_E4M3 ? GEMMD_E4M3_MAX : GEMMD_E5M2_MAX);
  return s < FLT_MIN ? FLT_MIN : s;
}

/* dst[i] = gemmd_quantize_value(fp8, v[i] / scale) for i < n, bit for bit, by table. */
void gemmd_quantize_span(gemmd_dtype_t fp8, const float *v, size_t n, float scale, uint8_t *dst);

/* Quantize src (values = stored × src's own scales, any dtype) to `fp8` with `layout`.
 * dst receives rows×cols bytes, row-major and dense; scales receives
 * gemmd_scale_count(layout, rows, cols) floats (may be NULL for SCALE_NONE).
 * Returns 0, GEMMD_EINVAL (not an FP8 dtype, unknown layout) or GEMMD_ENOMEM. */
int gemmd_quantize(const gemmd_operand_t *src, gemmd_dtype_t fp8, gemmd_scale_layout_t layout,
                   uint8_t *dst, float *scales);
/* The same on `threads` threads (0: one per 4 Mi elements, at most 4 and the CPUs), each
 * taking a range of row bands (ROW, 1×128, 128×128 layouts; the others on one thread). The
 * result is the same bits whatever the count. */
int gemmd_quantize_threads(const gemmd_operand_t *src, gemmd_dtype_t fp8, gemmd_scale_layout_t layout,
                           uint8_t *dst, float *scales, unsigned threads);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_KERNELS_QUANTIZE_H_ */
