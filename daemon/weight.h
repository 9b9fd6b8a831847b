/* One B matrix as the engine uses it: FP8, N×K row-major, with its scale layout.
 *
 * Registered weights live in the registry (weights.h) and are shared by requests;
 * a request's inline B is a weight of its own with id 0. Reference counts are touched
 * on the loop thread only; engine threads read a weight's bytes while a request that
 * holds a reference is in flight, so the bytes never change or go away under them.
 */
#ifndef GEMMD_DAEMON_WEIGHT_H_
#define GEMMD_DAEMON_WEIGHT_H_

#include <stddef.h>
#include <stdint.h>

#include "kernels/operand.h"

typedef struct gemmd_weight_s gemmd_weight_t;

struct gemmd_weight_s {
  uint64_t id;     /* 0 for a request's inline B */
  char *name;      /* NULL for inline */
  uint32_t n, k;
  gemmd_dtype_t dtype;               /* FP8 E4M3 or E5M2 */
  gemmd_scale_layout_t scale_layout; /* NONE, TENSOR, ROW or BLOCK_128X128 */
  const uint8_t *data;               /* n×k bytes */
  const float *scales;               /* gemmd_scale_count(layout, n, k) floats */
  uint64_t bytes;                    /* data + scales, what the budget counts */
  const char *source;                /* "restored", "preloaded" (static); NULL: registered */

  /* Storage: freed with the weight. */
  uint8_t *owned_data;
  float *owned_scales;
  void *owner;                  /* e.g. the decoded message the bytes point into */
  void (*owner_free)(void *owner);

  /* Engine-side copy (device memory for CUDA), made by engine->weight_load. */
  void *engine_handle;

  /* Registry bookkeeping, loop thread only. */
  int refs;     /* registry's own + one per request that uses it */
  int removed;  /* unregistered: no new users; freed at refs == 0 */
  struct gemmd_weight_waiter_s *waiters; /* unregister calls waiting for refs == 0 */
};

/* An operand view of the weight's stored bytes. */
static inline gemmd_operand_t gemmd_weight_operand(const gemmd_weight_t *w) {
  gemmd_operand_t op = {w->n, w->k, w->k, w->dtype, w->data, w->scale_layout, w->scales};
  return op;
}

/* Who quantizes BF16/FP16/FP32 weights: fn writes rows × cols E4M3 bytes and the 128×128
 * scales, the same bits as kernels/quantize.h (the CUDA engine's GPU quantizer). It may
 * return GEMMD_ENOTSUP or GEMMD_ENOMEM, and the host's quantizer runs instead. */
typedef struct {
  int (*fn)(void *ctx, const gemmd_operand_t *src, uint8_t *dst, float *scales);
  void *ctx;
} gemmd_weight_quantizer_t;

/* Builds a weight from a validated operand of any dtype: FP8 keeps its bytes and layout
 * (pointing into src's storage, kept alive by owner/owner_free, which the weight then
 * owns); BF16/FP16/FP32 are quantized to E4M3 with 128×128 scales (docs/api.md §1), by q
 * when given and able, else on this thread, and the owner is freed at once. Returns 0,
 * GEMMD_EINVAL or GEMMD_ENOMEM (owner freed on error). *out has refs = 1. */
int gemmd_weight_from_operand(const gemmd_operand_t *src, void *owner, void (*owner_free)(void *),
                              const gemmd_weight_quantizer_t *q, gemmd_weight_t **out);

/* Frees the weight's storage and the struct (not the engine copy: the engine's job). */
void gemmd_weight_free(gemmd_weight_t *w);

#endif /* GEMMD_DAEMON_WEIGHT_H_ */
