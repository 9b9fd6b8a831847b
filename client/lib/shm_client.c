/* libgemmclient over shared memory. See shm_client.h and docs/shm-protocol.md. */
#include "client/lib/shm_client.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client/lib/status.h"
#include "gemmd/shm_v1.h"

enum { WAIT_FUTEX = 0, WAIT_EVENTFD = 1 };
enum { SLOT_FREE = 0, SLOT_PENDING = 1, SLOT_DONE = 2 };

/* A free block of the data region (first fit, address order, coalesced). */
typedef struct block_s {
  struct block_s *next;
  uint64_t off, len;
} block_t;

typedef struct {
  uint64_t id;
  uint32_t n;
  char name[256];
} known_weight_t;

/* One request between submission and the consumption of its completion. */
typedef struct {
  _Atomic uint32_t state; /* futex word for a sync waiter */
  int abandoned;          /* the waiter gave up (deadline): free on completion */
  gemmd_shm_cqe_t cqe;
  /* what it asked for */
  uint64_t user_request_id;
  uint32_t opcode, m, n;
  gemmd_dtype_t out_dtype;
  void *d_out;    /* the caller's arena destination, or NULL: copy D out */
  int d_in_region; /* D went to a region: nothing to copy */
  uint64_t d_off; /* where gemmd writes D */
  uint64_t allocs[6]; /* A, its scales, B, its scales, D, a name */
  int n_allocs;
  gemmd_gemm_done_fn done; /* async */
  void *user;
  uint64_t start_ns;
} slot_t;

struct gemmd_shm_client_s {
  int sock, sq_efd, cq_efd;
  uint8_t *arena;
  size_t arena_bytes;
  gemmd_shm_header_t *hdr;
  uint32_t entries, max_inflight;
  uint64_t data_offset, data_bytes;
  int64_t timeout_ms;
  int wait_mode;
  unsigned spin_us;
  /* A moving average of how long answers took to come (ns). Spinning for an answer that
   * comes after the spin ends only takes a core from gemmd and the other clients (32 C
   * workers spinning 200 µs for answers that took ~350 µs kept 8 of 16 cores busy): past
   * the spin, the waiter sleeps at once. */
  _Atomic uint64_t wait_avg_ns;

  pthread_mutex_t mu; /* slots' free list, allocator, submission */
  pthread_cond_t room;
  slot_t *slots;
  uint32_t *free_slots, n_free;
  block_t *free_blocks;

  pthread_mutex_t cq_mu;  /* one reader of the completion ring at a time */
  pthread_mutex_t ctl_mu; /* one control message and its reply on the socket at a time */
  uint64_t ctl_tag;       /* the last control message's tag; under ctl_mu */

  /* The weights this client has used (WEIGHT_INFO answers), to size D. Under mu. */
  known_weight_t *known;
  size_t n_known, cap_known;

