/* Checks of what a caller sent, with messages a caller can act on (docs/api.md §2):
 *   "a.scales has 3 values; SCALE_LAYOUT_ROW needs a.rows = 8".
 * The request builder (request_build.h) runs them for a GEMM, and a transport for a weight
 * it registers, on the transport's own thread before anything is queued. Each returns 0
 * or the gRPC status code to answer with, and writes the message. */
#ifndef GEMMD_DAEMON_VALIDATE_H_
#define GEMMD_DAEMON_VALIDATE_H_

#include <stddef.h>
#include <stdint.h>

#include "kernels/operand.h"

typedef struct gemmd_limits_s {
  uint32_t max_m, max_n, max_k;
} gemmd_limits_t;

/* One matrix as received, before any check. */
typedef struct gemmd_matrix_in_s {
  const char *what;          /* its name in messages: "a", "b", "weight" */
  gemmd_operand_role_t role; /* the layouts it may use, the limits that apply (A: max_m ×
                                max_k; B: max_n × max_k) */
  uint32_t rows, cols;
  int dtype, layout;         /* as sent: any value */
  size_t data_bytes;         /* bytes of data that came */
  size_t n_scales;           /* scales that came */
} gemmd_matrix_in_t;

int gemmd_validate_matrix(const gemmd_matrix_in_t *in, const gemmd_limits_t *lim, char *msg, size_t n);

/* The output dtype: UNSPECIFIED becomes BF16 in *out. */
int gemmd_validate_out_dtype(int dtype, gemmd_dtype_t *out, char *msg, size_t n);

/* A (m×k) against B (n×k) named `b_what` ("b", "weight 'w1'"). */
int gemmd_validate_shapes(uint32_t a_cols, uint32_t b_cols, const char *b_what, char *msg,
                          size_t n);

#endif /* GEMMD_DAEMON_VALIDATE_H_ */
