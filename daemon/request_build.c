#include "daemon/request_build.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "daemon/status.h"
#include "kernels/errors.h"

/* A matrix as sent: its shape, dtype, layout and counts first, then where its bytes are
 * (the locate hook needs a shape known to be good to know how many bytes to look for). */
static int take_matrix(const gemmd_gemm_desc_t *d, const gemmd_matrix_in_t *m,
                       const gemmd_limits_t *lim, gemmd_operand_t *op, char *msg, size_t n) {
  const int code = gemmd_validate_matrix(m, lim, msg, n);
  if (code) return code;
  return d->locate(d->locate_ctx, m, op, msg, n);
}

static int take_weight_id(gemmd_request_t *r, const gemmd_gemm_desc_t *d,
                          const gemmd_weights_t *weights, char *msg, size_t n) {
  if (weights != NULL) {
    const gemmd_weight_t *w = gemmd_weights_find_id(weights, d->weight_id);
    if (w == NULL) {
      snprintf(msg, n, "no weight with weight_id %" PRIu64 " is registered", d->weight_id);
      return GEMMD_CODE_NOT_FOUND;
    }
    r->n = w->n;
  } else if (d->weight_id == 0) {
    snprintf(msg, n, "weight_id 0 names no weight; ids start at 1");
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  r->weight_id = d->weight_id;
  return GEMMD_CODE_OK;
}

static int take_weight_name(gemmd_request_t *r, const gemmd_gemm_desc_t *d,
                            const gemmd_weights_t *weights, char *msg, size_t n) {
  const char *name = d->weight_name;
  if (name == NULL || name[0] == '\0' || strlen(name) >= sizeof r->weight_name) {
    snprintf(msg, n, "weight_name must be 1 to %zu characters", sizeof r->weight_name - 1);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (weights != NULL) {
    const gemmd_weight_t *w = gemmd_weights_find_name(weights, name);
    if (w == NULL) {
      snprintf(msg, n, "no weight named '%s' is registered", name);
      return GEMMD_CODE_NOT_FOUND;
    }
    r->n = w->n;
  }
  snprintf(r->weight_name, sizeof r->weight_name, "%s", name);
  return GEMMD_CODE_OK;
}

int gemmd_request_build(gemmd_request_t *r, const gemmd_gemm_desc_t *d, const gemmd_limits_t *lim,
                        const gemmd_weights_t *weights, gemmd_gemm_operands_t *ops, char *msg,
                        size_t n) {
  memset(ops, 0, sizeof *ops);
  r->request_id = d->request_id;
  int code = take_matrix(d, &d->a, lim, &ops->a, msg, n);
  if (code) return code;
  r->m = d->a.rows;
  r->k = d->a.cols;
  code = gemmd_validate_out_dtype(d->out_dtype, &r->out_dtype, msg, n);
  if (code) return code;
  switch (d->b_kind) {
    case GEMMD_B_WEIGHT_ID:
      return take_weight_id(r, d, weights, msg, n);
    case GEMMD_B_WEIGHT_NAME:
      return take_weight_name(r, d, weights, msg, n);
    case GEMMD_B_INLINE:
      code = take_matrix(d, &d->b, lim, &ops->b, msg, n);
      if (code) return code;
      code = gemmd_validate_shapes(d->a.cols, d->b.cols, "b", msg, n);
      if (code) return code;
      ops->inline_b = 1;
      r->n = d->b.rows;
      return GEMMD_CODE_OK;
    case GEMMD_B_NONE:
      break;
  }
  snprintf(msg, n, "%s", d->no_b);
  return GEMMD_CODE_INVALID_ARGUMENT;
}

int gemmd_request_operands_quantize(const gemmd_gemm_operands_t *ops, int raw_ok) {
  return gemmd_request_a_quantizes(&ops->a, raw_ok) ||
         (ops->inline_b && !gemmd_dtype_is_fp8(ops->b.dtype));
}

int gemmd_request_prepare_operands(gemmd_request_t *r, const gemmd_gemm_operands_t *ops,
                                   int raw_ok, const char **failed) {
  if (ops->inline_b) {
    const int rc = gemmd_weight_from_operand(&ops->b, NULL, NULL, NULL, &r->inline_b);
    if (rc != GEMMD_OK) {
      *failed = "b";
      return rc;
    }
  }
  const int rc = gemmd_request_prepare_a(r, &ops->a, raw_ok);
  if (rc != GEMMD_OK) *failed = "a";
  return rc;
}
