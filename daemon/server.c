/* The loop thread's side of gemmd: admission, dispatch, completion, weights, health
 * watchers. lifecycle.c starts it, runs the loop and drains it. See server.h for the
 * threads and docs/ARCHITECTURE.md for one request's path. */
#include "daemon/server.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "daemon/log.h"
#include "daemon/status.h"
#include "daemon/weight_store.h"
#include "kernels/errors.h"

static void maybe_dispatch(gemmd_server_t *srv);
static void quiet(gemmd_server_t *srv);
static void device_failed(gemmd_server_t *srv, const char *why);

/* ---- Handoff from other threads ------------------------------------------------------ */

void gemmd_server_post(gemmd_server_t *srv, void (*fn)(gemmd_server_t *, void *), void *arg) {
  gemmd_post_t *p = malloc(sizeof *p);
  if (p == NULL) {
    /* No memory for the note: run nothing rather than corrupt state; say so loudly. */
    gemmd_log(GEMMD_LOG_ERROR, "out of memory posting to the loop", "");
    return;
  }
  p->next = NULL;
  p->fn = fn;
  p->arg = arg;
  pthread_mutex_lock(&srv->inbox_mu);
  if (srv->inbox_tail) {
    srv->inbox_tail->next = p;
  } else {
    srv->inbox_head = p;
  }
  srv->inbox_tail = p;
  pthread_mutex_unlock(&srv->inbox_mu);
  uv_async_send(&srv->wakeup);
}

static void run_inbox(gemmd_server_t *srv) {
  for (;;) {
    pthread_mutex_lock(&srv->inbox_mu);
    gemmd_post_t *p = srv->inbox_head;
    srv->inbox_head = srv->inbox_tail = NULL;
    pthread_mutex_unlock(&srv->inbox_mu);
    if (p == NULL) return;
    while (p != NULL) {
      gemmd_post_t *next = p->next;
      p->fn(srv, p->arg);
      free(p);
      p = next;
    }
  }
}

static void on_spin(uv_idle_t *h) {
  gemmd_server_t *srv = h->data;
  if (gemmd_now_ns() >= srv->spin_until_ns) uv_idle_stop(h);
}

static void on_wakeup(uv_async_t *h) {
  gemmd_server_t *srv = h->data;
  gemmd_server_hold_dispatch(srv);
  run_inbox(srv);
  gemmd_server_release_dispatch(srv);
  if (srv->cfg->loop_spin_us > 0 && !srv->draining) {
    srv->spin_until_ns = gemmd_now_ns() + (uint64_t)srv->cfg->loop_spin_us * 1000u;
    if (!uv_is_active((uv_handle_t *)&srv->spin)) uv_idle_start(&srv->spin, on_spin);
  }
}

/* ---- Answering ------------------------------------------------------------------------ */

static void conn_add(gemmd_server_t *srv, uint64_t conn, int delta) {
  uintptr_t n = (uintptr_t)gemmd_map_get_u64(&srv->conns, conn);
  gemmd_map_del_u64(&srv->conns, conn);
  n = (uintptr_t)((intptr_t)n + delta);
  if (n > 0) gemmd_map_put_u64(&srv->conns, conn, (void *)n);
}

static void weight_released(gemmd_server_t *srv, gemmd_weight_t *w);
static void piece_done(gemmd_server_t *srv, gemmd_request_t *p);

/* The one place a request is answered. */
static void finish(gemmd_server_t *srv, gemmd_request_t *r, int dispatched) {
  if (r->parent != NULL) {
    piece_done(srv, r);
    return;
  }
  const uint64_t now = gemmd_now_ns();
  r->done_ns = now;
  const uint64_t queue_ns = dispatched ? r->dispatched_ns - r->accepted_ns : 0;
  gemmd_metrics_request(&srv->metrics, r->transport, r->status, now - r->accepted_ns, dispatched,
                        queue_ns);
  if (r->admitted) {
    srv->inflight--;
    conn_add(srv, r->conn_id, -1);
    r->admitted = 0;
  }
  gemmd_weight_t *w = r->weight;
  r->weight = NULL;
  r->respond(r); /* the transport's now; d valid only during this call */
  if (w != NULL) {
    if (w->id == 0) {
      gemmd_weight_free(w); /* inline B */
    } else if (gemmd_weights_release(w)) {
      weight_released(srv, w);
    }
  }
}

/* ---- Large requests in pieces ---------------------------------------------------------- */

enum { MIN_PIECE_ROWS = 256 };
/* Other requests count as being served (pieces then keep to --piece-slots) for this long
 * after one arrived or was batched: longer than a closed-loop client's turnaround. */