  /* async completions: a client thread runs their callbacks */
  pthread_mutex_t async_mu;
  pthread_cond_t async_cv;
  uint32_t *async_ready;
  uint32_t n_async_ready;
  unsigned async_outstanding;
  int async_started, async_stop;
  pthread_t async_thread;
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t load_acquire(const gemmd_shm_line_t *l) {
  return __atomic_load_n(&l->value, __ATOMIC_ACQUIRE);
}

static void store_release(gemmd_shm_line_t *l, uint32_t v) {
  __atomic_store_n(&l->value, v, __ATOMIC_RELEASE);
}

/* Announces that this client is about to block: a sequentially consistent store (a full
 * barrier), so that the re-check of cq_tail after it cannot read an old tail while gemmd
 * reads an old client_waiting (docs/shm-protocol.md §3). */
static void announce_waiting(gemmd_shm_client_t *s) {
  __atomic_store_n(&s->hdr->client_waiting.value, 1, __ATOMIC_SEQ_CST);
}

/* ---- The arena allocator ------------------------------------------------------------ */

static int arena_alloc(gemmd_shm_client_t *s, uint64_t bytes, uint64_t *off) {
  bytes = (bytes + 255) & ~(uint64_t)255;
  if (bytes == 0) bytes = 256;
  for (block_t **p = &s->free_blocks; *p != NULL; p = &(*p)->next) {
    block_t *b = *p;
    if (b->len < bytes) continue;
    *off = b->off;
    b->off += bytes;
    b->len -= bytes;
    if (b->len == 0) {
      *p = b->next;
      free(b);
    }
    return 0;
  }
  return -1;
}

static void arena_release(gemmd_shm_client_t *s, uint64_t off, uint64_t bytes) {
  bytes = (bytes + 255) & ~(uint64_t)255;
  if (bytes == 0) bytes = 256;
  block_t **p = &s->free_blocks;
  while (*p != NULL && (*p)->off < off) p = &(*p)->next;
  block_t *next = *p;
  /* Coalesce with the block before (the one whose next pointer is p) and after. */
  block_t *prev = NULL;
  for (block_t *b = s->free_blocks; b != NULL && b != next; b = b->next) prev = b;
  if (prev != NULL && prev->off + prev->len == off) {
    prev->len += bytes;
    if (next != NULL && prev->off + prev->len == next->off) {
      prev->len += next->len;
      prev->next = next->next;
      free(next);
    }
    return;
  }
  if (next != NULL && off + bytes == next->off) {
    next->off = off;
    next->len += bytes;
    return;
  }
  block_t *b = malloc(sizeof *b);
  if (b == NULL) return; /* the bytes are lost to the allocator; the arena stays correct */
  b->off = off;
  b->len = bytes;
  b->next = next;
  *p = b;
}

static int in_arena(const gemmd_shm_client_t *s, const void *p, uint64_t len, uint64_t *off) {
  const uint8_t *b = p;
  if (b < s->arena + s->data_offset || b > s->arena + s->arena_bytes) return 0;
  const uint64_t o = (uint64_t)(b - s->arena);
  if (len > s->arena_bytes - o) return 0;
  *off = o;
  return 1;
}

void *gemmd_shm_alloc(gemmd_shm_client_t *s, size_t bytes) {
  uint64_t off;
  pthread_mutex_lock(&s->mu);
  const int rc = arena_alloc(s, bytes + 256, &off); /* room for the size prefix */
  pthread_mutex_unlock(&s->mu);
  if (rc != 0) return NULL;
  uint64_t *prefix = (uint64_t *)(void *)(s->arena + off);
  prefix[0] = bytes + 256;
  return s->arena + off + 256;
}

void gemmd_shm_free(gemmd_shm_client_t *s, void *p) {
  if (p == NULL) return;
  uint8_t *base = (uint8_t *)p - 256;
  const uint64_t len = *(uint64_t *)(void *)base;
  pthread_mutex_lock(&s->mu);
  arena_release(s, (uint64_t)(base - s->arena), len);
  pthread_mutex_unlock(&s->mu);
}

/* ---- Waiting -------------------------------------------------------------------------- */

static void futex_wait(_Atomic uint32_t *word, uint32_t expected, int64_t timeout_ns) {
  struct timespec ts = {(time_t)(timeout_ns / 1000000000), (long)(timeout_ns % 1000000000)};
  syscall(SYS_futex, word, FUTEX_WAIT, expected, timeout_ns >= 0 ? &ts : NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void slot_release_locked(gemmd_shm_client_t *s, uint32_t idx);

/* Consumes every published completion (caller holds cq_mu). Returns how many. */
static int drain_cq(gemmd_shm_client_t *s) {
  int got = 0;
  uint32_t head = load_acquire(&s->hdr->cq_head);
  const uint32_t tail = load_acquire(&s->hdr->cq_tail);
  while (head != tail) {
    gemmd_shm_cqe_t cqe;
    memcpy(&cqe, gemmd_shm_cq_slot(s->arena, s->hdr, head), sizeof cqe);
    head++;
    store_release(&s->hdr->cq_head, head);
    got++;
    const uint64_t idx = cqe.request_id;
    if (idx >= s->entries) continue; /* not ours: ignore */
    slot_t *sl = &s->slots[idx];
    /* Only a request in flight takes a completion. Its state was stored when it was sent,
     * after the slot's previous user let it go: reading it orders this write after them. */
    if (atomic_load(&sl->state) != SLOT_PENDING) continue;
    sl->cqe = cqe;
    if (sl->abandoned) {
      pthread_mutex_lock(&s->mu);
      slot_release_locked(s, (uint32_t)idx);
      pthread_mutex_unlock(&s->mu);
    } else if (sl->done != NULL) {
      atomic_store(&sl->state, SLOT_DONE);
      pthread_mutex_lock(&s->async_mu);
      s->async_ready[s->n_async_ready++] = (uint32_t)idx;
      pthread_cond_signal(&s->async_cv);
      pthread_mutex_unlock(&s->async_mu);
    } else {
      atomic_store(&sl->state, SLOT_DONE);
      futex_wake_all(&sl->state);
    }
  }
  return got;
}

/* Waits until slot idx is done, consuming completions meanwhile. 0, or -1 at the deadline. */
static void note_wait(gemmd_shm_client_t *s, uint64_t start_ns) {
  const uint64_t took = now_ns() - start_ns;
  const uint64_t avg = atomic_load_explicit(&s->wait_avg_ns, memory_order_relaxed);
  atomic_store_explicit(&s->wait_avg_ns, avg - avg / 8 + took / 8, memory_order_relaxed);
}

static int wait_slot(gemmd_shm_client_t *s, uint32_t idx, uint64_t deadline_ns) {
  slot_t *sl = &s->slots[idx];
  const uint64_t start = now_ns(), spin_ns = (uint64_t)s->spin_us * 1000u;
  /* No spin while answers take longer than it on average, or while gemmd says that more
   * clients are busy than there are cores to spin on (docs/shm-protocol.md §3). */
  const int no_spin = atomic_load_explicit(&s->wait_avg_ns, memory_order_relaxed) > spin_ns ||
                      __atomic_load_n(&s->hdr->crowded.value, __ATOMIC_RELAXED) != 0;
  const uint64_t spin_until = no_spin ? start : start + spin_ns;
  for (;;) {
    if (atomic_load(&sl->state) == SLOT_DONE) {
      note_wait(s, start);
      return 0;
    }
    if (pthread_mutex_trylock(&s->cq_mu) == 0) {
      drain_cq(s);
      if (atomic_load(&sl->state) == SLOT_DONE) {
        pthread_mutex_unlock(&s->cq_mu);
        note_wait(s, start);
        return 0;
      }
      const uint64_t now = now_ns();
      if (deadline_ns != 0 && now >= deadline_ns) {
        pthread_mutex_unlock(&s->cq_mu);
        return -1;
      }
      if (now < spin_until) {
        pthread_mutex_unlock(&s->cq_mu);
        __builtin_ia32_pause();
        continue;
      }
      /* Sleep until gemmd publishes: announce it, re-check, then block. */
      const uint32_t seq = __atomic_load_n(&s->hdr->cq_seq.value, __ATOMIC_ACQUIRE);
      announce_waiting(s);
      const int more = load_acquire(&s->hdr->cq_tail) != load_acquire(&s->hdr->cq_head);
      pthread_mutex_unlock(&s->cq_mu);
      if (!more) {
        const int64_t left = deadline_ns ? (int64_t)(deadline_ns - now) : 100000000;
        if (s->wait_mode == WAIT_EVENTFD) {
          struct pollfd pfd = {s->cq_efd, POLLIN, 0};
          poll(&pfd, 1, (int)(left / 1000000 + 1));
          uint64_t v;
          if (read(s->cq_efd, &v, sizeof v) < 0 && errno != EAGAIN) {
            /* nothing to do: the ring is checked again below */
          }
        } else {
          futex_wait((_Atomic uint32_t *)&s->hdr->cq_seq.value, seq,
                     left < 100000000 ? left : 100000000);
        }
      }
      store_release(&s->hdr->client_waiting, 0);
    } else {
      /* Another thread reads the ring: wait on our own slot's word. */
      const uint64_t now = now_ns();
      if (deadline_ns != 0 && now >= deadline_ns) return -1;
      if (now < spin_until) {
        __builtin_ia32_pause();
      } else {
        futex_wait(&sl->state, SLOT_PENDING, 1000000);
      }
    }
  }
}

/* ---- Slots and submission -------------------------------------------------------------- */

static void slot_release_locked(gemmd_shm_client_t *s, uint32_t idx) {
  slot_t *sl = &s->slots[idx];
  for (int i = 0; i < sl->n_allocs; i++) {
    const uint64_t *a = &sl->allocs[i];
    arena_release(s, a[0] >> 24 << 8, (a[0] & 0xFFFFFF) << 8);
  }
  memset(sl, 0, sizeof *sl);
  s->free_slots[s->n_free++] = idx;
  pthread_cond_signal(&s->room);
}

/* Records an allocation in the slot: offsets are 256-aligned, sizes rounded to 256. */
static int slot_alloc(gemmd_shm_client_t *s, slot_t *sl, uint64_t bytes, uint64_t *off) {
  if (sl->n_allocs == 6 || bytes >= (1ull << 32) || arena_alloc(s, bytes, off) != 0) return -1;
  const uint64_t units = (bytes + 255) >> 8;
  sl->allocs[sl->n_allocs++] = (*off >> 8) << 24 | (units ? units : 1);
  return 0;
}

/* Where an operand's data and scales lie in regions (A only; NULL for B). */
typedef struct {
  const gemmd_region_ref_t *data, *scales;
  uint32_t *data_region, *scales_region; /* the entry's region fields */
} region_place_t;

/* Places an operand: named where it lies when in a region, in place when already in the
 * arena (and dense), else copied into the arena. *off and *scales_off receive the
 * offsets. Caller holds mu. */
static int place_operand(gemmd_shm_client_t *s, slot_t *sl, const gemmd_operand_t *op,
                         const region_place_t *at, uint64_t *off, uint64_t *scales_off,
                         gemmd_status_t *status) {
  const size_t esz = gemmd_dtype_size(op->dtype);
  const uint64_t row = (uint64_t)op->cols * esz, bytes = row * op->rows;
  const size_t ns = gemmd_scale_count(op->scale_layout, op->rows, op->cols);
  const int data_in_region = at != NULL && at->data->region != 0;
  const int scales_in_region = at != NULL && at->scales->region != 0;
  if (data_in_region && op->ld != 0 && op->ld != op->cols) {
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT,
                            "an operand in a region is dense: ld is cols or 0");
  }
  if (esz == 0 || (!data_in_region && (op->data == NULL || op->ld < op->cols)) ||
      (ns > 0 && !scales_in_region && op->scales == NULL)) {
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT,
                            "operand: unknown dtype, no data, ld < cols or missing scales");
  }
  if (data_in_region) {
    *off = at->data->offset;
    *at->data_region = at->data->region;
  } else if (!(op->ld == op->cols && in_arena(s, op->data, bytes, off))) {
    if (slot_alloc(s, sl, bytes, off) != 0) goto full;
    for (uint32_t r = 0; r < op->rows; r++) {
      memcpy(s->arena + *off + r * row, (const uint8_t *)op->data + (size_t)r * op->ld * esz, row);
    }
  }
  *scales_off = 0;
  if (ns > 0 && scales_in_region) {
    *scales_off = at->scales->offset;
    *at->scales_region = at->scales->region;
  } else if (ns > 0 && !in_arena(s, op->scales, 4 * ns, scales_off)) {
    if (slot_alloc(s, sl, 4 * ns, scales_off) != 0) goto full;
    memcpy(s->arena + *scales_off, op->scales, 4 * ns);
  }
  return 0;
full:
  return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED,
                          "the shared-memory arena has no room for a %llu-byte operand",
                          (unsigned long long)bytes);
}

