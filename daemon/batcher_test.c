/* The batcher's two lanes: requests stack into batches as before, pieces of large requests
 * run one a batch and at most piece_slots at once, and while both wait, small_batches_per_piece request batches run
 * between two pieces; depth counts requests waiting to start (a large one until its first
 * piece leaves), queued every entry; expired entries of both lanes come back unbatched. */
#include "daemon/batcher.h"
#include "daemon/test_check.h"

#include <stdio.h>
#include <string.h>


static gemmd_weight_t weights[2];

static void make(gemmd_request_t *r, uint32_t m, int w) {
  memset(r, 0, sizeof *r);
  r->m = m;
  r->weight = &weights[w];
}

static void make_piece(gemmd_request_t *p, gemmd_request_t *parent, uint32_t row, uint32_t m) {
  make(p, m, 1);
  p->parent = parent;
  p->piece_row = row;
}

/* Forms a batch and returns its size, 0 for none; *first gets its first request. A piece
 * batch is done at once unless keep_pieces. */
static uint32_t form_at(gemmd_batcher_t *b, uint64_t now, gemmd_request_t **first, int keep_pieces) {
  gemmd_request_t *expired = NULL;
  gemmd_batch_t *batch = gemmd_batcher_form(b, now, &expired);
  CHECK(expired == NULL);
  if (batch == NULL) return 0;
  const uint32_t n = batch->n_requests;
  *first = batch->requests[0];
  CHECK(batch->piece == (batch->requests[0]->parent != NULL));
  if (batch->piece && !keep_pieces) gemmd_batcher_piece_done(b);
  gemmd_batch_free(batch);
  return n;
}

static uint32_t form_keep(gemmd_batcher_t *b, gemmd_request_t **first, int keep_pieces) {
  return form_at(b, 1000, first, keep_pieces);
}

static uint32_t form(gemmd_batcher_t *b, gemmd_request_t **first) { return form_keep(b, first, 0); }

static void test_alternation(uint32_t per_piece) {
  gemmd_batcher_t b;
  gemmd_batcher_init(&b, (gemmd_batcher_limits_t){2, 1 << 20, 16, per_piece, 1, 1u << 30});
  gemmd_request_t small[8], parent, pieces[3];
  make(&parent, 768, 1);
  for (int i = 0; i < 3; i++) make_piece(&pieces[i], &parent, 256u * i, 256);
  for (int i = 0; i < 3; i++) gemmd_batcher_push(&b, &pieces[i]);
  CHECK(b.depth == 1 && b.queued == 3);
  for (int i = 0; i < 8; i++) {
    make(&small[i], 1, 0);
    gemmd_batcher_push(&b, &small[i]);
  }
  CHECK(b.depth == 9 && b.queued == 11);
  /* Requests first (pieces waited since before them, but nothing ran yet), then the
   * lanes alternate by per_piece request batches (of 2) to one piece. */
  gemmd_request_t *first = NULL;
  uint32_t smalls = 0, order = 0, ran = 0;
  char seq[32] = "";
  while (b.queued > 0 && order < 31) {
    const uint32_t n = form(&b, &first);
    CHECK(n > 0);
    seq[order++] = first->parent ? 'P' : 'r';
    if (first->parent) {
      CHECK(n == 1);
      CHECK(first == &pieces[ran]); /* pieces in order */
      ran++;
    } else {
      smalls += n;
    }
  }
  CHECK(smalls == 8 && ran == 3);
  CHECK(b.depth == 0 && b.queued == 0);
  if (per_piece == 1) CHECK(strcmp(seq, "rPrPrPr") == 0);
  if (per_piece == 2) CHECK(strcmp(seq, "rrPrrPP") == 0);
  if (check_failures) fprintf(stderr, "per_piece %u: order %s\n", per_piece, seq);
}

static void test_depth_counts_started_large_as_running(void) {
  gemmd_batcher_t b;
  gemmd_batcher_init(&b, (gemmd_batcher_limits_t){4, 1 << 20, 16, 1, 1, 1u << 30});
  gemmd_request_t parent, pieces[2], *first = NULL;
  make(&parent, 512, 1);
  make_piece(&pieces[0], &parent, 0, 256);
  make_piece(&pieces[1], &parent, 256, 256);
  gemmd_batcher_push(&b, &pieces[0]);
  gemmd_batcher_push(&b, &pieces[1]);
  CHECK(b.depth == 1);
  CHECK(form(&b, &first) == 1 && first == &pieces[0]);
  CHECK(b.depth == 0 && b.queued == 1); /* started: no longer waiting to start */
  CHECK(form(&b, &first) == 1 && first == &pieces[1]);
  CHECK(b.queued == 0 && form(&b, &first) == 0);
}