#define BUSY_NS 1000000ull

/* FLOPs above which a request runs as pieces of its rows (--split-flops; 0: by backend,
 * about 200 µs of the H200's GEMM, or ~0.2 s of the 2-CPU build machine's). */
static double split_flops(const gemmd_server_t *srv) {
  if (srv->cfg->split_flops > 0) return (double)srv->cfg->split_flops;
  return strcmp(srv->engine->backend, "cuda") == 0 ? 64e9 : 8e9;
}

/* Rows per piece for r, or 0 when r runs whole. Pieces are whole multiples of 128 rows
 * (the GPU kernels' tile height) and at least MIN_PIECE_ROWS, so that reading all of B
 * once a piece (the CPU engine also dequantizes it) stays small against the piece's work. */
static uint32_t piece_rows(const gemmd_server_t *srv, const gemmd_request_t *r) {
  const double per_row = 2.0 * r->n * r->k, limit = split_flops(srv);
  if (per_row * r->m <= limit) return 0;
  uint64_t rows = (uint64_t)(limit / per_row);
  rows -= rows % 128;
  if (rows < MIN_PIECE_ROWS) rows = MIN_PIECE_ROWS;
  return rows < r->m ? (uint32_t)rows : 0;
}

/* Queues r as pieces of `rows` rows; 0, or GEMMD_ENOMEM with nothing queued. */
static int push_pieces(gemmd_server_t *srv, gemmd_request_t *r, uint32_t rows) {
  const uint32_t n_pieces = (r->m + rows - 1) / rows;
  const size_t out_row = (size_t)r->n * gemmd_dtype_size(r->out_dtype);
  if (r->d_dest == NULL) {
    r->d_owned = malloc((size_t)r->m * out_row + 1);
    if (r->d_owned == NULL) return GEMMD_ENOMEM;
  }
  gemmd_request_t **pieces = calloc(n_pieces, sizeof *pieces);
  for (uint32_t i = 0; pieces != NULL && i < n_pieces; i++) {
    if ((pieces[i] = malloc(sizeof **pieces)) == NULL) {
      for (uint32_t j = 0; j < i; j++) free(pieces[j]);
      free(pieces);
      pieces = NULL;
    }
  }
  if (pieces == NULL) {
    free(r->d_owned);
    r->d_owned = NULL;
    return GEMMD_ENOMEM;
  }
  const uint32_t kb = (r->k + 127) / 128;
  r->pieces_left = n_pieces;
  for (uint32_t i = 0; i < n_pieces; i++) {
    gemmd_request_t *p = pieces[i];
    const uint32_t row = i * rows;
    *p = *r;
    p->next = NULL;
    p->parent = r;
    p->piece_row = row;
    p->m = r->m - row < rows ? r->m - row : rows;
    p->a = r->a != NULL ? r->a + (size_t)row * r->k : NULL;
    p->a_scales = r->a_scales != NULL ? r->a_scales + (size_t)row * kb : NULL;
    p->a_raw = r->a_raw != NULL ? (const uint8_t *)r->a_raw + (size_t)row * r->k * gemmd_dtype_size(r->a_raw_dtype)
                                : NULL;
    p->a_owned = NULL;
    p->a_scales_owned = NULL;
    p->inline_b = NULL;
    p->admitted = 0;
    p->d_owned = NULL;
    p->pieces_left = 0;
    p->d_dest = r->d_dest != NULL ? r->d_dest + (size_t)row * out_row : NULL;
    p->respond = NULL;
    p->answer_early = NULL;
    p->wake_early = NULL;
    gemmd_batcher_push(&srv->batcher, p);
  }
  free(pieces);
  return GEMMD_OK;
}

/* A piece is through the engine (or failed, or expired): its rows go to the parent, and
 * the last piece answers the parent. */
