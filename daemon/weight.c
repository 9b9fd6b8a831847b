#include "daemon/weight.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/errors.h"
#include "kernels/quantize.h"

/* E4M3 with 128×128 scales: by q when it can, else by the host's quantizer. */
static int quantize_weight(const gemmd_weight_quantizer_t *q, const gemmd_operand_t *src, uint8_t *dst,
                           float *scales) {
  if (q != NULL && q->fn != NULL) {
    const int rc = q->fn(q->ctx, src, dst, scales);
    if (rc != GEMMD_ENOTSUP && rc != GEMMD_ENOMEM) return rc;
  }
  return gemmd_quantize(src, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_128X128, dst, scales);
}

int gemmd_weight_from_operand(const gemmd_operand_t *src, void *owner, void (*owner_free)(void *),
                              const gemmd_weight_quantizer_t *q, gemmd_weight_t **out) {
  gemmd_weight_t *w = calloc(1, sizeof *w);
  if (w == NULL) {
    if (owner_free) owner_free(owner);
    return GEMMD_ENOMEM;
  }
  w->n = src->rows;
  w->k = src->cols;
  w->refs = 1;
  if (gemmd_dtype_is_fp8(src->dtype)) {
    if (src->ld != src->cols || src->scale_layout == GEMMD_SCALE_BLOCK_1X128) {
      free(w);
      if (owner_free) owner_free(owner);
      return GEMMD_EINVAL;
    }
    w->dtype = src->dtype;
    w->scale_layout = src->scale_layout;
    w->data = src->data;
    w->scales = src->scales;
    w->owner = owner;
    w->owner_free = owner_free;
  } else {
    const size_t ns = gemmd_scale_count(GEMMD_SCALE_BLOCK_128X128, src->rows, src->cols);
    w->owned_data = malloc((size_t)src->rows * src->cols + 1);
    w->owned_scales = malloc(sizeof(float) * (ns + 1));
    int rc = (w->owned_data && w->owned_scales) ? GEMMD_OK : GEMMD_ENOMEM;
    if (rc == GEMMD_OK) rc = quantize_weight(q, src, w->owned_data, w->owned_scales);
    if (owner_free) owner_free(owner);
    if (rc != GEMMD_OK) {
      free(w->owned_data);
      free(w->owned_scales);
      free(w);
      return rc;
    }
    w->dtype = GEMMD_DTYPE_FP8_E4M3;
    w->scale_layout = GEMMD_SCALE_BLOCK_128X128;
    w->data = w->owned_data;
    w->scales = w->owned_scales;
  }
  w->bytes = (uint64_t)w->n * w->k +
             sizeof(float) * gemmd_scale_count(w->scale_layout, w->n, w->k);
  *out = w;
  return GEMMD_OK;
}

void gemmd_weight_free(gemmd_weight_t *w) {
  if (w == NULL) return;
  if (w->owner_free) w->owner_free(w->owner);
  free(w->owned_data);
  free(w->owned_scales);
  free(w->name);
  free(w);
}
