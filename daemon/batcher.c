#include "daemon/batcher.h"

#include <stdlib.h>

void gemmd_batcher_init(gemmd_batcher_t *b, gemmd_batcher_limits_t limits) {
  b->limits = limits;
  b->head = b->tail = NULL;
  b->depth = 0;
  b->next_batch_id = 1;
}

void gemmd_batcher_push(gemmd_batcher_t *b, gemmd_request_t *r) {
  r->next = NULL;
  if (b->tail) {
    b->tail->next = r;
  } else {
    b->head = r;
  }
  b->tail = r;
  b->depth++;
}

uint64_t gemmd_batcher_oldest_ns(const gemmd_batcher_t *b) {
  return b->head ? b->head->accepted_ns : 0;
}

gemmd_request_t *gemmd_batcher_expire(gemmd_batcher_t *b, uint64_t now_ns) {
  gemmd_request_t *expired = NULL, **exp_tail = &expired;
  gemmd_request_t **link = &b->head, *prev = NULL;
  while (*link != NULL) {
    gemmd_request_t *r = *link;
    if (r->deadline_ns != 0 && r->deadline_ns <= now_ns) {
      *link = r->next;
      b->depth--;
      r->next = NULL;
      *exp_tail = r;
      exp_tail = &r->next;
    } else {
      prev = r;
      link = &r->next;
    }
  }
  b->tail = prev;
  return expired;
}

gemmd_request_t *gemmd_batcher_take_all(gemmd_batcher_t *b) {
  gemmd_request_t *all = b->head;
  b->head = b->tail = NULL;
  b->depth = 0;
  return all;
}

static int same_group(const gemmd_request_t *x, const gemmd_request_t *y) {
  return x->weight == y->weight && x->a_dtype == y->a_dtype && x->out_dtype == y->out_dtype;
}

gemmd_batch_t *gemmd_batcher_form(gemmd_batcher_t *b, uint64_t now_ns, gemmd_request_t **expired) {
  *expired = NULL;
  gemmd_request_t **exp_tail = expired;
  const uint32_t cap = b->depth < b->limits.max_requests ? b->depth : b->limits.max_requests;
  if (cap == 0) return NULL;

  /* Per group: its first request (the key) and a list of its members. */
  gemmd_request_t **key = calloc(b->limits.max_groups, sizeof *key);
  gemmd_request_t **gtail = calloc(b->limits.max_groups, sizeof *gtail);
  gemmd_request_t **ghead = calloc(b->limits.max_groups, sizeof *ghead);
  gemmd_batch_t *batch = gemmd_batch_new(cap);
  if (!key || !gtail || !ghead || !batch) {
    free(key);
    free(gtail);
    free(ghead);
    gemmd_batch_free(batch);
    return NULL;
  }

  uint32_t n = 0, groups = 0;
  uint64_t rows = 0;
  while (b->head != NULL && n < cap) {
    gemmd_request_t *r = b->head;
    if (r->deadline_ns != 0 && r->deadline_ns <= now_ns) {
      b->head = r->next;
      b->depth--;
      r->next = NULL;
      *exp_tail = r;
      exp_tail = &r->next;
      continue;
    }
    uint32_t g = 0;
    while (g < groups && !same_group(key[g], r)) g++;
    const int fits_rows = rows + r->m <= b->limits.max_rows || n == 0;
    const int fits_groups = g < groups || groups < b->limits.max_groups;
    if (!fits_rows || !fits_groups) break; /* first come, first served: stop here */
    b->head = r->next;
    b->depth--;
    r->next = NULL;
    if (g == groups) {
      key[g] = ghead[g] = gtail[g] = r;
      groups++;
    } else {
      gtail[g]->next = r;
      gtail[g] = r;
    }
    rows += r->m;
    n++;
  }
  if (b->head == NULL) b->tail = NULL;

  if (n == 0) {
    free(key);
    free(gtail);
    free(ghead);
    gemmd_batch_free(batch);
    return NULL;
  }
  batch->id = b->next_batch_id++;
  batch->n_requests = n;
  batch->n_groups = groups;
  uint32_t i = 0;
  for (uint32_t g = 0; g < groups; g++) {
    batch->group_start[g] = i;
    batch->group_weight[g] = key[g]->weight;
    for (gemmd_request_t *r = ghead[g]; r != NULL; r = r->next) batch->requests[i++] = r;
  }
  batch->group_start[groups] = i;
  for (uint32_t j = 0; j < n; j++) batch->requests[j]->next = NULL;
  batch->formed_ns = now_ns;
  free(key);
  free(gtail);
  free(ghead);
  return batch;
}