static void piece_done(gemmd_server_t *srv, gemmd_request_t *p) {
  gemmd_request_t *r = p->parent;
  if (p->status != GEMMD_CODE_OK) {
    if (r->status == GEMMD_CODE_OK) {
      r->status = p->status;
      snprintf(r->message, sizeof r->message, "rows %u-%u: %.460s", p->piece_row, p->piece_row + p->m - 1,
               p->message);
    }
  } else if (r->d_owned != NULL && p->d != NULL) {
    memcpy(r->d_owned + (size_t)p->piece_row * r->n * gemmd_dtype_size(r->out_dtype), p->d, p->d_bytes);
  }
  if (p->dispatched_ns != 0 && (r->dispatched_ns == 0 || p->dispatched_ns < r->dispatched_ns)) {
    r->dispatched_ns = p->dispatched_ns;
  }
  r->compute_ns += p->compute_ns;
  if (p->batch_id != 0) {
    r->batch_id = p->batch_id;
    r->batch_requests = p->batch_requests;
    r->batch_groups = p->batch_groups;
  }
  free(p);
  if (--r->pieces_left > 0) return;
  uint8_t *owned = r->d_owned;
  r->d_owned = NULL;
  if (r->status == GEMMD_CODE_OK) {
    r->d = r->d_dest != NULL ? r->d_dest : owned;
    r->d_bytes = (size_t)r->m * r->n * gemmd_dtype_size(r->out_dtype);
  } else {
    r->d = NULL;
  }
  finish(srv, r, r->dispatched_ns != 0);
  free(owned);
}

static void fail(gemmd_server_t *srv, gemmd_request_t *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(gemmd_server_t *srv, gemmd_request_t *r, int code, const char *fmt, ...) {
  r->status = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->message, sizeof r->message, fmt, ap);
  va_end(ap);
  finish(srv, r, 0);
}

static void expire_list(gemmd_server_t *srv, gemmd_request_t *list) {
  while (list != NULL) {
    gemmd_request_t *next = list->next;
    list->next = NULL;
    fail(srv, list, GEMMD_CODE_DEADLINE_EXCEEDED,
         "the deadline passed after %.3f ms in the queue, before a batch ran it; no compute "
         "was spent",
         (double)(gemmd_now_ns() - list->accepted_ns) * 1e-6);
    list = next;
  }
}

void gemmd_server_expire(gemmd_server_t *srv) {
  expire_list(srv, gemmd_batcher_expire(&srv->batcher, gemmd_now_ns()));
}

/* ---- Admission ------------------------------------------------------------------------ */

typedef struct {
  gemmd_transport_t transport;
  int code;
  uint64_t accepted_ns, done_ns;
} refused_t;

static void count_refused(gemmd_server_t *srv, void *arg) {
  refused_t *r = arg;
  gemmd_metrics_request(&srv->metrics, r->transport, r->code, r->done_ns - r->accepted_ns, 0, 0);
  free(r);
}

void gemmd_server_count_refused(gemmd_server_t *srv, gemmd_transport_t transport, int code,
                                uint64_t accepted_ns) {
  refused_t *r = malloc(sizeof *r);
  if (r == NULL) return;
  *r = (refused_t){transport, code, accepted_ns, gemmd_now_ns()};
  gemmd_server_post(srv, count_refused, r);
}

/* While the start-up weights load: why gemmd does not serve yet, in *msg. */
static int still_loading(const gemmd_server_t *srv, char *msg, size_t n) {
  if (!srv->loading) return 0;
  snprintf(msg, n, "gemmd is loading its weights (%" PRIu64 " of %" PRIu64 " files) and serves once "
           "they are in; health says SERVING then", srv->metrics.startup_files_done, srv->metrics.startup_files);
  return 1;
}

