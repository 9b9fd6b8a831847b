#include "daemon/arena_pins.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/clock.h"
#include "daemon/log.h"
#include "kernels/errors.h"

enum {
  PIECE_NONE,    /* not asked for */
  PIECE_QUEUED,  /* asked for, waiting for a job */
  PIECE_PINNING, /* in the job that runs */
  PIECE_PINNED,
  PIECE_FAILED, /* registration failed (or there is no engine to register with): not retried */
};

static uintptr_t first_chunk(const gemmd_arena_pins_t *p) { return (uintptr_t)p->base / GEMMD_PIN_CHUNK; }

/* Piece i's bytes: its chunk, clipped to the arena. */
static void piece_range(const gemmd_arena_pins_t *p, uint32_t i, uint8_t **start, size_t *len) {
  const uintptr_t lo = (first_chunk(p) + i) * GEMMD_PIN_CHUNK, hi = lo + GEMMD_PIN_CHUNK;
  const uintptr_t a = (uintptr_t)p->base, end = a + p->bytes;
  const uintptr_t s = lo > a ? lo : a, e = hi < end ? hi : end;
  *start = (uint8_t *)s;
  *len = e - s;
}

int gemmd_arena_pins_init(gemmd_arena_pins_t *p, uv_loop_t *loop, gemmd_engine_t *engine, uint8_t *base,
                          size_t bytes, int64_t delay_us, void (*hold)(void *), void (*release)(void *),
                          void *ctx, uint32_t client_id, uint64_t *pinned_total) {
  memset(p, 0, sizeof *p);
  p->loop = loop;
  p->engine = engine != NULL && engine->ops->arena_register != NULL ? engine : NULL;
  p->base = base;
  p->bytes = bytes;
  p->delay_us = delay_us;
  p->hold = hold;
  p->release = release;
  p->ctx = ctx;
  p->client_id = client_id;
  p->pinned_total = pinned_total;
  p->n_pieces = (uint32_t)(((uintptr_t)base + bytes - 1) / GEMMD_PIN_CHUNK - first_chunk(p) + 1);
  p->state = calloc(p->n_pieces, 1);
  p->job_pieces = calloc(p->n_pieces, sizeof *p->job_pieces);
  p->job_ok = calloc(p->n_pieces, 1);
  if (p->state == NULL || p->job_pieces == NULL || p->job_ok == NULL) {
    gemmd_arena_pins_free(p);
    return GEMMD_ENOMEM;
  }
  return GEMMD_OK;
}

static void job_work(uv_work_t *w) {
  gemmd_arena_pins_t *p = w->data;
  if (p->delay_us > 0) usleep((useconds_t)p->delay_us);
  for (uint32_t j = 0; j < p->job_n; j++) {
    uint8_t *start;
    size_t len;
    piece_range(p, p->job_pieces[j], &start, &len);
    p->job_ok[j] = p->engine != NULL && p->engine->ops->arena_register(p->engine, start, len) == GEMMD_OK;
  }
}

static void start_job(gemmd_arena_pins_t *p);

static void job_done(uv_work_t *w, int status) {
  gemmd_arena_pins_t *p = w->data;
  uint32_t ok = 0;
  for (uint32_t j = 0; j < p->job_n; j++) {
    const int pinned = status == 0 && p->job_ok[j];
    p->state[p->job_pieces[j]] = pinned ? PIECE_PINNED : PIECE_FAILED;
    ok += pinned;
    if (pinned) {
      uint8_t *start;
      size_t len;
      piece_range(p, p->job_pieces[j], &start, &len);
      p->pinned_bytes += len;
      *p->pinned_total += len;
    }
  }
  p->n_pinned += ok;
  p->working = 0;
  if (p->engine != NULL) {
    if (ok == p->job_n) {
      gemmd_log(GEMMD_LOG_DEBUG, "shm arena pinned", "client=%u pieces=%u pinned_bytes=%" PRIu64 " ms=%.1f",
                p->client_id, ok, p->pinned_bytes,
                (double)(gemmd_now_ns() - p->job_started_ns) * 1e-6);
    } else {
      gemmd_log(GEMMD_LOG_WARN, "shm arena not pinned", "client=%u pieces=%u of %u failed: their requests "
                "copy through the engine's pinned memory", p->client_id, p->job_n - ok, p->job_n);
    }
  }
  if (p->n_queued > 0) start_job(p);
  p->release(p->ctx);
}

/* Takes every queued piece into one pool job, unless one runs (its end starts the next). */
static void start_job(gemmd_arena_pins_t *p) {
  if (p->working || p->n_queued == 0) return;
  p->job_n = 0;
  for (uint32_t i = 0; i < p->n_pieces; i++) {
    if (p->state[i] == PIECE_QUEUED) {
      p->state[i] = PIECE_PINNING;
      p->job_pieces[p->job_n++] = i;
    }
  }
  p->n_queued = 0;
  p->working = 1;
  p->job_started_ns = gemmd_now_ns();
  p->work.data = p;
  p->hold(p->ctx);
  uv_queue_work(p->loop, &p->work, job_work, job_done);
}

static void queue_pieces(gemmd_arena_pins_t *p, uint32_t lo, uint32_t hi) {
  for (uint32_t i = lo; i <= hi; i++) {
    if (p->state[i] == PIECE_NONE) {
      p->state[i] = PIECE_QUEUED;
      p->n_queued++;
    }
  }
  start_job(p);
}

int gemmd_arena_pins_ready(gemmd_arena_pins_t *p, uint64_t offset, uint64_t len) {
  if (p->engine == NULL || len == 0) return 0;
  const uintptr_t a = (uintptr_t)p->base + offset;
  const uint32_t lo = (uint32_t)(a / GEMMD_PIN_CHUNK - first_chunk(p));
  const uint32_t hi = (uint32_t)((a + len - 1) / GEMMD_PIN_CHUNK - first_chunk(p));
  int ready = 1;
  for (uint32_t i = lo; i <= hi && ready; i++) ready = p->state[i] == PIECE_PINNED;
  if (!ready) queue_pieces(p, lo, hi);
  return ready;
}

void gemmd_arena_pins_want_all(gemmd_arena_pins_t *p) {
  if (p->engine != NULL || p->delay_us > 0) queue_pieces(p, 0, p->n_pieces - 1);
}

int gemmd_arena_pins_retire(gemmd_arena_pins_t *p) {
  *p->pinned_total -= p->pinned_bytes;
  p->pinned_bytes = 0;
  return p->n_pinned > 0;
}

void gemmd_arena_pins_unregister(gemmd_arena_pins_t *p) {
  for (uint32_t i = 0; i < p->n_pieces; i++) {
    if (p->state[i] != PIECE_PINNED) continue;
    uint8_t *start;
    size_t len;
    piece_range(p, i, &start, &len);
    p->engine->ops->arena_unregister(p->engine, start, len);
    p->state[i] = PIECE_NONE;
  }
  p->n_pinned = 0;
}

void gemmd_arena_pins_free(gemmd_arena_pins_t *p) {
  free(p->state);
  free(p->job_pieces);
  free(p->job_ok);
  p->state = p->job_ok = NULL;
  p->job_pieces = NULL;
}
