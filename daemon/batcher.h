/* The batcher: the queues of admitted requests and the rule that turns them into batches.
 *
 * Pure logic on the loop thread (no I/O, no clock of its own). Two lanes:
 *   - requests: a batch takes them in arrival order until a limit would be passed:
 *     requests, rows (Σ M) or groups. Requests with the same weight, A dtype and output
 *     dtype are stacked along M into one group. A request alone larger than the row limit
 *     still runs, alone.
 *   - pieces of large requests (server.c splits them along M, so that each runs for a
 *     bounded time): one piece a batch, in arrival order.
 * While both lanes wait, small_batches_per_piece batches of requests run between two
 * pieces, and while other requests are being served (one arrived or was batched within
 * busy_ns)
 * at most piece_slots pieces are in flight at once, so the engine's other slots stay free
 * for them; alone, pieces take every slot the engine has: a small request waits behind at most one piece, and
 * large requests always progress. Requests whose deadline has passed are taken out and handed back unbatched,
 * so no compute is spent on them. */
#ifndef GEMMD_DAEMON_BATCHER_H_
#define GEMMD_DAEMON_BATCHER_H_

#include <stdint.h>

#include "daemon/batch.h"
#include "daemon/request.h"

typedef struct gemmd_batcher_limits_s {
  uint32_t max_requests;
  uint64_t max_rows;
  uint32_t max_groups;
  uint32_t small_batches_per_piece; /* ≥ 1 */
  uint32_t piece_slots;             /* pieces in flight at once while others are served, ≥ 1 */
  uint64_t busy_ns; /* others are served: a request of theirs arrived or was batched this recently */
} gemmd_batcher_limits_t;

typedef struct gemmd_lane_s {
  gemmd_request_t *head, *tail;
  uint32_t depth;
} gemmd_lane_t;

typedef struct gemmd_batcher_s {
  gemmd_batcher_limits_t limits;
  gemmd_lane_t requests, pieces;
  uint32_t queued; /* entries of both lanes */
  /* Requests waiting to start: the requests' lane and the large requests none of whose
   * pieces has left (their first piece is still queued). --queue-depth bounds this. */
  uint32_t depth;
  uint32_t batches_since_piece; /* request batches formed while pieces waited */
  uint32_t pieces_in_flight;    /* piece batches formed and not yet done */
  uint64_t last_request_ns;     /* the latest arrival or batch of the requests' lane */
  uint64_t next_batch_id;
} gemmd_batcher_t;

void gemmd_batcher_init(gemmd_batcher_t *b, gemmd_batcher_limits_t limits);
/* Queues a request, or a piece of one (r->parent set) in the pieces' lane. */
void gemmd_batcher_push(gemmd_batcher_t *b, gemmd_request_t *r);
/* Accepted time of the oldest queued request of either lane; 0 when empty. */
uint64_t gemmd_batcher_oldest_ns(const gemmd_batcher_t *b);

/* Forms the next batch at time now_ns, from the lane whose turn it is. Expired requests
 * are unlinked and returned in *expired (a list through ->next). Returns NULL when nothing
 * is left to run (or on allocation failure, leaving the queues as they were). The batch is
 * grouped; the caller plans it for its engine (gemmd_batch_plan). */
gemmd_batch_t *gemmd_batcher_form(gemmd_batcher_t *b, uint64_t now_ns, gemmd_request_t **expired);

/* Whether gemmd_batcher_form has anything it may run at now_ns. */
int gemmd_batcher_can_form(const gemmd_batcher_t *b, uint64_t now_ns);

/* A batch formed from the pieces' lane (batch->piece) is done. */
void gemmd_batcher_piece_done(gemmd_batcher_t *b);

/* Unlinks every request whose deadline is at or before now_ns; returns them as a list. */
gemmd_request_t *gemmd_batcher_expire(gemmd_batcher_t *b, uint64_t now_ns);

/* Unlinks every queued request (shutdown); returns them as a list. */
gemmd_request_t *gemmd_batcher_take_all(gemmd_batcher_t *b);

#endif /* GEMMD_DAEMON_BATCHER_H_ */