void gemmd_server_submit(gemmd_server_t *srv, gemmd_request_t *r) {
  r->status = GEMMD_CODE_OK;
  char why[256];
  if (srv->draining || srv->stopped) {
    gemmd_request_release(r);
    fail(srv, r, GEMMD_CODE_UNAVAILABLE, "gemmd is shutting down and takes no new requests");
    return;
  }
  if (still_loading(srv, why, sizeof why)) {
    gemmd_request_release(r);
    fail(srv, r, GEMMD_CODE_UNAVAILABLE, "%s", why);
    return;
  }
  if (r->inline_b != NULL) {
    r->weight = r->inline_b;
    r->inline_b = NULL;
  } else {
    gemmd_weight_t *w = r->weight_id != 0 ? gemmd_weights_find_id(&srv->weights, r->weight_id)
                                          : gemmd_weights_find_name(&srv->weights, r->weight_name);
    if (w == NULL) {
      if (r->weight_id != 0) {
        fail(srv, r, GEMMD_CODE_NOT_FOUND, "no weight with weight_id %" PRIu64 " is registered",
             r->weight_id);
      } else {
        fail(srv, r, GEMMD_CODE_NOT_FOUND, "no weight named '%s' is registered", r->weight_name);
      }
      return;
    }
    if (w->k != r->k) {
      fail(srv, r, GEMMD_CODE_INVALID_ARGUMENT,
           "a.cols = %u but weight '%s' has k = %u; A is M x K and B is N x K", r->k, w->name,
           w->k);
      return;
    }
    gemmd_weights_acquire(w);
    r->weight = w;
  }
  r->n = r->weight->n;
  if (srv->batcher.depth >= (uint32_t)srv->cfg->queue_depth) {
    fail(srv, r, GEMMD_CODE_RESOURCE_EXHAUSTED,
         "the queue is full (%" PRId64 " requests waiting, --queue-depth); retry later",
         srv->cfg->queue_depth);
    return;
  }
  const uintptr_t conn_n = (uintptr_t)gemmd_map_get_u64(&srv->conns, r->conn_id);
  if (conn_n >= (uintptr_t)srv->cfg->max_inflight_per_client) {
    fail(srv, r, GEMMD_CODE_RESOURCE_EXHAUSTED,
         "this connection already has %" PRId64
         " requests in flight (--max-inflight-per-client); wait for answers first",
         srv->cfg->max_inflight_per_client);
    return;
  }
  if (r->deadline_ns != 0 && r->deadline_ns <= gemmd_now_ns()) {
    fail(srv, r, GEMMD_CODE_DEADLINE_EXCEEDED, "the deadline passed before the request was queued");
    return;
  }
  r->admitted = 1;
  srv->inflight++;
  conn_add(srv, r->conn_id, +1);
  const uint32_t rows = piece_rows(srv, r);
  if (rows == 0) {
    gemmd_batcher_push(&srv->batcher, r);
  } else if (push_pieces(srv, r, rows) != GEMMD_OK) {
    fail(srv, r, GEMMD_CODE_RESOURCE_EXHAUSTED, "out of memory splitting a %u-row request", r->m);
    return;
  }
  if (srv->dispatch_held == 0) maybe_dispatch(srv);
}

void gemmd_server_hold_dispatch(gemmd_server_t *srv) { srv->dispatch_held++; }

void gemmd_server_release_dispatch(gemmd_server_t *srv) {
  if (--srv->dispatch_held == 0) maybe_dispatch(srv);
}

/* ---- Dispatch and completion ---------------------------------------------------------- */

static void on_batch_delay(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  gemmd_server_t *srv = h->data;
  uint64_t expirations;
  (void)!read(srv->delay_fd, &expirations, sizeof expirations); /* re-arms the fd's readiness */
  uv_poll_stop(h);
  maybe_dispatch(srv);
}

/* Wake the loop at `at_ns` (gemmd_now_ns's clock) to form the partial batch. Returns 0, or
 * -1 where the wake-up could not be set (the caller then forms the batch at once, so that
 * it is never left waiting for a wake-up that will not come). */
static int arm_batch_delay(gemmd_server_t *srv, uint64_t at_ns) {
  const struct itimerspec when = {
      .it_value = {.tv_sec = (time_t)(at_ns / 1000000000u), .tv_nsec = (long)(at_ns % 1000000000u)}};
  const int rc = timerfd_settime(srv->delay_fd, TFD_TIMER_ABSTIME, &when, NULL) != 0
                     ? -errno
                     : uv_poll_start(&srv->batch_delay, UV_READABLE, on_batch_delay);
  if (rc != 0) {
    gemmd_log(GEMMD_LOG_ERROR, "the batch delay's wake-up could not be set; the batch forms now",
              "error=\"%s\"", strerror(-rc));
    return -1;
  }
  return 0;
}

/* While the engine has a slot this batch may take (slot_gate.h), turn the queue's head into
 * a batch. The gate counts the requests' lane only: the pieces of a large request queued
 * beside them are not the answered clients coming back. With --max-batch-delay-us, a
 * partial batch waits until its oldest request is that old. */
