/* Reads what a built GEMM request holds once its operands are prepared, as the engines
 * read it: A normalized (FP8 and 1x128 scales) or kept raw, and an inline B's weight. */
#ifndef GEMMD_FUZZ_FUZZ_REQUEST_H_
#define GEMMD_FUZZ_FUZZ_REQUEST_H_

#include "daemon/request.h"
#include "fuzz/fuzz_util.h"

static inline void fuzz_touch_request(const gemmd_request_t *r) {
  fuzz_check(r->m > 0 && r->k > 0);
  if (r->a != NULL) {
    fuzz_touch(r->a, (size_t)r->m * r->k);
    fuzz_touch(r->a_scales, sizeof(float) * r->m * ((r->k + 127u) / 128u));
  } else {
    fuzz_check(r->a_raw != NULL);
    fuzz_touch(r->a_raw, (size_t)r->m * r->k * gemmd_dtype_size(r->a_raw_dtype));
  }
  if (r->inline_b != NULL) {
    fuzz_check(r->inline_b->k == r->k && r->inline_b->n == r->n);
    const gemmd_operand_t b = gemmd_weight_operand(r->inline_b);
    fuzz_touch_operand(&b);
  }
}

#endif /* GEMMD_FUZZ_FUZZ_REQUEST_H_ */
