#include "kernels/ref_gemm.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/errors.h"

void gemmd_ref_dequantize(const gemmd_operand_t *op, double *out) {
  for (uint32_t r = 0; r < op->rows; r++) {
    for (uint32_t c = 0; c < op->cols; c++) {
      out[(size_t)r * op->cols + c] =
          (double)gemmd_operand_raw(op, r, c) * (double)gemmd_operand_scale(op, r, c);
    }
  }
}

int gemmd_ref_gemm_f64(const gemmd_operand_t *a, const gemmd_operand_t *b, double *d) {
  if (a == NULL || b == NULL || d == NULL || a->cols != b->cols || a->data == NULL ||
      b->data == NULL) {
    return GEMMD_EINVAL;
  }
  const size_t M = a->rows, N = b->rows, K = a->cols;
  double *da = malloc(sizeof(double) * (M * K + 1));
  double *db = malloc(sizeof(double) * (N * K + 1));
  if (da == NULL || db == NULL) {
    free(da);
    free(db);
    return GEMMD_ENOMEM;
  }
  gemmd_ref_dequantize(a, da);
  gemmd_ref_dequantize(b, db);
  for (size_t m = 0; m < M; m++) {
    for (size_t n = 0; n < N; n++) {
      const double *x = da + m * K, *y = db + n * K;
      double s = 0.0;
      for (size_t k = 0; k < K; k++) s += x[k] * y[k];
      d[m * N + n] = s;
    }
  }
  free(da);
  free(db);
  return GEMMD_OK;
}

static double out_value(const void *out, gemmd_dtype_t dtype, size_t i) {
  switch (dtype) {
    case GEMMD_DTYPE_BF16:
      return gemmd_bf16_to_f32(((const uint16_t *)out)[i]);
    case GEMMD_DTYPE_FP16:
      return gemmd_fp16_to_f32(((const uint16_t *)out)[i]);
    case GEMMD_DTYPE_FP32:
      return ((const float *)out)[i];
    default:
      return NAN;
  }
}

double gemmd_rel_frobenius_error(const double *ref, const void *out, gemmd_dtype_t out_dtype,
                                 size_t n) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double r = ref[i], o = out_value(out, out_dtype, i);
    if (!isfinite(r) || !isfinite(o)) {
      /* Non-finite values must agree exactly (NaN with NaN, Inf with same-signed Inf). */
      if (isnan(r) && isnan(o)) continue;
      if (isinf(r) && o == r) continue;
      return INFINITY;
    }
    num += (o - r) * (o - r);
    den += r * r;
  }
  if (den == 0.0) return sqrt(num);
  return sqrt(num / den);
}