static void maybe_dispatch(gemmd_server_t *srv) {
  while (gemmd_slot_gate_open(&srv->slot_gate, srv->batcher.requests.depth, srv->draining) &&
         gemmd_batcher_can_form(&srv->batcher, gemmd_now_ns())) {
    const uint64_t now = gemmd_now_ns();
    const uint64_t delay_ns = (uint64_t)srv->cfg->max_batch_delay_us * 1000u;
    if (delay_ns > 0 && !srv->draining &&
        srv->batcher.requests.depth < (uint32_t)srv->cfg->max_batch_requests) {
      const uint64_t ready_at = gemmd_batcher_oldest_ns(&srv->batcher) + delay_ns;
      if (now < ready_at &&
          (uv_is_active((uv_handle_t *)&srv->batch_delay) || arm_batch_delay(srv, ready_at) == 0)) {
        return;
      }
    }
    gemmd_request_t *expired;
    gemmd_batch_t *b = gemmd_batcher_form(&srv->batcher, now, &expired);
    expire_list(srv, expired);
    if (b == NULL) {
      if (expired != NULL) continue; /* only expired entries were at the head */
      if (gemmd_batcher_can_form(&srv->batcher, now)) {
        gemmd_log(GEMMD_LOG_ERROR, "out of memory forming a batch", "queued=%u",
                  srv->batcher.queued);
      }
      return;
    }
    for (uint32_t i = 0; i < b->n_requests; i++) b->requests[i]->dispatched_ns = now;
    gemmd_batch_plan(b, srv->engine->row_align);
    b->marks.submit = gemmd_now_ns();
    const int rc = srv->engine->ops->submit(srv->engine, b);
    if (rc != GEMMD_OK) {
      for (uint32_t i = 0; i < b->n_requests; i++) {
        fail(srv, b->requests[i], GEMMD_CODE_UNAVAILABLE, "the engine refused the batch: %s",
             gemmd_strerror(rc));
      }
      gemmd_batch_free(b);
      continue;
    }
    srv->engine_busy++;
    gemmd_slot_gate_take(&srv->slot_gate, b->n_requests);
  }
}

/* The engine freed a batch's slot before the batch came back (engine.h): a batch as large as
 * it may take the slot now, any other once the batch is done (slot_gate.h). The batch
 * itself is posted after this, so it is still there. */
static void on_slot_freed(gemmd_server_t *srv, void *arg) {
  const gemmd_batch_t *b = arg;
  gemmd_slot_gate_freed_early(&srv->slot_gate, b->id, b->n_requests);
  maybe_dispatch(srv);
}

/* What a request's answer says about its batch. */
static void take_batch_outcome(gemmd_request_t *r, const gemmd_batch_t *b) {
  r->batch_id = b->id;
  r->batch_requests = b->n_requests;
  r->batch_groups = b->n_groups;
  r->compute_ns = b->compute_ns;
  r->status = b->status;
}

static void on_batch_done(gemmd_server_t *srv, void *arg) {
  gemmd_batch_t *b = arg;
  srv->engine_busy--;
  gemmd_slot_gate_done(&srv->slot_gate, b->id, b->slot_freed);
  if (b->piece) gemmd_batcher_piece_done(&srv->batcher);
  b->marks.done = gemmd_now_ns();
  gemmd_metrics_batch(&srv->metrics, b->n_requests, b->compute_ns,
                      b->status == GEMMD_CODE_OK ? b->flops : 0.0, b->input_bytes,
                      b->status == GEMMD_CODE_OK ? b->output_bytes : 0);
  srv->metrics.graph_replays += b->graph_replays;
  srv->metrics.batches_cublaslt += b->kernel_lt != 0;
  srv->metrics.graph_captures += b->graph_captures;
  if (b->status != GEMMD_CODE_OK) {
    gemmd_log(GEMMD_LOG_WARN, "batch failed", "batch=%" PRIu64 " code=%s reason=\"%s\"", b->id,
              gemmd_code_name(b->status), b->message);
  }
  if (b->device_failed && srv->exit_code == 0) device_failed(srv, b->message);
  for (uint32_t i = 0; i < b->n_requests; i++) {
    gemmd_request_t *r = b->requests[i];
    take_batch_outcome(r, b);
    if (b->status != GEMMD_CODE_OK) {
      snprintf(r->message, sizeof r->message, "%s", b->message);
      r->d = NULL;
    }
    finish(srv, r, 1);
  }
  b->marks.answered = gemmd_now_ns();
  if (b->marks.seen_done != 0) gemmd_metrics_batch_stages(&srv->metrics, &b->marks, b->compute_ns, b->gemm_ns);
  srv->engine->ops->batch_release(srv->engine, b);
  gemmd_batch_free(b);
  maybe_dispatch(srv);
  quiet(srv);
}

/* The device is gone (a sticky CUDA error): say so to health checks at once, answer
 * everything queued with UNAVAILABLE, and stop with a non-zero exit so that the
 * supervisor restarts gemmd (which gets its weights back from --weight-dir). */
static void device_failed(gemmd_server_t *srv, const char *why) {
  gemmd_log(GEMMD_LOG_ERROR, "device failed: stopping", "reason=\"%s\" exit_code=3", why);
  srv->exit_code = 3;
  srv->ready = 0;
  srv->draining = 1;
  gemmd_server_notify_watchers(srv);
  gemmd_request_t *queued = gemmd_batcher_take_all(&srv->batcher);
  while (queued != NULL) {
    gemmd_request_t *next = queued->next;
    queued->next = NULL;
    fail(srv, queued, GEMMD_CODE_UNAVAILABLE, "the GPU failed; gemmd is restarting: %s", why);
    queued = next;
  }
}

