#include "daemon/batch.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/errors.h"

gemmd_batch_t *gemmd_batch_new(uint32_t n_requests) {
  gemmd_batch_t *b = calloc(1, sizeof *b);
  if (b == NULL) return NULL;
  const size_t n = n_requests ? n_requests : 1;
  b->requests = calloc(n, sizeof *b->requests);
  b->group_start = calloc(n + 1, sizeof *b->group_start);
  b->group_weight = calloc(n, sizeof *b->group_weight);
  b->table = calloc(n, sizeof *b->table);
  if (!b->requests || !b->group_start || !b->group_weight || !b->table) {
    gemmd_batch_free(b);
    return NULL;
  }
  return b;
}

void gemmd_batch_free(gemmd_batch_t *b) {
  if (b == NULL) return;
  free(b->requests);
  free(b->group_start);
  free(b->group_weight);
  free(b->table);
  free(b);
}

/* 256-byte alignment for every block in the arenas: TMA and vector loads like it. */
static uint64_t align_up(uint64_t x) { return (x + 255u) & ~(uint64_t)255u; }

int gemmd_batch_plan(gemmd_batch_t *b, uint32_t row_align) {
  uint64_t a_off = 0, sa_off = 0, d_off = 0;
  if (row_align == 0) row_align = 1;
  b->rows = 0;
  b->flops = 0.0;
  b->input_bytes = b->output_bytes = 0;
  for (uint32_t g = 0; g < b->n_groups; g++) {
    const gemmd_weight_t *w = b->group_weight[g];
    gemmd_request_t *first = b->requests[b->group_start[g]];
    gemmd_group_params_t *p = &b->table[g];
    memset(p, 0, sizeof *p);
    p->n = w->n;
    p->k = w->k;
    p->a_dtype = (uint8_t)first->a_dtype;
    p->b_dtype = (uint8_t)w->dtype;
    p->b_layout = (uint8_t)w->scale_layout;
    p->out_dtype = (uint8_t)first->out_dtype;
    p->a_offset = a_off;
    p->sa_offset = sa_off;
    p->d_offset = d_off;
    p->b_data = (uint64_t)(uintptr_t)w->data;
    p->b_scales = (uint64_t)(uintptr_t)w->scales;
    p->lda = (w->k + row_align - 1) / row_align * row_align;
    p->ldb = w->k; /* the host bytes; an engine with its own copy rewrites it */
    const size_t out_size = gemmd_dtype_size(first->out_dtype);
    const uint32_t kb = (w->k + 127u) / 128u;
    uint32_t m = 0;
    for (uint32_t i = b->group_start[g]; i < b->group_start[g + 1]; i++) {
      gemmd_request_t *r = b->requests[i];
      r->group = g;
      r->a_offset = a_off + (uint64_t)m * p->lda;
      r->sa_offset = sa_off + (uint64_t)m * kb;
      r->d_offset = d_off + (uint64_t)m * w->n * out_size;
      r->d_bytes = (size_t)r->m * w->n * out_size;
      m += r->m;
    }
    p->m = m;
    b->rows += m;
    b->flops += 2.0 * m * (double)w->n * w->k;
    b->input_bytes += (uint64_t)m * w->k + sizeof(float) * (uint64_t)m * kb;
    b->output_bytes += (uint64_t)m * w->n * out_size;
    a_off = align_up(a_off + (uint64_t)m * p->lda);
    sa_off += (uint64_t)m * kb;
    sa_off = (sa_off + 63u) & ~(uint64_t)63u;
    d_off = align_up(d_off + (uint64_t)m * w->n * out_size);
  }
  b->a_bytes = a_off;
  b->sa_count = sa_off;
  b->d_bytes = d_off;
  return GEMMD_OK;
}

int gemmd_batch_a_direct(const gemmd_batch_t *b, const gemmd_request_t *r) {
  return r->a_pinned && r->a != NULL && b->table[r->group].lda == r->k &&
         (uint64_t)r->m * r->k >= GEMMD_DIRECT_A_MIN_BYTES;
}

void gemmd_batch_stage_a(const gemmd_batch_t *b, uint8_t *a_arena, float *sa_arena) {
  for (uint32_t i = 0; i < b->n_requests; i++) {
    const gemmd_request_t *r = b->requests[i];
    if (r->a == NULL) continue; /* raw A: the engine quantizes it into place */
    const uint32_t lda = b->table[r->group].lda;
    uint8_t *dst = a_arena + r->a_offset;
    if (r->a_device) {
      /* the engine copies rows and scales on the device (or reads them in place); only
       * the padding past k, which the device copy leaves alone, is zeroed here */
      for (uint32_t row = 0; lda != r->k && row < r->m; row++) memset(dst + (size_t)row * lda + r->k, 0, lda - r->k);
      continue;
    }
    if (gemmd_batch_a_direct(b, r)) {
      /* the engine DMAs the rows */
    } else if (lda == r->k) {
      memcpy(dst, r->a, (size_t)r->m * r->k);
    } else {
      for (uint32_t row = 0; row < r->m; row++) {
        memcpy(dst + (size_t)row * lda, r->a + (size_t)row * r->k, r->k);
        memset(dst + (size_t)row * lda + r->k, 0, lda - r->k);
      }
    }
    memcpy(sa_arena + r->sa_offset, r->a_scales,
           sizeof(float) * (size_t)gemmd_group_sa_count(r->m, r->k));
  }
}