/* Takes a free slot (waiting for one when all are in flight). Caller holds mu. */
static uint32_t take_slot(gemmd_shm_client_t *s) {
  while (s->n_free == 0) pthread_cond_wait(&s->room, &s->mu);
  return s->free_slots[--s->n_free];
}

/* Publishes one entry (its request_id is its slot). Caller holds mu (one producer at a
 * time). The slot is marked pending again here, once every field of it is set: the thread
 * that takes its completion (drain_cq) reads that mark first, so it sees the fields. */
static void submit_locked(gemmd_shm_client_t *s, const gemmd_shm_sqe_t *e) {
  if (e->request_id < s->entries) atomic_store(&s->slots[e->request_id].state, SLOT_PENDING);
  const uint32_t tail = load_acquire(&s->hdr->sq_tail);
  memcpy(gemmd_shm_sq_slot(s->arena, s->hdr, tail), e, sizeof *e);
  store_release(&s->hdr->sq_tail, tail + 1);
  if (load_acquire(&s->hdr->server_idle) != 0) {
    const uint64_t one = 1;
    if (write(s->sq_efd, &one, sizeof one) < 0) {
      /* EAGAIN: the counter is saturated, gemmd is already woken */
    }
  }
}

static int fill_result(gemmd_shm_client_t *s, slot_t *sl, gemmd_gemm_result_t *r,
                       gemmd_status_t *status) {
  const gemmd_shm_cqe_t *c = &sl->cqe;
  memset(r, 0, sizeof *r);
  r->request_id = sl->user_request_id;
  r->stats.queue_ns = c->queue_ns;
  r->stats.compute_ns = c->compute_ns;
  r->stats.total_ns = c->total_ns;
  r->stats.batch_requests = c->batch_requests;
  r->stats.batch_groups = c->batch_groups;
  r->stats.batch_id = c->batch_id;
  r->client_ns = now_ns() - sl->start_ns;
  if (c->status != 0) {
    char msg[sizeof c->message + 1];
    memcpy(msg, c->message, sizeof c->message);
    msg[sizeof c->message] = '\0';
    return gemmd_status_set(status, c->status, "%s", msg);
  }
  r->rows = sl->m;
  r->cols = sl->n;
  r->dtype = sl->out_dtype;
  r->data_bytes = c->result;
  if (sl->d_out != NULL || sl->d_in_region) {
    r->data = sl->d_out;
    r->data_borrowed = 1;
  } else {
    r->data = malloc(c->result ? c->result : 1);
    if (r->data == NULL) {
      return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    }
    memcpy(r->data, s->arena + sl->d_off, c->result);
  }
  gemmd_status_clear(status);
  return GEMMD_STATUS_OK;
}