/* Engine thread (or the loop, for a CPU batch run inline). Requests that can be answered
 * off the loop are answered here, a loop wake-up sooner (docs/bench/gpu_engine.md); the
 * loop's on_batch_done does the bookkeeping for every request as before. */
void gemmd_server_engine_done(void *ctx, gemmd_batch_t *b) {
  gemmd_server_t *srv = ctx;
  int all_early = b->n_requests > 0;
  if (b->status == GEMMD_CODE_OK && !b->device_failed) {
    for (uint32_t i = 0; i < b->n_requests; i++) {
      gemmd_request_t *r = b->requests[i];
      if (r->answer_early == NULL) {
        all_early = 0;
        continue;
      }
      take_batch_outcome(r, b);
      r->answer_early(r);
      r->answered_early = 1;
    }
  } else {
    all_early = 0;
  }
  /* Every result has left the engine's memory: the slot is free for the next batch now,
   * before the wake-ups (a syscall each for sleeping clients) and the loop's bookkeeping.
   * Posted ahead of the batch itself, so that the loop counts the slot first. */
  if (all_early) {
    srv->engine->ops->batch_release(srv->engine, b);
    b->slot_freed = 1;
    gemmd_server_post(srv, on_slot_freed, b);
  }
  if (b->status == GEMMD_CODE_OK && !b->device_failed) {
    for (uint32_t i = 0; i < b->n_requests; i++) {
      gemmd_request_t *r = b->requests[i];
      if (r->answered_early && r->wake_early != NULL) r->wake_early(r);
    }
  }
  gemmd_server_post(srv, on_batch_done, b);
}

/* A batch or a weight operation has finished: the server may have nothing left to do. */
static void quiet(gemmd_server_t *srv) {
  if (srv->on_quiet != NULL) srv->on_quiet(srv);
}

/* ---- Health --------------------------------------------------------------------------- */

int gemmd_server_serving(const gemmd_server_t *srv) {
  return srv->ready && !srv->draining && !srv->stopped;
}

void gemmd_server_watch(gemmd_server_t *srv, gemmd_watcher_t *w) {
  w->next = srv->watchers;
  srv->watchers = w;
}

void gemmd_server_unwatch(gemmd_server_t *srv, gemmd_watcher_t *w) {
  for (gemmd_watcher_t **p = &srv->watchers; *p != NULL; p = &(*p)->next) {
    if (*p == w) {
      *p = w->next;
      return;
    }
  }
}

void gemmd_server_notify_watchers(gemmd_server_t *srv) {
  const int serving = gemmd_server_serving(srv);
  for (gemmd_watcher_t *w = srv->watchers; w != NULL;) {
    gemmd_watcher_t *next = w->next; /* changed() may unwatch */
    w->changed(w, serving);
    w = next;
  }
}

/* ---- Weights -------------------------------------------------------------------------- */

typedef struct weight_waiter_s {
  struct weight_waiter_s *next;
  gemmd_weight_done_fn done;
  void *ctx;
} weight_waiter_t;

typedef struct {
  uv_work_t work;
  gemmd_server_t *srv;
  gemmd_weight_t *w;
  int remove; /* 0: save the file; 1: delete it */
  int load;   /* registration: the engine loads its copy first (off the loop: a GPU upload
                 of a large weight takes milliseconds) */
  int load_rc;
  int rc;
  char err[512];
  gemmd_weight_done_fn done; /* registration's caller */
  void *ctx;
} weight_io_t;

static void weight_io_work(uv_work_t *req) {
  weight_io_t *io = req->data;
  const char *dir = io->srv->cfg->weight_dir;
  if (io->load) {
    gemmd_engine_t *eng = io->srv->engine;
    io->load_rc = eng->ops->weight_load(eng, io->w);
    if (io->load_rc != GEMMD_OK) return;
  }
  if (dir[0] == '\0') return;
  io->rc = io->remove ? gemmd_weight_store_delete(dir, io->w->id, io->err, sizeof io->err)
                      : gemmd_weight_store_save(dir, io->w, io->err, sizeof io->err);
}

static void register_finished(gemmd_server_t *srv, gemmd_weight_t *w, gemmd_weight_done_fn done,
                              void *ctx) {
  gemmd_weights_activate(&srv->weights, w);
  gemmd_log(GEMMD_LOG_INFO, "weight registered",
            "id=%" PRIu64 " name=\"%s\" n=%u k=%u dtype=%s layout=%s bytes=%" PRIu64, w->id,
            w->name, w->n, w->k, gemmd_dtype_name(w->dtype),
            gemmd_scale_layout_name(w->scale_layout), w->bytes);
  done(ctx, GEMMD_CODE_OK, "", w);
}