static void test_expiry_in_both_lanes(void) {
  gemmd_batcher_t b;
  gemmd_batcher_init(&b, (gemmd_batcher_limits_t){4, 1 << 20, 16, 1, 1, 1u << 30});
  gemmd_request_t r, parent, piece;
  make(&r, 1, 0);
  r.deadline_ns = 10;
  make(&parent, 512, 1);
  make_piece(&piece, &parent, 0, 256);
  piece.deadline_ns = 10;
  gemmd_batcher_push(&b, &r);
  gemmd_batcher_push(&b, &piece);
  gemmd_request_t *expired = gemmd_batcher_expire(&b, 20);
  CHECK(expired == &r && r.next == &piece && piece.next == NULL);
  CHECK(b.depth == 0 && b.queued == 0 && b.requests.head == NULL && b.pieces.head == NULL);
}

static void test_take_all_joins_lanes(void) {
  gemmd_batcher_t b;
  gemmd_batcher_init(&b, (gemmd_batcher_limits_t){4, 1 << 20, 16, 1, 1, 1u << 30});
  gemmd_request_t r, parent, piece;
  make(&r, 1, 0);
  make(&parent, 512, 1);
  make_piece(&piece, &parent, 0, 256);
  gemmd_batcher_push(&b, &piece);
  CHECK(gemmd_batcher_take_all(&b) == &piece);
  gemmd_batcher_push(&b, &r);
  gemmd_batcher_push(&b, &piece);
  gemmd_request_t *all = gemmd_batcher_take_all(&b);
  CHECK(all == &r && r.next == &piece);
  CHECK(b.queued == 0 && b.depth == 0);
}

/* At most piece_slots pieces are in flight; small requests still go meanwhile. */
static void test_piece_slots(void) {
  gemmd_batcher_t b;
  gemmd_batcher_init(&b, (gemmd_batcher_limits_t){4, 1 << 20, 16, 1, 2, 1u << 30});
  gemmd_request_t parent, pieces[4], small;
  make(&parent, 1024, 1);
  for (int i = 0; i < 4; i++) {
    make_piece(&pieces[i], &parent, 256u * i, 256);
    gemmd_batcher_push(&b, &pieces[i]);
  }
  gemmd_request_t *first = NULL;
  CHECK(form_keep(&b, &first, 1) == 1 && first == &pieces[0]);
  CHECK(form_keep(&b, &first, 1) == 1 && first == &pieces[1]);
  CHECK(b.pieces_in_flight == 2);
  CHECK(!gemmd_batcher_can_form(&b, 1000));
  CHECK(form_keep(&b, &first, 1) == 0);
  make(&small, 1, 0);
  gemmd_batcher_push(&b, &small);
  CHECK(gemmd_batcher_can_form(&b, 1000));
  CHECK(form_keep(&b, &first, 1) == 1 && first == &small);
  gemmd_batcher_piece_done(&b);
  CHECK(gemmd_batcher_can_form(&b, 1000));
  CHECK(form_keep(&b, &first, 1) == 1 && first == &pieces[2]);
  CHECK(!gemmd_batcher_can_form(&b, 1000));
}

/* With no other request for busy_ns, pieces take as many slots as the engine gives. */
static void test_pieces_alone_take_every_slot(void) {
  gemmd_batcher_t b;
  gemmd_batcher_init(&b, (gemmd_batcher_limits_t){4, 1 << 20, 16, 1, 1, 1000});
  gemmd_request_t parent, pieces[3], small;
  make(&parent, 768, 1);
  make(&small, 1, 0);
  small.accepted_ns = 5000;
  gemmd_batcher_push(&b, &small);
  for (int i = 0; i < 3; i++) {
    make_piece(&pieces[i], &parent, 256u * i, 256);
    gemmd_batcher_push(&b, &pieces[i]);
  }
  gemmd_request_t *first = NULL;
  CHECK(form_at(&b, 5100, &first, 1) == 1 && first == &small);
  CHECK(form_at(&b, 5200, &first, 1) == 1 && first == &pieces[0]);
  CHECK(!gemmd_batcher_can_form(&b, 5900)); /* the small request was batched 700 ns ago */
  CHECK(gemmd_batcher_can_form(&b, 6200));
  CHECK(form_at(&b, 6200, &first, 1) == 1 && first == &pieces[1]);
  CHECK(form_at(&b, 6300, &first, 1) == 1 && first == &pieces[2]);
  CHECK(b.pieces_in_flight == 3);
}

int main(void) {
  test_piece_slots();
  test_pieces_alone_take_every_slot();
  test_alternation(1);
  test_alternation(2);
  test_depth_counts_started_large_as_running();
  test_expiry_in_both_lanes();
  test_take_all_joins_lanes();
  if (check_failures) {
    fprintf(stderr, "%d failures\n", check_failures);
    return 1;
  }
  printf("batcher_test: ok\n");
  return 0;
}