static int weight_info(gemmd_shm_client_t *s, uint64_t *weight_id, const char *name, uint32_t *n,
                       gemmd_status_t *status);

/* Builds and submits a GEMM; *idx is its slot. */
static int start_gemm(gemmd_shm_client_t *s, const gemmd_gemm_call_t *call, gemmd_gemm_done_fn done,
                      void *user, uint32_t *idx, gemmd_status_t *status) {
  const int nb = (call->weight_id != 0) + (call->weight_name != NULL) + (call->b != NULL);
  if (nb != 1) {
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT,
                            "name B exactly once: weight_id, weight_name or b");
  }
  const gemmd_dtype_t out = call->out_dtype ? call->out_dtype : GEMMD_DTYPE_BF16;
  uint32_t n = call->b ? call->b->rows : 0;
  uint64_t weight_id = call->weight_id;
  if (call->b == NULL && (call->d_out == NULL || weight_id == 0)) {
    /* The weight's id (by name) and N (to size D), remembered after the first ask. */
    const int rc = weight_info(s, &weight_id, call->weight_name, &n, status);
    if (rc != 0) return rc;
  }
  gemmd_shm_sqe_t e;
  memset(&e, 0, sizeof e);
  e.opcode = GEMMD_SHM_OP_GEMM;
  e.a_dtype = (uint8_t)call->a.dtype;
  e.a_layout = (uint8_t)call->a.scale_layout;
  e.out_dtype = (uint8_t)call->out_dtype;
  e.m = call->a.rows;
  e.k = call->a.cols;
  const int64_t tmo = call->timeout_ms ? call->timeout_ms : s->timeout_ms;
  e.timeout_us = tmo > 0 && tmo < 4000000 ? (uint32_t)(tmo * 1000) : 0;
  pthread_mutex_lock(&s->mu);
  const uint32_t i = take_slot(s);
  slot_t *sl = &s->slots[i];
  memset(sl, 0, sizeof *sl);
  atomic_store(&sl->state, SLOT_PENDING);
  sl->user_request_id = call->request_id;
  sl->opcode = GEMMD_SHM_OP_GEMM;
  sl->m = call->a.rows;
  sl->out_dtype = out;
  sl->done = done;
  sl->user = user;
  sl->start_ns = now_ns();
  const region_place_t a_at = {&call->a_region, &call->a_scales_region, &e.a_region,
                               &e.a_scales_region};
  int rc = place_operand(s, sl, &call->a, &a_at, &e.a_offset, &e.a_scales_offset, status);
  if (rc == 0 && call->b != NULL) {
    e.b_source = GEMMD_SHM_B_INLINE;
    e.b_dtype = (uint8_t)call->b->dtype;
    e.b_layout = (uint8_t)call->b->scale_layout;
    e.n = n;
    rc = place_operand(s, sl, call->b, NULL, &e.b_offset, &e.b_scales_offset, status);
  } else {
    e.b_source = GEMMD_SHM_B_WEIGHT;
    e.weight_id = weight_id;
  }
  /* D: in a region, the caller's arena buffer, or an allocation of M·N elements (N from
   * inline B or from the weight's WEIGHT_INFO). */
  if (rc == 0) {
    const size_t esz = gemmd_dtype_size(out);
    if (call->d_region.region != 0) {
      e.d_region = call->d_region.region;
      e.d_offset = call->d_region.offset;
      e.d_capacity = (uint64_t)call->a.rows * (n ? n : 1) * esz;
      sl->d_in_region = 1;
    } else if (call->d_out != NULL) {
      if (!in_arena(s, call->d_out, 1, &e.d_offset)) {
        rc = gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT,
                              "d_out is not inside the shared-memory arena");
      } else {
        e.d_capacity = s->arena_bytes - e.d_offset;
        sl->d_out = call->d_out;
      }
    } else {
      const uint64_t want = (uint64_t)call->a.rows * (n ? n : 1) * esz;
      if (slot_alloc(s, sl, want, &e.d_offset) != 0) {
        rc = gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED,
                              "the shared-memory arena has no room for a %llu-byte D",
                              (unsigned long long)want);
      } else {
        e.d_capacity = want;
      }
    }
    sl->d_off = e.d_offset;
  }
  if (rc != 0) {
    slot_release_locked(s, i);
    pthread_mutex_unlock(&s->mu);
    return rc;
  }
  e.request_id = i;
  sl->n = n;
  submit_locked(s, &e);
  pthread_mutex_unlock(&s->mu);
  *idx = i;
  return 0;
}