/* The last user of a removed weight is gone: delete its file, drop the engine's copy,
 * free it, answer the unregister calls that waited. */
static void weight_gone(gemmd_server_t *srv, gemmd_weight_t *w, int file_rc, const char *err) {
  srv->engine->ops->weight_unload(srv->engine, w);
  weight_waiter_t *waiters = (weight_waiter_t *)w->waiters;
  w->waiters = NULL;
  gemmd_log(GEMMD_LOG_INFO, "weight unregistered", "id=%" PRIu64 " name=\"%s\"", w->id, w->name);
  gemmd_weights_forget(&srv->weights, w);
  while (waiters != NULL) {
    weight_waiter_t *next = waiters->next;
    if (file_rc != GEMMD_OK) {
      waiters->done(waiters->ctx, GEMMD_CODE_INTERNAL, err, NULL);
    } else {
      waiters->done(waiters->ctx, GEMMD_CODE_OK, "", NULL);
    }
    free(waiters);
    waiters = next;
  }
}

static void weight_io_after(uv_work_t *req, int status) {
  weight_io_t *io = req->data;
  gemmd_server_t *srv = io->srv;
  srv->weight_ops--;
  if (status != 0) { /* cancelled: nothing ran */
    if (io->load) io->load_rc = GEMMD_EIO;
    if (io->rc == GEMMD_OK) io->rc = GEMMD_EIO;
    snprintf(io->err, sizeof io->err, "weight file operation cancelled");
  }
  if (io->load && io->load_rc != GEMMD_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "the engine could not load weight '%s': %s", io->w->name,
             gemmd_strerror(io->load_rc));
    io->done(io->ctx, io->load_rc == GEMMD_ENOMEM ? GEMMD_CODE_RESOURCE_EXHAUSTED : GEMMD_CODE_INTERNAL, msg,
             NULL);
    gemmd_weights_unreserve(&srv->weights, io->w);
  } else if (io->remove) {
    if (io->rc != GEMMD_OK) gemmd_log(GEMMD_LOG_ERROR, "weight file", "reason=\"%s\"", io->err);
    weight_gone(srv, io->w, io->rc, io->err);
  } else if (io->rc != GEMMD_OK) {
    gemmd_log(GEMMD_LOG_ERROR, "weight not persisted", "name=\"%s\" reason=\"%s\"", io->w->name,
              io->err);
    srv->engine->ops->weight_unload(srv->engine, io->w);
    io->done(io->ctx, GEMMD_CODE_INTERNAL, io->err, NULL);
    gemmd_weights_unreserve(&srv->weights, io->w);
  } else {
    register_finished(srv, io->w, io->done, io->ctx);
  }
  free(io);
  quiet(srv);
}

/* On the uv pool: the engine's load (registration) and the weight file (with
 * --weight-dir): saved at registration, deleted at removal. */
static void start_weight_io(gemmd_server_t *srv, gemmd_weight_t *w, int remove,
                            gemmd_weight_done_fn done, void *ctx) {
  weight_io_t *io = calloc(1, sizeof *io);
  if (io != NULL) {
    io->srv = srv;
    io->w = w;
    io->remove = remove;
    io->load = !remove;
    io->done = done;
    io->ctx = ctx;
    io->work.data = io;
    if (uv_queue_work(&srv->loop, &io->work, weight_io_work, weight_io_after) == 0) {
      srv->weight_ops++;
      return;
    }
    free(io);
  }
  /* Could not queue the file work: finish without it, and say so. */
  const char *why = "could not start the weight file operation";
  if (remove) {
    weight_gone(srv, w, GEMMD_EIO, why);
  } else {
    srv->engine->ops->weight_unload(srv->engine, w);
    done(ctx, GEMMD_CODE_INTERNAL, why, NULL);
    gemmd_weights_unreserve(&srv->weights, w);
  }
}

static void weight_released(gemmd_server_t *srv, gemmd_weight_t *w) {
  if (srv->cfg->weight_dir[0] != '\0') {
    start_weight_io(srv, w, 1, NULL, NULL);
  } else {
    weight_gone(srv, w, GEMMD_OK, "");
  }
}

