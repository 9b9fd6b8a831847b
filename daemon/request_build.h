/* Building a GEMM request from what a transport decoded, the same for every transport.
 *
 * A transport turns its message into a gemmd_gemm_desc_t (shapes, dtypes and layouts as
 * sent, how B is named) and a locate hook that reaches an operand's bytes. The builder
 * validates it in one order — A, A's bytes, out dtype, B, B's bytes, K — fills the
 * request and returns the located operands; gemmd_request_prepare_operands then makes
 * inline B a weight and normalizes A. Preparation is a step of its own because it may
 * quantize (work in proportion to the operands, which a transport may move off its
 * thread). Checks of the transport's own framing (a missing field, arena offsets, where
 * D goes) stay in the transport: the arena check runs as its locate hook. */
#ifndef GEMMD_DAEMON_REQUEST_BUILD_H_
#define GEMMD_DAEMON_REQUEST_BUILD_H_

#include <stddef.h>
#include <stdint.h>

#include "daemon/request.h"
#include "daemon/validate.h"
#include "daemon/weights.h"
#include "kernels/operand.h"

typedef enum {
  GEMMD_B_NONE,        /* no usable B came: refused with desc->no_b */
  GEMMD_B_WEIGHT_ID,   /* a registered weight by id */
  GEMMD_B_WEIGHT_NAME, /* a registered weight by name */
  GEMMD_B_INLINE,      /* B in the request itself */
} gemmd_b_kind_t;

/* Reaches the bytes of a matrix that passed gemmd_validate_matrix: fills *op (dense,
 * ld = cols) with its data and scales (NULL when none). Returns 0, or a gRPC code with
 * msg when they lie out of the caller's reach. */
typedef int (*gemmd_locate_fn)(const void *ctx, const gemmd_matrix_in_t *m, gemmd_operand_t *op,
                               char *msg, size_t n);

/* One GEMM as a transport received it. */
typedef struct gemmd_gemm_desc_s {
  uint64_t request_id;
  gemmd_matrix_in_t a; /* what = "a", role A */
  int out_dtype;       /* as sent */
  gemmd_b_kind_t b_kind;
  uint64_t weight_id;       /* GEMMD_B_WEIGHT_ID */
  const char *weight_name;  /* GEMMD_B_WEIGHT_NAME; may be NULL */
  gemmd_matrix_in_t b;      /* GEMMD_B_INLINE: what = "b", role B */
  const char *no_b;         /* GEMMD_B_NONE: the message, in the transport's words */
  gemmd_locate_fn locate;
  const void *locate_ctx;
} gemmd_gemm_desc_t;

/* The operands a built request still has to prepare. */
typedef struct gemmd_gemm_operands_s {
  gemmd_operand_t a;
  gemmd_operand_t b; /* with inline_b */
  int inline_b;
} gemmd_gemm_operands_t;

/* Validates d and fills r: request_id, out_dtype, m and k, B's reference (weight_id or
 * weight_name) and n when B's rows are known here (inline B, or a weight looked up); the
 * located operands go to *ops. `weights` is the registry when the caller is on the loop
 * thread (the only one that may read it): a named weight is then looked up, once, and
 * one that is not registered is NOT_FOUND. Without it only weight id 0, which never
 * names a weight, is refused here, and the loop resolves the rest at submission.
 * Returns 0 or a gRPC code with msg. */
int gemmd_request_build(gemmd_request_t *r, const gemmd_gemm_desc_t *d, const gemmd_limits_t *lim,
                        const gemmd_weights_t *weights, gemmd_gemm_operands_t *ops, char *msg,
                        size_t n);

/* Whether gemmd_request_prepare_operands will quantize on the calling thread. */
int gemmd_request_operands_quantize(const gemmd_gemm_operands_t *ops, int raw_ok);

/* Makes inline B the request's weight of its own, then normalizes A
 * (gemmd_request_prepare_a); the operands' storage must outlive the request. Returns
 * GEMMD_OK or the kernels error, with *failed naming the operand ("a" or "b"). */
int gemmd_request_prepare_operands(gemmd_request_t *r, const gemmd_gemm_operands_t *ops,
                                   int raw_ok, const char **failed);

#endif /* GEMMD_DAEMON_REQUEST_BUILD_H_ */
