#include "daemon/batcher.h"

#include <stdlib.h>

void gemmd_batcher_init(gemmd_batcher_t *b, gemmd_batcher_limits_t limits) {
  if (limits.small_batches_per_piece == 0) limits.small_batches_per_piece = 1;
  if (limits.piece_slots == 0) limits.piece_slots = 1;
  b->limits = limits;
  b->requests = (gemmd_lane_t){NULL, NULL, 0};
  b->pieces = (gemmd_lane_t){NULL, NULL, 0};
  b->queued = b->depth = 0;
  b->batches_since_piece = 0;
  b->pieces_in_flight = 0;
  b->last_request_ns = 0;
  b->next_batch_id = 1;
}

static int piece_may_start(const gemmd_batcher_t *b, uint64_t now_ns) {
  const int others_served = b->requests.depth > 0 || now_ns < b->last_request_ns + b->limits.busy_ns;
  return b->pieces.depth > 0 && (b->pieces_in_flight < b->limits.piece_slots || !others_served);
}

int gemmd_batcher_can_form(const gemmd_batcher_t *b, uint64_t now_ns) {
  return b->requests.depth > 0 || piece_may_start(b, now_ns);
}

void gemmd_batcher_piece_done(gemmd_batcher_t *b) {
  if (b->pieces_in_flight > 0) b->pieces_in_flight--;
}

void gemmd_batcher_push(gemmd_batcher_t *b, gemmd_request_t *r) {
  gemmd_lane_t *l = r->parent != NULL ? &b->pieces : &b->requests;
  r->next = NULL;
  if (l->tail) {
    l->tail->next = r;
  } else {
    l->head = r;
  }
  l->tail = r;
  l->depth++;
  if (r->parent == NULL && r->accepted_ns > b->last_request_ns) b->last_request_ns = r->accepted_ns;
  b->queued++;
  b->depth += r->parent == NULL || r->piece_row == 0;
}

/* The counts, for one entry leaving a lane. */
static void count_out(gemmd_batcher_t *b, gemmd_lane_t *l, const gemmd_request_t *r) {
  l->depth--;
  b->queued--;
  b->depth -= r->parent == NULL || r->piece_row == 0;
}

uint64_t gemmd_batcher_oldest_ns(const gemmd_batcher_t *b) {
  const uint64_t r = b->requests.head ? b->requests.head->accepted_ns : 0;
  const uint64_t p = b->pieces.head ? b->pieces.head->accepted_ns : 0;
  return r == 0 ? p : p == 0 || r < p ? r : p;
}

/* Unlinks a lane's expired requests onto *tail. */
static gemmd_request_t **expire_lane(gemmd_batcher_t *b, gemmd_lane_t *l, uint64_t now_ns,
                                     gemmd_request_t **exp_tail) {
  gemmd_request_t **link = &l->head, *prev = NULL;
  while (*link != NULL) {
    gemmd_request_t *r = *link;
    if (r->deadline_ns != 0 && r->deadline_ns <= now_ns) {
      *link = r->next;
      count_out(b, l, r);
      r->next = NULL;
      *exp_tail = r;
      exp_tail = &r->next;
    } else {
      prev = r;
      link = &r->next;
    }
  }
  l->tail = prev;
  return exp_tail;
}

gemmd_request_t *gemmd_batcher_expire(gemmd_batcher_t *b, uint64_t now_ns) {
  gemmd_request_t *expired = NULL;
  expire_lane(b, &b->pieces, now_ns, expire_lane(b, &b->requests, now_ns, &expired));
  return expired;
}

gemmd_request_t *gemmd_batcher_take_all(gemmd_batcher_t *b) {
  gemmd_request_t *all = b->requests.head;
  if (b->requests.tail != NULL) {
    b->requests.tail->next = b->pieces.head;
  } else {
    all = b->pieces.head;
  }
  b->requests = (gemmd_lane_t){NULL, NULL, 0};
  b->pieces = (gemmd_lane_t){NULL, NULL, 0};
  b->queued = b->depth = 0;
  return all;
}

static int same_group(const gemmd_request_t *x, const gemmd_request_t *y) {
  return x->weight == y->weight && x->a_dtype == y->a_dtype && x->out_dtype == y->out_dtype;
}

gemmd_batch_t *gemmd_batcher_form(gemmd_batcher_t *b, uint64_t now_ns, gemmd_request_t **expired) {
  *expired = NULL;
  gemmd_request_t **exp_tail = expired;
  /* The pieces' turn: none of the other lane waits, or enough of its batches ran. */
  const int piece_turn = piece_may_start(b, now_ns) &&
                         (b->requests.depth == 0 || b->batches_since_piece >= b->limits.small_batches_per_piece);
  gemmd_lane_t *l = piece_turn ? &b->pieces : &b->requests;
  uint32_t cap = l->depth < b->limits.max_requests ? l->depth : b->limits.max_requests;
  if (piece_turn) cap = 1;
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
  while (l->head != NULL && n < cap) {
    gemmd_request_t *r = l->head;
    if (r->deadline_ns != 0 && r->deadline_ns <= now_ns) {
      l->head = r->next;
      count_out(b, l, r);
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
    l->head = r->next;
    count_out(b, l, r);
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
  if (l->head == NULL) l->tail = NULL;

  if (n == 0) {
    free(key);
    free(gtail);
    free(ghead);
    gemmd_batch_free(batch);
    return NULL;
  }
  if (piece_turn) {
    b->batches_since_piece = 0;
    b->pieces_in_flight++;
    batch->piece = 1;
  } else {
    b->last_request_ns = now_ns;
    if (b->pieces.depth > 0) b->batches_since_piece++;
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