int gemmd_shm_gemm(gemmd_shm_client_t *s, const gemmd_gemm_call_t *call,
                   gemmd_gemm_result_t *result, gemmd_status_t *status) {
  memset(result, 0, sizeof *result);
  uint32_t i;
  int rc = start_gemm(s, call, NULL, NULL, &i, status);
  if (rc != 0) return rc;
  const int64_t tmo = call->timeout_ms ? call->timeout_ms : s->timeout_ms;
  const uint64_t deadline = tmo > 0 ? now_ns() + (uint64_t)tmo * 1000000u : 0;
  if (wait_slot(s, i, deadline) != 0) {
    pthread_mutex_lock(&s->mu);
    if (atomic_load(&s->slots[i].state) == SLOT_DONE) {
      pthread_mutex_unlock(&s->mu);
    } else {
      s->slots[i].abandoned = 1; /* gemmd may still write D there: free on completion */
      pthread_mutex_unlock(&s->mu);
      return gemmd_status_set(status, GEMMD_STATUS_DEADLINE_EXCEEDED,
                              "no answer within %lld ms", (long long)tmo);
    }
  }
  slot_t *sl = &s->slots[i];
  if (sl->n == 0) sl->n = call->a.rows ? (uint32_t)(sl->cqe.result / call->a.rows /
                                                    gemmd_dtype_size(sl->out_dtype))
                                       : 0;
  rc = fill_result(s, sl, result, status);
  pthread_mutex_lock(&s->mu);
  slot_release_locked(s, i);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

/* ---- Async -------------------------------------------------------------------------------- */

static void *async_main(void *arg) {
  gemmd_shm_client_t *s = arg;
  for (;;) {
    pthread_mutex_lock(&s->async_mu);
    while (s->n_async_ready == 0 && !(s->async_stop && s->async_outstanding == 0)) {
      if (s->async_outstanding > 0) {
        /* Someone must read the ring for async calls: do it here, outside the lock. */
        pthread_mutex_unlock(&s->async_mu);
        if (pthread_mutex_trylock(&s->cq_mu) == 0) {
          if (drain_cq(s) == 0) {
            const uint32_t seq = __atomic_load_n(&s->hdr->cq_seq.value, __ATOMIC_ACQUIRE);
            announce_waiting(s);
            const int more = load_acquire(&s->hdr->cq_tail) != load_acquire(&s->hdr->cq_head);
            pthread_mutex_unlock(&s->cq_mu);
            if (!more) futex_wait((_Atomic uint32_t *)&s->hdr->cq_seq.value, seq, 2000000);
            store_release(&s->hdr->client_waiting, 0);
          } else {
            pthread_mutex_unlock(&s->cq_mu);
          }
        } else {
          struct timespec ts = {0, 50000};
          nanosleep(&ts, NULL);
        }
        pthread_mutex_lock(&s->async_mu);
        continue;
      }
      pthread_cond_wait(&s->async_cv, &s->async_mu);
    }
    if (s->n_async_ready == 0) {
      pthread_mutex_unlock(&s->async_mu);
      return NULL;
    }
    const uint32_t i = s->async_ready[--s->n_async_ready];
    pthread_mutex_unlock(&s->async_mu);
    slot_t *sl = &s->slots[i];
    gemmd_status_t st;
    gemmd_gemm_result_t *r = calloc(1, sizeof *r);
    if (sl->n == 0 && sl->m) sl->n = (uint32_t)(sl->cqe.result / sl->m / gemmd_dtype_size(sl->out_dtype));
    if (r == NULL) {
      gemmd_status_set(&st, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    } else {
      fill_result(s, sl, r, &st);
    }
    gemmd_gemm_done_fn done = sl->done;
    void *user = sl->user;
    pthread_mutex_lock(&s->mu);
    slot_release_locked(s, i);
    pthread_mutex_unlock(&s->mu);
    done(user, r, &st);
    pthread_mutex_lock(&s->async_mu);
    s->async_outstanding--;
    pthread_cond_broadcast(&s->async_cv);
    pthread_mutex_unlock(&s->async_mu);
  }
}

int gemmd_shm_gemm_async(gemmd_shm_client_t *s, const gemmd_gemm_call_t *call,
                         gemmd_gemm_done_fn done, void *user, gemmd_status_t *status) {
  pthread_mutex_lock(&s->async_mu);
  if (!s->async_started) {
    if (pthread_create(&s->async_thread, NULL, async_main, s) != 0) {
      pthread_mutex_unlock(&s->async_mu);
      return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "cannot start a thread");
    }
    s->async_started = 1;
  }
  s->async_outstanding++;
  pthread_mutex_unlock(&s->async_mu);
  uint32_t i;
  const int rc = start_gemm(s, call, done, user, &i, status);
  pthread_mutex_lock(&s->async_mu);
  if (rc != 0) s->async_outstanding--;
  pthread_cond_broadcast(&s->async_cv);
  pthread_mutex_unlock(&s->async_mu);
  if (rc == 0) gemmd_status_clear(status);
  return rc;
}

void gemmd_shm_drain(gemmd_shm_client_t *s) {
  pthread_mutex_lock(&s->async_mu);
  while (s->async_outstanding > 0) pthread_cond_wait(&s->async_cv, &s->async_mu);
  pthread_mutex_unlock(&s->async_mu);
}

/* ---- Weights ---------------------------------------------------------------------------------- */

static int weight_op(gemmd_shm_client_t *s, gemmd_shm_sqe_t *e, slot_t **out_slot, uint32_t i,
                     gemmd_status_t *status) {
  e->request_id = i;
  submit_locked(s, e);
  pthread_mutex_unlock(&s->mu);
  wait_slot(s, i, 0);
  *out_slot = &s->slots[i];
  const gemmd_shm_cqe_t *c = &(*out_slot)->cqe;
  if (c->status != 0) {
    char msg[sizeof c->message + 1];
    memcpy(msg, c->message, sizeof c->message);
    msg[sizeof c->message] = '\0';
    return gemmd_status_set(status, c->status, "%s", msg);
  }
  return 0;
}

/* The weights this client has used: id, name (may be empty) and N. Under mu. */
static void remember_weight(gemmd_shm_client_t *s, uint64_t id, const char *name, uint32_t n) {
  for (size_t i = 0; i < s->n_known; i++) {
    if (s->known[i].id == id) {
      s->known[i].n = n;
      if (name != NULL) snprintf(s->known[i].name, sizeof s->known[i].name, "%s", name);
      return;
    }
  }
  if (s->n_known == s->cap_known) {
    const size_t cap = s->cap_known ? s->cap_known * 2 : 64;
    known_weight_t *k = realloc(s->known, cap * sizeof *k);
    if (k == NULL) return;
    s->known = k;
    s->cap_known = cap;
  }
  known_weight_t *k = &s->known[s->n_known++];
  k->id = id;
  k->n = n;
  snprintf(k->name, sizeof k->name, "%s", name ? name : "");
}

static void forget_weight(gemmd_shm_client_t *s, uint64_t id) {
  for (size_t i = 0; i < s->n_known; i++) {
    if (s->known[i].id == id) {
      s->known[i] = s->known[--s->n_known];
      return;
    }
  }
}

/* Id and N of a registered weight named by id (*weight_id != 0) or by name: remembered,
 * else asked of gemmd (WEIGHT_INFO). */
static int weight_info(gemmd_shm_client_t *s, uint64_t *weight_id, const char *name, uint32_t *n,
                       gemmd_status_t *status) {
  const size_t name_len = name ? strlen(name) : 0;
  if (*weight_id == 0 && (name_len == 0 || name_len > 255)) {
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT,
                            "weight_name must be 1 to 255 bytes");
  }
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->n_known; i++) {
    const known_weight_t *k = &s->known[i];
    if ((*weight_id != 0 && k->id == *weight_id) ||
        (*weight_id == 0 && strcmp(k->name, name) == 0)) {
      *weight_id = k->id;
      *n = k->n;
      pthread_mutex_unlock(&s->mu);
      return 0;
    }
  }
  gemmd_shm_sqe_t e;
  memset(&e, 0, sizeof e);
  e.opcode = GEMMD_SHM_OP_WEIGHT_INFO;
  e.weight_id = *weight_id;
  const uint32_t i = take_slot(s);
  slot_t *sl = &s->slots[i];
  memset(sl, 0, sizeof *sl);
  atomic_store(&sl->state, SLOT_PENDING);
  if (*weight_id == 0) {
    if (slot_alloc(s, sl, name_len, &e.d_offset) != 0) {
      slot_release_locked(s, i);
      pthread_mutex_unlock(&s->mu);
      return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "arena full");
    }
    memcpy(s->arena + e.d_offset, name, name_len);
    e.d_capacity = name_len;
  }
  const int rc = weight_op(s, &e, &sl, i, status); /* unlocks mu */
  pthread_mutex_lock(&s->mu);
  if (rc == 0) {
    *n = (uint32_t)sl->cqe.result;
    *weight_id = sl->cqe.batch_id;
    remember_weight(s, *weight_id, name, *n);
  }
  slot_release_locked(s, i);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int gemmd_shm_register_weight(gemmd_shm_client_t *s, const char *name, const gemmd_operand_t *w,
                              gemmd_weight_info_t *info, gemmd_status_t *status) {
  const size_t len = name ? strlen(name) : 0;
  if (len == 0 || len > 255) {
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT, "name must be 1 to 255 bytes");
  }
  gemmd_shm_sqe_t e;
  memset(&e, 0, sizeof e);
  e.opcode = GEMMD_SHM_OP_REGISTER_WEIGHT;
  e.a_dtype = (uint8_t)w->dtype;
  e.a_layout = (uint8_t)w->scale_layout;
  e.m = w->rows;
  e.k = w->cols;
  pthread_mutex_lock(&s->mu);
  const uint32_t i = take_slot(s);
  slot_t *sl = &s->slots[i];
  memset(sl, 0, sizeof *sl);
  atomic_store(&sl->state, SLOT_PENDING);
  int rc = place_operand(s, sl, w, NULL, &e.a_offset, &e.a_scales_offset, status);
  if (rc == 0 && slot_alloc(s, sl, len, &e.d_offset) != 0) {
    rc = gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "arena full");
  }
  if (rc != 0) {
    slot_release_locked(s, i);
    pthread_mutex_unlock(&s->mu);
    return rc;
  }
  memcpy(s->arena + e.d_offset, name, len);
  e.d_capacity = len;
  rc = weight_op(s, &e, &sl, i, status); /* unlocks mu */
  if (rc == 0 && info != NULL) {
    memset(info, 0, sizeof *info);
    info->weight_id = sl->cqe.result;
    snprintf(info->name, sizeof info->name, "%s", name);
    info->n = w->rows;
    info->k = w->cols;
    const int fp8 = gemmd_dtype_is_fp8(w->dtype);
    info->dtype = fp8 ? w->dtype : GEMMD_DTYPE_FP8_E4M3;
    info->scale_layout = fp8 ? w->scale_layout : GEMMD_SCALE_BLOCK_128X128;
    snprintf(info->source, sizeof info->source, "registered");
    info->bytes = (uint64_t)w->rows * w->cols +
                  4 * gemmd_scale_count(info->scale_layout, w->rows, w->cols);
    gemmd_status_clear(status);
  }
  pthread_mutex_lock(&s->mu);
  if (rc == 0) remember_weight(s, sl->cqe.result, name, w->rows);
  slot_release_locked(s, i);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int gemmd_shm_unregister_weight(gemmd_shm_client_t *s, uint64_t weight_id, const char *name,
                                gemmd_status_t *status) {
  uint32_t n;
  if (weight_id == 0) { /* by name: its id first */
    const int rc = weight_info(s, &weight_id, name, &n, status);
    if (rc != 0) return rc;
  }
  gemmd_shm_sqe_t e;
  memset(&e, 0, sizeof e);
  e.opcode = GEMMD_SHM_OP_UNREGISTER_WEIGHT;
  e.weight_id = weight_id;
  pthread_mutex_lock(&s->mu);
  const uint32_t i = take_slot(s);
  slot_t *sl = &s->slots[i];
  memset(sl, 0, sizeof *sl);
  atomic_store(&sl->state, SLOT_PENDING);
  const int rc = weight_op(s, &e, &sl, i, status); /* unlocks mu */
  if (rc == 0) gemmd_status_clear(status);
  pthread_mutex_lock(&s->mu);
  forget_weight(s, weight_id);
  slot_release_locked(s, i);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

/* ---- Connect and close ------------------------------------------------------------------------- */

/* gemmd opens a region off its loop; a CUDA IPC handle can take a while to open. */
enum { CONTROL_TIMEOUT_MS = 60000 };

/* Sends one control message (with fd attached when fd >= 0) and reads its reply. Each
 * message carries a tag of its own, and a reply with another tag (to a message whose wait
 * timed out) is dropped, so that it never answers a later one. */
static int control(gemmd_shm_client_t *s, gemmd_shm_ctl_t *m, int fd, gemmd_shm_ctl_reply_t *reply,
                   gemmd_status_t *status) {
  struct iovec iov = {m, sizeof *m};
  struct msghdr mh = {0};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctl;
  if (fd >= 0) {
    memset(&ctl, 0, sizeof ctl);
    mh.msg_control = ctl.buf;
    mh.msg_controllen = sizeof ctl.buf;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
  }
  pthread_mutex_lock(&s->ctl_mu);
  m->tag = ++s->ctl_tag;
  int rc = 0;
  if (sendmsg(s->sock, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof *m) {
    rc = gemmd_status_set(status, GEMMD_STATUS_UNAVAILABLE, "gemmd closed the session: %s",
                          strerror(errno));
  }
  const uint64_t deadline = now_ns() + (uint64_t)CONTROL_TIMEOUT_MS * 1000000u;
  while (rc == 0) {
    const uint64_t now = now_ns();
    struct pollfd p = {s->sock, POLLIN, 0};
    const int ready = now < deadline ? poll(&p, 1, (int)((deadline - now) / 1000000u) + 1) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      rc = gemmd_status_set(status, GEMMD_STATUS_DEADLINE_EXCEEDED,
                            "gemmd did not answer a control message in %d s",
                            CONTROL_TIMEOUT_MS / 1000);
    } else if (recv(s->sock, reply, sizeof *reply, 0) != (ssize_t)sizeof *reply) {
      rc = gemmd_status_set(status, GEMMD_STATUS_UNAVAILABLE, "gemmd closed the session");
    } else if (reply->tag != m->tag) {
      continue; /* an earlier message's late reply */
    } else if (reply->status != 0) {
      reply->message[sizeof reply->message - 1] = '\0';
      rc = gemmd_status_set(status, reply->status, "%s", reply->message);
      break;
    } else {
      break;
    }
  }
  pthread_mutex_unlock(&s->ctl_mu);
  if (rc == 0) gemmd_status_clear(status);
  return rc;
}

int gemmd_shm_region_open(gemmd_shm_client_t *s, int fd, const void *handle, uint64_t bytes,
                          uint32_t *region_id, gemmd_status_t *status) {
  gemmd_shm_ctl_t m;
  memset(&m, 0, sizeof m);
  m.op = GEMMD_SHM_CTL_REGION_OPEN;
  m.kind = handle != NULL ? GEMMD_SHM_REGION_CUDA_IPC : GEMMD_SHM_REGION_FD;
  m.bytes = bytes;
  if (handle != NULL) memcpy(m.handle, handle, sizeof m.handle);
  if (handle == NULL && fd < 0) {
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT, "no fd for the region");
  }
  gemmd_shm_ctl_reply_t reply;
  const int rc = control(s, &m, handle != NULL ? -1 : fd, &reply, status);
  if (rc == 0) *region_id = reply.region_id;
  return rc;
}

