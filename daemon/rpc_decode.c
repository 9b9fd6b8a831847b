/* Decoding GemmRequest and RegisterWeight messages. See rpc_decode.h. */
#include "daemon/rpc_decode.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/request_build.h"
#include "daemon/status.h"
#include "kernels/errors.h"

/* ---- GemmRequest -------------------------------------------------------------------------- */

/* The description of a matrix as it came in the message. */
static gemmd_matrix_in_t matrix_in(const char *what, gemmd_operand_role_t role,
                                   const Gemmd__V1__Matrix *m) {
  const gemmd_matrix_in_t in = {what, role, m->rows, m->cols, m->dtype, m->scale_layout,
                                m->data.len, m->n_scales};
  return in;
}

/* The locate hook: the bytes are in the decoded message (ctx), A's or B's by role. */
static int locate_in_message(const void *ctx, const gemmd_matrix_in_t *in, gemmd_operand_t *op,
                             char *msg, size_t n) {
  const Gemmd__V1__GemmRequest *req = ctx;
  const Gemmd__V1__Matrix *m = in->role == GEMMD_OPERAND_A ? req->a : req->b;
  *op = (gemmd_operand_t){m->rows,
                          m->cols,
                          m->cols,
                          (gemmd_dtype_t)m->dtype,
                          m->data.data,
                          (gemmd_scale_layout_t)m->scale_layout,
                          m->n_scales ? m->scales : NULL};
  return GEMMD_CODE_OK;
}

