#include "daemon/request.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/errors.h"
#include "kernels/group_table.h"
#include "kernels/quantize.h"

void gemmd_request_init(gemmd_request_t *r) { memset(r, 0, sizeof *r); }

/* A BF16/FP16/FP32 A that an engine quantizing on the device takes as sent. */
static int keeps_raw(const gemmd_operand_t *a, int raw_ok) {
  return raw_ok && !gemmd_dtype_is_fp8(a->dtype) && a->scale_layout == GEMMD_SCALE_NONE && a->ld == a->cols;
}

int gemmd_request_a_quantizes(const gemmd_operand_t *a, int raw_ok) {
  return !gemmd_dtype_is_fp8(a->dtype) && !keeps_raw(a, raw_ok);
}

int gemmd_request_prepare_a(gemmd_request_t *r, const gemmd_operand_t *a, int raw_ok) {
  const uint32_t m = a->rows, k = a->cols, kb = (k + 127u) / 128u;
  const size_t ns = (size_t)gemmd_group_sa_count(m, k);
  r->m = m;
  r->k = k;
  if (keeps_raw(a, raw_ok)) {
    r->a_raw = a->data;
    r->a_raw_dtype = a->dtype;
    r->a_dtype = GEMMD_DTYPE_FP8_E4M3;
    r->a = NULL;
    r->a_scales = NULL;
    return GEMMD_OK;
  }
  if (gemmd_dtype_is_fp8(a->dtype)) {
    r->a_dtype = a->dtype;
    r->a = a->data;
    if (a->ld != a->cols) { /* a strided view: rows made contiguous */
      r->a_owned = malloc((size_t)m * k + 1);
      if (r->a_owned == NULL) return GEMMD_ENOMEM;
      for (uint32_t i = 0; i < m; i++) {
        memcpy(r->a_owned + (size_t)i * k, (const uint8_t *)a->data + (size_t)i * a->ld, k);
      }
      r->a = r->a_owned;
    }
    if (a->scale_layout == GEMMD_SCALE_BLOCK_1X128) {
      r->a_scales = a->scales;
      return GEMMD_OK;
    }
    r->a_scales_owned = malloc(sizeof(float) * (ns + 1));
    if (r->a_scales_owned == NULL) return GEMMD_ENOMEM;
    for (uint32_t i = 0; i < m; i++) {
      const float s = gemmd_operand_scale(a, i, 0); /* NONE, TENSOR, ROW: one per row */
      for (uint32_t j = 0; j < kb; j++) r->a_scales_owned[(size_t)i * kb + j] = s;
    }
    r->a_scales = r->a_scales_owned;
    return GEMMD_OK;
  }
  r->a_owned = malloc((size_t)m * k + 1);
  r->a_scales_owned = malloc(sizeof(float) * (ns + 1));
  if (r->a_owned == NULL || r->a_scales_owned == NULL) return GEMMD_ENOMEM;
  const int rc = gemmd_quantize(a, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_1X128, r->a_owned,
                                r->a_scales_owned);
  if (rc != GEMMD_OK) return rc;
  r->a_dtype = GEMMD_DTYPE_FP8_E4M3;
  r->a = r->a_owned;
  r->a_scales = r->a_scales_owned;
  return GEMMD_OK;
}

void gemmd_request_release(gemmd_request_t *r) {
  free(r->a_owned);
  free(r->a_scales_owned);
  r->a_owned = NULL;
  r->a_scales_owned = NULL;
  if (r->inline_b != NULL) {
    gemmd_weight_free(r->inline_b);
    r->inline_b = NULL;
  }
}

void gemmd_request_fail(gemmd_request_t *r, int code, const char *fmt, ...) {
  r->status = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->message, sizeof r->message, fmt, ap);
  va_end(ap);
}