int gemmd_shm_region_close(gemmd_shm_client_t *s, uint32_t region_id, gemmd_status_t *status) {
  gemmd_shm_ctl_t m;
  memset(&m, 0, sizeof m);
  m.op = GEMMD_SHM_CTL_REGION_CLOSE;
  m.region_id = region_id;
  gemmd_shm_ctl_reply_t reply;
  return control(s, &m, -1, &reply, status);
}

int gemmd_shm_set_wait(gemmd_shm_client_t *s, const char *mode, unsigned spin_us) {
  if (mode != NULL) {
    if (strcmp(mode, "futex") == 0) {
      s->wait_mode = WAIT_FUTEX;
    } else if (strcmp(mode, "eventfd") == 0) {
      s->wait_mode = WAIT_EVENTFD;
    } else {
      return -1;
    }
  }
  s->spin_us = spin_us;
  return 0;
}

/* One connect, HELLO and WELCOME. 0 with the socket and the WELCOME's three fds, or the
 * status code with status; *transient says whether trying again may succeed: gemmd turned
 * the connection away with UNAVAILABLE (too many handshakes at once), closed it before its
 * WELCOME, or its listen backlog was full. */
static int hello_once(const char *path, int *sock_out, gemmd_shm_welcome_t *w, int fds[3],
                      int *transient, gemmd_status_t *status) {
  *transient = 0;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
  const int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (sock < 0 || connect(sock, (struct sockaddr *)&addr, sizeof addr) != 0) {
    const int err = errno;
    if (sock >= 0) close(sock);
    *transient = err == EAGAIN;
    return gemmd_status_set(status, GEMMD_STATUS_UNAVAILABLE, "cannot connect to %s: %s", path,
                            strerror(err));
  }
  gemmd_shm_hello_t hello;
  memset(&hello, 0, sizeof hello);
  memcpy(hello.magic, GEMMD_SHM_MAGIC, 8);
  hello.version = GEMMD_SHM_VERSION_2; /* version 1 and regions */
  union {
    char buf[CMSG_SPACE(3 * sizeof(int))];
    struct cmsghdr align;
  } ctl;
  struct iovec iov = {w, sizeof *w};
  struct msghdr mh = {0};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = ctl.buf;
  mh.msg_controllen = sizeof ctl.buf;
  /* A refusal may come before the HELLO is read: read the answer even if the send failed. */
  (void)send(sock, &hello, sizeof hello, MSG_NOSIGNAL);
  const ssize_t got = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
  fds[0] = fds[1] = fds[2] = -1;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); got > 0 && cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
        cm->cmsg_len == CMSG_LEN(3 * sizeof(int))) {
      memcpy(fds, CMSG_DATA(cm), 3 * sizeof(int));
    }
  }
  if (got == (ssize_t)sizeof *w && memcmp(w->magic, GEMMD_SHM_MAGIC, 8) == 0 && w->status == 0 &&
      fds[0] >= 0) {
    *sock_out = sock;
    return 0;
  }
  for (int i = 0; i < 3; i++) {
    if (fds[i] >= 0) close(fds[i]);
  }
  close(sock);
  if (got == (ssize_t)sizeof *w && w->status != 0) {
    w->message[sizeof w->message - 1] = '\0';
    *transient = w->status == GEMMD_STATUS_UNAVAILABLE;
    return gemmd_status_set(status, w->status, "%s", w->message);
  }
  *transient = got <= 0;
  return gemmd_status_set(status, GEMMD_STATUS_UNAVAILABLE, "%s: no valid WELCOME from gemmd%s%s",
                          path, got < 0 ? ": " : "", got < 0 ? strerror(errno) : "");
}