int gemmd_rpc_decode_gemm(const Gemmd__V1__GemmRequest *m, const gemmd_limits_t *lim,
                          int quantizes_a, gemmd_request_t *r, char *msg, size_t n) {
  r->request_id = m->request_id;
  if (m->a == NULL) {
    snprintf(msg, n, "a is missing: every GemmRequest needs the A matrix");
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  gemmd_gemm_desc_t d = {.request_id = m->request_id,
                         .a = matrix_in("a", GEMMD_OPERAND_A, m->a),
                         .out_dtype = m->out_dtype,
                         .b_kind = GEMMD_B_NONE,
                         .no_b = "no B: set one of weight_id, weight_name or b",
                         .locate = locate_in_message,
                         .locate_ctx = m};
  switch (m->rhs_case) {
    case GEMMD__V1__GEMM_REQUEST__RHS_WEIGHT_ID:
      d.b_kind = GEMMD_B_WEIGHT_ID;
      d.weight_id = m->weight_id;
      break;
    case GEMMD__V1__GEMM_REQUEST__RHS_WEIGHT_NAME:
      d.b_kind = GEMMD_B_WEIGHT_NAME;
      d.weight_name = m->weight_name;
      break;
    case GEMMD__V1__GEMM_REQUEST__RHS_B:
      d.b_kind = GEMMD_B_INLINE;
      d.b = matrix_in("b", GEMMD_OPERAND_B, m->b);
      break;
    default:
      break;
  }
  gemmd_gemm_operands_t ops;
  /* Off the loop: the registry is not ours to read, so the loop resolves a named weight. */
  const int code = gemmd_request_build(r, &d, lim, NULL, &ops, msg, n);
  if (code) return code;
  const char *failed = "";
  const int rc = gemmd_request_prepare_operands(r, &ops, quantizes_a, &failed);
  if (rc != GEMMD_OK) {
    snprintf(msg, n, "cannot prepare %s: %s", failed, gemmd_strerror(rc));
    const int b_internal = failed[0] == 'b' && rc != GEMMD_ENOMEM;
    return b_internal ? GEMMD_CODE_INTERNAL : GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  return GEMMD_CODE_OK;
}

/* ---- RegisterWeight ------------------------------------------------------------------------ */

int gemmd_weight_upload_start(gemmd_weight_upload_t *up, const Gemmd__V1__RegisterWeightRequest *m,
                              const gemmd_limits_t *lim, uint64_t weight_memory_bytes,
                              gemmd_upload_admit_fn admit, void *admit_ctx, char *msg, size_t n) {
  if (m->name == NULL || m->name[0] == '\0' || strlen(m->name) >= sizeof up->name) {
    snprintf(msg, n, "name must be 1 to %zu characters in the first message", sizeof up->name - 1);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (m->weight == NULL) {
    snprintf(msg, n, "weight is missing: the first message carries the Matrix header");
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  const Gemmd__V1__Matrix *h = m->weight;
  /* Check the header as if complete, so sizes and layouts are refused before the data. */
  const size_t esz = gemmd_dtype_size((gemmd_dtype_t)h->dtype);
  const size_t want = (size_t)h->rows * h->cols * esz;
  const size_t want_s = gemmd_scale_layout_is_valid(h->scale_layout)
                            ? gemmd_scale_count((gemmd_scale_layout_t)h->scale_layout, h->rows, h->cols)
                            : 0;
  const gemmd_matrix_in_t in = {"weight", GEMMD_OPERAND_B, h->rows, h->cols, h->dtype,
                                h->scale_layout, want, want_s};
  int code = gemmd_validate_matrix(&in, lim, msg, n);
  if (code) return code;
  const uint64_t stored = (uint64_t)h->rows * h->cols + 4 * want_s;
  if (stored > weight_memory_bytes) {
    snprintf(msg, n, "weight '%s' needs %" PRIu64 " bytes, over the whole budget of %" PRIu64
             " (--weight-memory-bytes)", m->name, stored, weight_memory_bytes);
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  if (admit != NULL && (code = admit(admit_ctx, m->name, stored, msg, n)) != GEMMD_CODE_OK) return code;
  snprintf(up->name, sizeof up->name, "%s", m->name);
  up->rows = h->rows;
  up->cols = h->cols;
  up->dtype = (gemmd_dtype_t)h->dtype;
  up->layout = (gemmd_scale_layout_t)h->scale_layout;
  up->data_want = want;
  up->scales_want = want_s;
  up->started = 1;
  return GEMMD_CODE_OK;
}

/* Grows *buf to hold `need` bytes (never past `want`): memory follows the data that came,
 * not the size a header claims. 0, or -1 out of memory. */
static int grow(void **buf, size_t *cap, size_t need, size_t want) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 1 << 20;
  while (c < need) c *= 2;
  if (c > want) c = want;
  void *p = realloc(*buf, c + 1);
  if (p == NULL) return -1;
  *buf = p;
  *cap = c;
  return 0;
}

int gemmd_weight_upload_append(gemmd_weight_upload_t *up, const Gemmd__V1__RegisterWeightRequest *m,
                               const gemmd_piece_range_t *data, char *msg, size_t n) {
  const size_t data_len = data != NULL ? data->len : 0;
  const size_t n_scales = m->weight != NULL ? m->weight->n_scales : 0;
  if (data_len > up->data_want - up->data_len) {
    snprintf(msg, n, "weight.data runs past %zu bytes, the size of a %u x %u %s weight",
             up->data_want, up->rows, up->cols, gemmd_dtype_name(up->dtype));
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (n_scales > up->scales_want - up->n_scales) {
    snprintf(msg, n, "weight.scales runs past the %zu values %s needs", up->scales_want,
             gemmd_scale_layout_name(up->layout));
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (grow((void **)&up->data, &up->data_cap, up->data_len + data_len, up->data_want) != 0 ||
      grow((void **)&up->scales, &up->scales_cap, sizeof(float) * (up->n_scales + n_scales),
           sizeof(float) * up->scales_want) != 0) {
    snprintf(msg, n, "out of memory for a %zu-byte weight", up->data_want);
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  if (data_len) gemmd_piece_range_copy(data, up->data + up->data_len);
  up->data_len += data_len;
  if (n_scales) memcpy(up->scales + up->n_scales, m->weight->scales, sizeof(float) * n_scales);
  up->n_scales += n_scales;
  return GEMMD_CODE_OK;
}

int gemmd_weight_upload_finish(gemmd_weight_upload_t *up, const gemmd_weight_quantizer_t *q, gemmd_weight_t **out,
                               char *msg, size_t n) {
  if (!up->started) {
    snprintf(msg, n, "the stream ended before any RegisterWeightRequest");
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (up->data_len != up->data_want || up->n_scales != up->scales_want) {
    snprintf(msg, n, "the stream ended after %zu of %zu weight.data bytes and %zu of %zu weight.scales",
             up->data_len, up->data_want, up->n_scales, up->scales_want);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  const gemmd_operand_t op = {up->rows,   up->cols, up->cols, up->dtype, up->data,
                              up->layout, up->scales_want ? up->scales : NULL};
  gemmd_weight_t *w;
  /* FP8 bytes are taken over by the weight; other dtypes are quantized here. */
  const int fp8 = gemmd_dtype_is_fp8(up->dtype);
  const int rc = gemmd_weight_from_operand(&op, NULL, NULL, q, &w);
  if (rc != GEMMD_OK) {
    snprintf(msg, n, "cannot prepare the weight: %s", gemmd_strerror(rc));
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  if (fp8) {
    w->owned_data = up->data;
    w->owned_scales = up->scales;
    up->data = NULL;
    up->scales = NULL;
  }
  w->name = strdup(up->name);
  if (w->name == NULL) {
    gemmd_weight_free(w);
    snprintf(msg, n, "out of memory");
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  *out = w;
  return GEMMD_CODE_OK;
}

void gemmd_weight_upload_free(gemmd_weight_upload_t *up) {
  free(up->data);
  free(up->scales);
  up->data = NULL;
  up->scales = NULL;
}
