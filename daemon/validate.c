#include "daemon/validate.h"

#include <stdio.h>

#include "daemon/status.h"

static const char *layout_needs(gemmd_scale_layout_t l) {
  switch (l) {
    case GEMMD_SCALE_NONE:
      return "none";
    case GEMMD_SCALE_TENSOR:
      return "1";
    case GEMMD_SCALE_ROW:
      return "%s.rows = %u";
    case GEMMD_SCALE_BLOCK_1X128:
      return "%s.rows x ceil(%s.cols/128) = %u x %u = %zu";
    case GEMMD_SCALE_BLOCK_128X128:
      return "ceil(%s.rows/128) x ceil(%s.cols/128) = %u x %u = %zu";
  }
  return "?";
}

int gemmd_validate_matrix(const gemmd_matrix_in_t *in, const gemmd_limits_t *lim, char *msg, size_t n) {
  const char *what = in->what;
  const gemmd_operand_role_t role = in->role;
  const uint32_t rows = in->rows, cols = in->cols;
  const int dtype = in->dtype, layout = in->layout;
  const size_t data_bytes = in->data_bytes, n_scales = in->n_scales;
  if (dtype == GEMMD_DTYPE_UNSPECIFIED) {
    snprintf(msg, n,
             "%s.dtype is DTYPE_UNSPECIFIED; set DTYPE_FP8_E4M3, DTYPE_FP8_E5M2, DTYPE_BF16, "
             "DTYPE_FP16 or DTYPE_FP32",
             what);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (!gemmd_dtype_is_valid(dtype)) {
    snprintf(msg, n, "%s.dtype %d is not a known DType", what, dtype);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (!gemmd_scale_layout_is_valid(layout)) {
    snprintf(msg, n, "%s.scale_layout %d is not a known ScaleLayout", what, layout);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  const gemmd_scale_layout_t l = (gemmd_scale_layout_t)layout;
  if (!gemmd_scale_layout_allowed(l, role)) {
    snprintf(msg, n, "%s.scale_layout %s is not allowed here: %s", what,
             gemmd_scale_layout_name(l),
             role == GEMMD_OPERAND_A
                 ? "A takes SCALE_LAYOUT_NONE, _TENSOR, _ROW or _BLOCK_1X128"
                 : "B takes SCALE_LAYOUT_NONE, _TENSOR, _ROW or _BLOCK_128X128");
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (rows == 0 || cols == 0) {
    snprintf(msg, n, "%s is %u x %u; rows and cols must be at least 1", what, rows, cols);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  const uint32_t max_rows = role == GEMMD_OPERAND_A ? lim->max_m : lim->max_n;
  if (rows > max_rows) {
    snprintf(msg, n, "%s.rows = %u is over the limit %u (--max-%s)", what, rows, max_rows,
             role == GEMMD_OPERAND_A ? "m" : "n");
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  if (cols > lim->max_k) {
    snprintf(msg, n, "%s.cols = %u is over the limit %u (--max-k)", what, cols, lim->max_k);
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  const size_t esz = gemmd_dtype_size((gemmd_dtype_t)dtype);
  const size_t want = (size_t)rows * cols * esz;
  if (data_bytes != want) {
    snprintf(msg, n, "%s.data has %zu bytes; %u x %u %s needs %zu", what, data_bytes, rows,
             cols, gemmd_dtype_name((gemmd_dtype_t)dtype), want);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  const size_t want_s = gemmd_scale_count(l, rows, cols);
  if (n_scales != want_s) {
    char need[160];
    const unsigned rb = (rows + 127u) / 128u, cb = (cols + 127u) / 128u;
    switch (l) {
      case GEMMD_SCALE_ROW:
        snprintf(need, sizeof need, layout_needs(l), what, rows);
        break;
      case GEMMD_SCALE_BLOCK_1X128:
        snprintf(need, sizeof need, layout_needs(l), what, what, rows, cb, want_s);
        break;
      case GEMMD_SCALE_BLOCK_128X128:
        snprintf(need, sizeof need, layout_needs(l), what, what, rb, cb, want_s);
        break;
      default:
        snprintf(need, sizeof need, "%s", layout_needs(l));
        break;
    }
    snprintf(msg, n, "%s.scales has %zu values; %s needs %s", what, n_scales,
             gemmd_scale_layout_name(l), need);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  return 0;
}

int gemmd_validate_out_dtype(int dtype, gemmd_dtype_t *out, char *msg, size_t n) {
  if (dtype == GEMMD_DTYPE_UNSPECIFIED) {
    *out = GEMMD_DTYPE_BF16;
    return 0;
  }
  if (dtype == GEMMD_DTYPE_BF16 || dtype == GEMMD_DTYPE_FP16 || dtype == GEMMD_DTYPE_FP32) {
    *out = (gemmd_dtype_t)dtype;
    return 0;
  }
  if (gemmd_dtype_is_valid(dtype)) {
    snprintf(msg, n, "out_dtype %s is not an output type; use DTYPE_BF16, DTYPE_FP16 or DTYPE_FP32",
             gemmd_dtype_name((gemmd_dtype_t)dtype));
  } else {
    snprintf(msg, n, "out_dtype %d is not a known DType", dtype);
  }
  return GEMMD_CODE_INVALID_ARGUMENT;
}

int gemmd_validate_shapes(uint32_t a_cols, uint32_t b_cols, const char *b_what, char *msg,
                          size_t n) {
  if (a_cols == b_cols) return 0;
  snprintf(msg, n, "a.cols = %u but %s has k = %u; A is M x K and B is N x K", a_cols, b_what,
           b_cols);
  return GEMMD_CODE_INVALID_ARGUMENT;
}