void gemmd_server_register_weight(gemmd_server_t *srv, gemmd_weight_t *w,
                                  gemmd_weight_done_fn done, void *ctx) {
  char msg[512];
  if (srv->draining || srv->stopped) {
    done(ctx, GEMMD_CODE_UNAVAILABLE, "gemmd is shutting down and takes no new weights", NULL);
    gemmd_weight_free(w);
    return;
  }
  if (still_loading(srv, msg, sizeof msg)) {
    done(ctx, GEMMD_CODE_UNAVAILABLE, msg, NULL);
    gemmd_weight_free(w);
    return;
  }
  const int code = gemmd_weights_reserve(&srv->weights, w, msg, sizeof msg);
  if (code != 0) {
    done(ctx, code, msg, NULL);
    gemmd_weight_free(w);
    return;
  }
  start_weight_io(srv, w, 0, done, ctx); /* load, save, then register_finished */
}

void gemmd_server_unregister_weight(gemmd_server_t *srv, uint64_t id, const char *name,
                                    gemmd_weight_done_fn done, void *ctx) {
  char why[256];
  if (still_loading(srv, why, sizeof why)) {
    done(ctx, GEMMD_CODE_UNAVAILABLE, why, NULL);
    return;
  }
  gemmd_weight_t *w = id != 0 ? gemmd_weights_find_id(&srv->weights, id)
                              : gemmd_weights_find_name(&srv->weights, name ? name : "");
  if (w == NULL) {
    char msg[512];
    if (id != 0) {
      snprintf(msg, sizeof msg, "no weight with weight_id %" PRIu64 " is registered", id);
    } else {
      snprintf(msg, sizeof msg, "no weight named '%s' is registered", name ? name : "");
    }
    done(ctx, GEMMD_CODE_NOT_FOUND, msg, NULL);
    return;
  }
  weight_waiter_t *waiter = calloc(1, sizeof *waiter);
  if (waiter == NULL) {
    done(ctx, GEMMD_CODE_RESOURCE_EXHAUSTED, "out of memory", NULL);
    return;
  }
  waiter->done = done;
  waiter->ctx = ctx;
  waiter->next = (weight_waiter_t *)w->waiters;
  w->waiters = (struct gemmd_weight_waiter_s *)waiter;
  if (gemmd_weights_remove(&srv->weights, w)) weight_released(srv, w);
}

/* ---- Start-up and teardown ------------------------------------------------------------ */

int gemmd_server_init(gemmd_server_t *srv, const gemmd_config_t *cfg) {
  srv->delay_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (srv->delay_fd < 0) {
    gemmd_log(GEMMD_LOG_ERROR, "timerfd_create failed", "errno=%d", errno);
    return GEMMD_EIO;
  }
  srv->cfg = cfg;
  srv->start_ns = gemmd_now_ns();
  srv->limits = (gemmd_limits_t){(uint32_t)cfg->max_m, (uint32_t)cfg->max_n, (uint32_t)cfg->max_k};
  srv->exit_code = 0;
  pthread_mutex_init(&srv->inbox_mu, NULL);
  gemmd_map_init(&srv->conns, 0);
  gemmd_batcher_init(&srv->batcher,
                     (gemmd_batcher_limits_t){(uint32_t)cfg->max_batch_requests,
                                              (uint64_t)cfg->max_batch_rows,
                                              (uint32_t)cfg->max_batch_groups,
                                              (uint32_t)cfg->small_batches_per_piece,
                                              (uint32_t)cfg->piece_slots, BUSY_NS});
  gemmd_weights_init(&srv->weights, cfg->weight_memory_bytes);
  uv_loop_init(&srv->loop);
  uv_async_init(&srv->loop, &srv->wakeup, on_wakeup);
  srv->wakeup.data = srv;
  uv_idle_init(&srv->loop, &srv->spin);
  srv->spin.data = srv;
  uv_timer_init(&srv->loop, &srv->tick);
  srv->tick.data = srv;
  uv_poll_init(&srv->loop, &srv->batch_delay, srv->delay_fd);
  srv->batch_delay.data = srv;
  uv_signal_init(&srv->loop, &srv->sigterm);
  srv->sigterm.data = srv;
  uv_signal_init(&srv->loop, &srv->sigint);
  srv->sigint.data = srv;
  return GEMMD_OK;
}

void gemmd_server_teardown(gemmd_server_t *srv) {
  run_inbox(srv);
  if (srv->engine != NULL) srv->engine->ops->close(srv->engine);
  gemmd_weights_close(&srv->weights);
  gemmd_map_free(&srv->conns);
  if (uv_loop_close(&srv->loop) != 0) {
    gemmd_log(GEMMD_LOG_WARN, "loop closed with handles open", "");
  }
  close(srv->delay_fd);
  pthread_mutex_destroy(&srv->inbox_mu);
}