/* How long a connect keeps trying while gemmd turns it away as busy, without a timeout_ms. */
enum { CONNECT_RETRY_MS = 5000 };

int gemmd_shm_connect(const char *path, const gemmd_client_options_t *o, gemmd_shm_client_t **out,
                      gemmd_status_t *status) {
  *out = NULL;
  struct sockaddr_un addr;
  if (strlen(path) >= sizeof addr.sun_path) {
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT, "socket path too long: %s",
                            path);
  }
  /* Many workers starting at once can pass gemmd's bound on handshakes in progress: such a
   * connection is turned away as UNAVAILABLE, and tried again after a jittered backoff. */
  const int64_t budget_ms = o != NULL && o->timeout_ms > 0 ? o->timeout_ms : CONNECT_RETRY_MS;
  const uint64_t deadline = now_ns() + (uint64_t)budget_ms * 1000000u;
  unsigned backoff_us = 500, seed = (unsigned)getpid() ^ (unsigned)now_ns();
  gemmd_shm_welcome_t w;
  int sock = -1, fds[3], transient = 0, rc;
  while ((rc = hello_once(path, &sock, &w, fds, &transient, status)) != 0) {
    if (!transient || now_ns() + (uint64_t)backoff_us * 1000u > deadline) return rc;
    usleep(backoff_us / 2 + (unsigned)rand_r(&seed) % (backoff_us / 2 + 1));
    if (backoff_us < 50000) backoff_us *= 2;
  }
  void *p = mmap(NULL, w.arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
  close(fds[0]);
  gemmd_shm_client_t *s = calloc(1, sizeof *s);
  if (p == MAP_FAILED || s == NULL) {
    if (p != MAP_FAILED) munmap(p, w.arena_bytes);
    free(s);
    close(fds[1]);
    close(fds[2]);
    close(sock);
    return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "cannot map the arena");
  }
  s->sock = sock;
  s->sq_efd = fds[1];
  s->cq_efd = fds[2];
  s->arena = p;
  s->arena_bytes = w.arena_bytes;
  s->hdr = (gemmd_shm_header_t *)p;
  s->entries = s->hdr->sq_entries;
  s->max_inflight = w.max_inflight;
  s->data_offset = s->hdr->data_offset;
  s->data_bytes = s->hdr->data_bytes;
  s->timeout_ms = o ? o->timeout_ms : 0;
  const char *mode = getenv("GEMMD_SHM_WAIT");
  const char *spin = getenv("GEMMD_SHM_SPIN_US");
  gemmd_shm_set_wait(s, mode ? mode : "futex", spin ? (unsigned)atoi(spin) : 200);
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_init(&s->cq_mu, NULL);
  pthread_mutex_init(&s->ctl_mu, NULL);
  pthread_mutex_init(&s->async_mu, NULL);
  pthread_cond_init(&s->room, NULL);
  pthread_cond_init(&s->async_cv, NULL);
  const uint32_t slots = s->max_inflight < s->entries ? s->max_inflight : s->entries;
  s->slots = calloc(s->entries, sizeof *s->slots);
  s->free_slots = calloc(s->entries, sizeof *s->free_slots);
  s->async_ready = calloc(s->entries, sizeof *s->async_ready);
  s->free_blocks = calloc(1, sizeof *s->free_blocks);
  if (!s->slots || !s->free_slots || !s->async_ready || !s->free_blocks) {
    gemmd_shm_close(s);
    return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  }
  for (uint32_t i = 0; i < slots; i++) s->free_slots[s->n_free++] = slots - 1 - i;
  /* The allocator hands out 256-aligned blocks of the data region. */
  const uint64_t start = (s->data_offset + 255) & ~(uint64_t)255;
  s->free_blocks->off = start;
  s->free_blocks->len = (s->data_offset + s->data_bytes - start) & ~(uint64_t)255;
  *out = s;
  gemmd_status_clear(status);
  return 0;
}

void gemmd_shm_close(gemmd_shm_client_t *s) {
  if (s == NULL) return;
  pthread_mutex_lock(&s->async_mu);
  s->async_stop = 1;
  pthread_cond_broadcast(&s->async_cv);
  const int started = s->async_started;
  pthread_mutex_unlock(&s->async_mu);
  if (started) pthread_join(s->async_thread, NULL);
  while (s->free_blocks != NULL) {
    block_t *b = s->free_blocks;
    s->free_blocks = b->next;
    free(b);
  }
  free(s->slots);
  free(s->free_slots);
  free(s->async_ready);
  free(s->known);
  munmap(s->arena, s->arena_bytes);
  close(s->sq_efd);
  close(s->cq_efd);
  close(s->sock);
  pthread_mutex_destroy(&s->mu);
  pthread_mutex_destroy(&s->cq_mu);
  pthread_mutex_destroy(&s->ctl_mu);
  pthread_mutex_destroy(&s->async_mu);
  pthread_cond_destroy(&s->room);
  pthread_cond_destroy(&s->async_cv);
  free(s);
}
