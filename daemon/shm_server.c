/* Shared-memory transport, server side. See shm_server.h and docs/shm-protocol.md. */
#include "daemon/shm_server.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/arena_pins.h"
#include "daemon/cpus.h"
#include "daemon/log.h"
#include "daemon/request_build.h"
#include "daemon/shm_check.h"
#include "daemon/status.h"
#include "gemmd/shm_v1.h"
#include "kernels/errors.h"


enum { MAX_IDS = 64, MAX_REGIONS = 32 };

typedef enum { HANDSHAKE, ACTIVE, CLOSING } client_state_t;

typedef struct shm_client_s shm_client_t;

/* --shm-pin-arenas: nothing, the pieces requests use, or whole arenas at connect. */
typedef enum { PIN_OFF, PIN_USED, PIN_ALL } pin_mode_t;

struct gemmd_shm_server_s {
  gemmd_server_t *srv;
  int listen_fd;
  uv_poll_t listen_poll;
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  shm_client_t *clients;
  unsigned n_clients, n_active;
  /* Connections that have not finished HELLO, bounded in count (all and per uid) and in
   * time, so that connections that never speak cannot hold the socket or gemmd's fds. */
  unsigned n_handshaking;
  uv_timer_t hello_sweep;
  /* accept() failing for lack of fds or memory: the listener rests for a moment instead of
   * firing again at once. */
  uv_timer_t accept_pause;
  uint64_t accept_failures, last_accept_log_ns;
  int timers_open;
  uint32_t next_id;
  uid_t uids[MAX_IDS];
  gid_t gids[MAX_IDS];
  int n_uids, n_gids;
  int stopping, listen_closed;
  uint64_t arena_bytes_total; /* every client's arena, against --shm-arenas-bytes */
  pin_mode_t pin_mode;         /* --shm-pin-arenas */
  uint64_t pinned_bytes;       /* of all arenas, registered with the engine */
  /* --shm-spinning-clients (resolved): past this many busy clients every header's
   * `crowded` is set, and clients block for answers instead of spinning. A client is busy
   * from an entry it sends until it has had nothing in flight for BUSY_WINDOW_NS; the
   * sweep, running while any client is busy, finds those that have gone idle. */
  unsigned spinning_clients;
  unsigned n_busy;
  uv_timer_t busy_sweep;
  int crowded;
  void (*done)(gemmd_server_t *srv);
};

/* A region of the client's own device memory (protocol version 2, §7), mapped by the engine.
 * A closed region takes no new entries and is unmapped once no request uses it. */
typedef struct {
  uint32_t id; /* 0: a free slot */
  int closing;
  unsigned refs; /* requests in flight that read or write it */
  uint8_t *base;
  uint64_t bytes;
  int on_device; /* the engine's device memory, which the host never touches */
} shm_region_t;

struct shm_client_s {
  gemmd_shm_server_t *ss;
  shm_client_t *next;
  client_state_t state;
  uint32_t id;
  struct ucred peer;
  uint64_t accepted_ns;
  int sock;
  uv_poll_t sock_poll;
  int sq_efd, cq_efd;
  uv_poll_t sq_poll;
  int open_handles; /* uv handles not yet closed */
  int sq_poll_inited;
  /* What of the arena is registered with the engine (arena_pins.h): requests whose A or
   * D lie in pinned pieces move them by DMA; the others copy through the engine's pinned
   * memory meanwhile. pins_ready: set up (the arena exists). */
  gemmd_arena_pins_t pins;
  int pins_ready;
  uv_work_t unpin_work; /* at the end: unregistration and unmapping, on the pool */
  /* The arena and gemmd's private copy of its geometry: the header in the arena is the
   * client's to scribble on, so gemmd never reads geometry back from it. */
  uint8_t *arena;
  size_t arena_bytes;
  gemmd_shm_header_t *hdr;
  uint32_t entries, sq_offset, cq_offset;
  uint64_t data_offset, data_bytes;
  uint32_t sq_head, cq_tail; /* gemmd's cursors */
  /* Completions are published by the loop and, for GEMMs, by the engine's completion
   * thread (answer_early): cq_mu orders them and guards cq_tail and state's ACTIVE →
   * CLOSING step. */
  pthread_mutex_t cq_mu;
  uint32_t inflight, max_inflight;
  int refs; /* the connection's own + one per operation in flight */
  int draining_ring;
  int busy;              /* counted in n_busy */
  uint64_t last_entry_ns; /* when it last sent an entry */
  int registering; /* a REGISTER_WEIGHT is on the pool: the next one waits in the ring */
  int opening_region; /* a REGION_OPEN is on the pool: the socket is not read meanwhile */
  uint32_t version; /* the protocol version of its HELLO */
  shm_region_t regions[MAX_REGIONS];
  uint32_t next_region_id;
};

/* One entry taken from a client's ring and not yet answered. */
typedef struct {
  gemmd_request_t req; /* first: respond() gets this pointer */
  shm_client_t *c;
  uint32_t opcode;
  uint64_t request_id;
  uint64_t accepted_ns;
  int wake_pending;     /* answered early to a sleeping client, not yet woken */
  struct prep_job_s *prep; /* a GEMM whose operands are quantized on the pool first */
  shm_region_t *regions[3]; /* the regions its A, A's scales and D lie in, held */
} shm_op_t;

/* A GEMM whose A (or inline B) gemmd quantizes itself: work in proportion to the operand,
 * so on the uv pool, not in the ring drain; the request is submitted when it is done. */
typedef struct prep_job_s {
  uv_work_t work;
  shm_op_t *op;
  gemmd_gemm_operands_t ops;
  int code;
  char msg[128];
} prep_job_t;

static void client_unref(shm_client_t *c);
static void drain_ring(shm_client_t *c);
static void set_busy(shm_client_t *c, uint64_t now);
static void unpin_work(uv_work_t *w);
static void unpin_done(uv_work_t *w, int status);

/* ---- Shared words in the arena --------------------------------------------------------- */

static uint32_t load_acquire(const gemmd_shm_line_t *l) {
  return __atomic_load_n(&l->value, __ATOMIC_ACQUIRE);
}

static void store_release(gemmd_shm_line_t *l, uint32_t v) {
  __atomic_store_n(&l->value, v, __ATOMIC_RELEASE);
}

/* ---- Completions ---------------------------------------------------------------------- */

/* A message cut to the completion's 64 bytes, always NUL-terminated. */
static void copy_message(char *dst, size_t n, const char *src) {
  const size_t len = strnlen(src, n - 1);
  memcpy(dst, src, len);
  dst[len] = '\0';
}

/* Puts a completion into the client's CQ. Returns whether the client said it sleeps on
 * its answers (then wake it, now or soon: it re-checks the CQ before it sleeps). */
static int publish_quiet(shm_client_t *c, const gemmd_shm_cqe_t *cqe) {
  pthread_mutex_lock(&c->cq_mu);
  if (c->state != ACTIVE) { /* the client is gone: the answer goes nowhere */
    pthread_mutex_unlock(&c->cq_mu);
    return 0;
  }
  uint8_t *slot = c->arena + c->cq_offset + (size_t)(c->cq_tail & (c->entries - 1)) * GEMMD_SHM_ENTRY_BYTES;
  memcpy(slot, cqe, sizeof *cqe);
  c->cq_tail++;
  store_release(&c->hdr->cq_tail, c->cq_tail);
  __atomic_fetch_add(&c->hdr->cq_seq.value, 1, __ATOMIC_RELEASE);
  const int wake = __atomic_load_n(&c->hdr->client_waiting.value, __ATOMIC_ACQUIRE) != 0;
  pthread_mutex_unlock(&c->cq_mu);
  return wake;
}

/* Rings both of the client's wake-ups: its CQ doorbell and the futex on cq_seq. */
static void wake_client(shm_client_t *c) {
  const uint64_t one = 1;
  if (write(c->cq_efd, &one, sizeof one) < 0 && errno != EAGAIN) {
    gemmd_log(GEMMD_LOG_WARN, "shm doorbell", "client=%u errno=%d", c->id, errno);
  }
  syscall(SYS_futex, &c->hdr->cq_seq.value, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void publish(shm_client_t *c, const gemmd_shm_cqe_t *cqe) {
  if (publish_quiet(c, cqe)) wake_client(c);
}

static void publish_error(shm_client_t *c, const gemmd_shm_sqe_t *e, int code, const char *msg,
                          uint64_t accepted_ns) {
  gemmd_shm_cqe_t cqe;
  memset(&cqe, 0, sizeof cqe);
  cqe.request_id = e->request_id;
  cqe.status = code;
  cqe.opcode = e->opcode;
  cqe.total_ns = gemmd_now_ns() - accepted_ns;
  copy_message(cqe.message, sizeof cqe.message, msg);
  publish(c, &cqe);
  if (e->opcode == GEMMD_SHM_OP_GEMM) {
    gemmd_server_count_refused(c->ss->srv, GEMMD_TRANSPORT_SHM, code, accepted_ns);
  }
}

/* A request is done with a region: a closed one is unmapped when the last goes. */
static void region_unref(shm_client_t *c, shm_region_t *g) {
  if (--g->refs > 0 || !g->closing) return;
  c->ss->srv->engine->ops->region_close(c->ss->srv->engine, g->base, g->bytes);
  memset(g, 0, sizeof *g);
}

static void op_done(shm_op_t *op) {
  shm_client_t *c = op->c;
  for (int i = 0; i < 3; i++) {
    if (op->regions[i] != NULL) region_unref(c, op->regions[i]);
  }
  gemmd_request_release(&op->req);
  free(op);
  c->inflight--;
  if (c->state == ACTIVE) drain_ring(c); /* entries held back by the in-flight limit */
  client_unref(c);
}

/* A GEMM's completion (D is already in the arena: the engine wrote it there). Returns
 * whether the client needs a wake-up. */
static int gemm_publish(gemmd_request_t *r, uint64_t total_ns) {
  shm_op_t *op = (shm_op_t *)r;
  gemmd_shm_cqe_t cqe;
  memset(&cqe, 0, sizeof cqe);
  cqe.request_id = op->request_id;
  cqe.status = r->status;
  cqe.opcode = GEMMD_SHM_OP_GEMM;
  cqe.result = r->status == GEMMD_CODE_OK ? r->d_bytes : 0;
  if (r->dispatched_ns != 0) {
    cqe.queue_ns = r->dispatched_ns - r->accepted_ns;
    cqe.compute_ns = r->compute_ns;
    cqe.batch_requests = r->batch_requests;
    cqe.batch_groups = r->batch_groups;
    cqe.batch_id = r->batch_id;
  }
  cqe.total_ns = total_ns;
  if (r->status != GEMMD_CODE_OK) copy_message(cqe.message, sizeof cqe.message, r->message);
  return publish_quiet(op->c, &cqe);
}

/* Engine thread: the batch completed OK; the client's CQ has the answer now, and
 * gemm_wake_early wakes it once the whole batch is published. The op (and with it the
 * client and its arena mapping) stays alive until gemm_respond on the loop. */
static void gemm_answer_early(gemmd_request_t *r) {
  ((shm_op_t *)r)->wake_pending = gemm_publish(r, gemmd_now_ns() - r->accepted_ns);
}

static void gemm_wake_early(gemmd_request_t *r) {
  shm_op_t *op = (shm_op_t *)r;
  if (op->wake_pending) wake_client(op->c);
  op->wake_pending = 0;
}

/* Loop thread: the bookkeeping end of every GEMM, and its answer unless already given. */
static void gemm_respond(gemmd_request_t *r) {
  if (!r->answered_early && gemm_publish(r, r->done_ns - r->accepted_ns)) wake_client(((shm_op_t *)r)->c);
  op_done((shm_op_t *)r);
}

static void weight_op_done(void *ctx, int code, const char *message, const gemmd_weight_t *w) {
  shm_op_t *op = ctx;
  gemmd_shm_cqe_t cqe;
  memset(&cqe, 0, sizeof cqe);
  cqe.request_id = op->request_id;
  cqe.status = code;
  cqe.opcode = op->opcode;
  cqe.result = (code == GEMMD_CODE_OK && w != NULL) ? w->id : 0;
  cqe.total_ns = gemmd_now_ns() - op->accepted_ns;
  if (code != GEMMD_CODE_OK) copy_message(cqe.message, sizeof cqe.message, message);
  publish(op->c, &cqe);
  op_done(op);
}

/* The client's pinning: none until its pin map exists. */
static pin_mode_t pin_mode(const shm_client_t *c) { return c->pins_ready ? c->ss->pin_mode : PIN_OFF; }

/* ---- Taking entries ----------------------------------------------------------------------- */

/* The client's arena as its entries may reach it (shm_check.h). */
static gemmd_shm_region_t region_of(const shm_client_t *c) {
  const gemmd_shm_region_t rg = {c->arena, c->data_offset, c->data_bytes, 0};
  return rg;
}

/* A slot for a new region of the client, or NULL when MAX_REGIONS are open or closing. */
static shm_region_t *free_region_slot(shm_client_t *c) {
  for (int i = 0; i < MAX_REGIONS; i++) {
    if (c->regions[i].id == 0) return &c->regions[i];
  }
  return NULL;
}

/* An open region of the client by id, or NULL. */
static shm_region_t *find_region(shm_client_t *c, uint32_t id) {
  for (int i = 0; i < MAX_REGIONS; i++) {
    if (c->regions[i].id == id && !c->regions[i].closing) return &c->regions[i];
  }
  return NULL;
}

static int take_gemm(shm_client_t *c, const gemmd_shm_sqe_t *e, shm_op_t *op, char *msg, size_t n) {
  gemmd_request_t *r = &op->req;
  const gemmd_shm_region_t rg = region_of(c);
  /* A, its scales and D: in the arena (region 0) or in one of the client's open regions. */
  const uint32_t ids[3] = {e->a_region, e->a_scales_region, e->d_region};
  gemmd_shm_region_t views[3];
  const gemmd_shm_region_t *place[3];
  shm_region_t *used[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; i++) {
    place[i] = &rg;
    if (ids[i] == 0) continue;
    used[i] = find_region(c, ids[i]);
    if (used[i] == NULL) {
      snprintf(msg, n, "region %u is not open on this connection", ids[i]);
      return GEMMD_CODE_INVALID_ARGUMENT;
    }
    views[i] = (gemmd_shm_region_t){used[i]->base, 0, used[i]->bytes, used[i]->id};
    place[i] = &views[i];
  }
  const gemmd_shm_places_t at = {place[0], place[1], place[2]};
  gemmd_gemm_operands_t ops;
  uint64_t d_bytes;
  /* On the loop: a weight is looked up here, for its N, which D's bounds need. */
  const int code = gemmd_shm_build_gemm(&rg, &at, e, &c->ss->srv->limits, &c->ss->srv->weights, r,
                                        &ops, &d_bytes, msg, n);
  if (code) return code;
  const int quantizes_a = c->ss->srv->engine->quantizes_a;
  /* A in device memory is read by the device alone: FP8 with its 1×128 scales in device
   * memory too, or BF16/FP16/FP32 without scales for the engine's quantizer. */
  const int a_dev = used[0] != NULL && used[0]->on_device;
  const int sa_dev = used[1] != NULL && used[1]->on_device && ops.a.scale_layout != GEMMD_SCALE_NONE;
  if (a_dev || sa_dev) {
    const int fp8_blocks = gemmd_dtype_is_fp8(ops.a.dtype) && ops.a.scale_layout == GEMMD_SCALE_BLOCK_1X128;
    const int raw = !gemmd_dtype_is_fp8(ops.a.dtype) && !gemmd_request_a_quantizes(&ops.a, quantizes_a);
    if (fp8_blocks ? !(a_dev && sa_dev) : !(raw && a_dev)) {
      snprintf(msg, n, "A in device memory must be FP8 with 1x128 scales, both in device regions, or "
               "BF16/FP16/FP32 without scales");
      return GEMMD_CODE_INVALID_ARGUMENT;
    }
  }
  if (gemmd_request_operands_quantize(&ops, quantizes_a)) {
    op->prep = calloc(1, sizeof *op->prep);
    if (op->prep == NULL) {
      snprintf(msg, n, "out of memory");
      return GEMMD_CODE_RESOURCE_EXHAUSTED;
    }
    *op->prep = (prep_job_t){.op = op, .ops = ops};
  } else {
    const char *failed = "";
    if (gemmd_request_prepare_operands(r, &ops, quantizes_a, &failed) != GEMMD_OK) {
      snprintf(msg, n, "out of memory preparing %s", failed);
      return GEMMD_CODE_RESOURCE_EXHAUSTED;
    }
  }
  r->transport = GEMMD_TRANSPORT_SHM;
  r->conn_id = (1ull << 63) | c->id;
  r->accepted_ns = op->accepted_ns;
  r->deadline_ns = e->timeout_us ? op->accepted_ns + (uint64_t)e->timeout_us * 1000u : 0;
  r->d_dest = (uint8_t *)at.d->arena + e->d_offset;
  r->d_dest_pinned = e->d_region == 0 && pin_mode(c) != PIN_OFF &&
                     gemmd_arena_pins_ready(&c->pins, e->d_offset, d_bytes);
  /* FP8 A is read where the client put it (nothing owned): the engine may DMA it from there */
  r->a_pinned = e->a_region == 0 && r->a != NULL && r->a_owned == NULL && pin_mode(c) != PIN_OFF &&
                gemmd_arena_pins_ready(&c->pins, e->a_offset, (uint64_t)e->m * e->k);
  r->a_device = a_dev;
  r->d_device = used[2] != NULL && used[2]->on_device;
  for (int i = 0; i < 3; i++) { /* held until the op is done (op_done) */
    op->regions[i] = used[i];
    if (used[i] != NULL) used[i]->refs++;
  }
  r->respond = gemm_respond;
  r->answer_early = gemm_answer_early;
  r->wake_early = gemm_wake_early;
  r->respond_ctx = op;
  return GEMMD_CODE_OK;
}

/* A REGISTER_WEIGHT taken from the ring: checked on the loop, its bytes copied (FP8) or
 * quantized (other dtypes) on the uv pool, since both take time in proportion to the weight
 * (a 1 GiB BF16 weight held the loop for seconds). The op holds the client, and with it
 * the arena, until the registration is answered. */
typedef struct {
  uv_work_t work;
  shm_op_t *op;
  gemmd_operand_t src; /* validated, in the arena */
  char name[256];
  gemmd_weight_quantizer_t q; /* the engine's, for BF16/FP16/FP32 */
  gemmd_weight_t *w;          /* made on the pool */
  int code;
  char msg[256];
} reg_job_t;

static int take_register(shm_client_t *c, const gemmd_shm_sqe_t *e, reg_job_t **out, char *msg, size_t n) {
  const gemmd_shm_region_t rg = region_of(c);
  gemmd_operand_t w;
  char name[256];
  const int code = gemmd_shm_check_register(&rg, e, &c->ss->srv->limits, &c->ss->srv->weights, &w, name,
                                            msg, n);
  if (code) return code;
  reg_job_t *j = calloc(1, sizeof *j);
  if (j == NULL) {
    snprintf(msg, n, "out of memory");
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  j->src = w;
  j->q = c->ss->srv->weight_quantizer;
  memcpy(j->name, name, sizeof j->name);
  *out = j;
  return GEMMD_CODE_OK;
}

/* Pool thread: the weight's own bytes (a registered weight outlives the client). */
static void reg_work(uv_work_t *req) {
  reg_job_t *j = req->data;
  gemmd_operand_t w = j->src;
  uint8_t *copy = NULL;
  if (gemmd_dtype_is_fp8(w.dtype)) {
    const size_t data_bytes = (size_t)w.rows * w.cols;
    const size_t ns = gemmd_scale_count(w.scale_layout, w.rows, w.cols);
    copy = malloc(data_bytes + sizeof(float) * ns + 1);
    if (copy == NULL) {
      j->code = GEMMD_CODE_RESOURCE_EXHAUSTED;
      snprintf(j->msg, sizeof j->msg, "out of memory for a %zu-byte weight", data_bytes);
      return;
    }
    memcpy(copy, w.data, data_bytes);
    if (ns) memcpy(copy + data_bytes, w.scales, sizeof(float) * ns);
    w.data = copy;
    w.scales = ns ? (const float *)(const void *)(copy + data_bytes) : NULL;
  }
  const int rc = gemmd_weight_from_operand(&w, copy, copy ? free : NULL, &j->q, &j->w); /* owns copy */
  if (rc == GEMMD_OK && (j->w->name = strdup(j->name)) == NULL) {
    gemmd_weight_free(j->w);
    j->w = NULL;
  }
  if (j->w == NULL) {
    j->code = GEMMD_CODE_RESOURCE_EXHAUSTED;
    snprintf(j->msg, sizeof j->msg, "cannot prepare the weight: %s", gemmd_strerror(rc != GEMMD_OK ? rc : GEMMD_ENOMEM));
  }
}

static void reg_done(uv_work_t *req, int status) {
  reg_job_t *j = req->data;
  shm_op_t *op = j->op;
  shm_client_t *c = op->c;
  c->registering = 0;
  if (j->w == NULL) {
    weight_op_done(op, j->code ? j->code : GEMMD_CODE_INTERNAL, j->msg, NULL);
  } else {
    gemmd_server_register_weight(c->ss->srv, j->w, weight_op_done, op);
  }
  free(j);
}

/* Pool thread: the quantization take_gemm left for later. */
static void prep_work(uv_work_t *req) {
  prep_job_t *j = req->data;
  const int quantizes_a = j->op->c->ss->srv->engine->quantizes_a;
  const char *failed = "";
  if (gemmd_request_prepare_operands(&j->op->req, &j->ops, quantizes_a, &failed) != GEMMD_OK) {
    j->code = GEMMD_CODE_RESOURCE_EXHAUSTED;
    snprintf(j->msg, sizeof j->msg, "out of memory preparing %s", failed);
  }
}

/* Loop: the operands are ready (submit) or could not be made (answer the error). */
static void prep_done(uv_work_t *req, int status) {
  prep_job_t *j = req->data;
  shm_op_t *op = j->op;
  gemmd_request_t *r = &op->req;
  op->prep = NULL;
  const int code = j->code;
  if (code == GEMMD_CODE_OK && status == 0) {
    free(j);
    gemmd_server_submit(op->c->ss->srv, r);
    return;
  }
  r->status = code ? code : GEMMD_CODE_INTERNAL;
  snprintf(r->message, sizeof r->message, "%s", code ? j->msg : "cancelled");
  free(j);
  r->done_ns = gemmd_now_ns();
  gemmd_server_count_refused(op->c->ss->srv, GEMMD_TRANSPORT_SHM, r->status, r->accepted_ns);
  gemm_respond(r);
}

/* One entry, copied out of the ring. Answers it now (refused) or hands it on. */
static void take_entry(shm_client_t *c, const gemmd_shm_sqe_t *e) {
  gemmd_server_t *srv = c->ss->srv;
  const uint64_t accepted = gemmd_now_ns();
  set_busy(c, accepted);
  char msg[512];
  if (!gemmd_shm_reserved_clear(e, c->version)) {
    publish_error(c, e, GEMMD_CODE_INVALID_ARGUMENT, "entry reserved bytes must be 0", accepted);
    return;
  }
  if (e->opcode != GEMMD_SHM_OP_GEMM && (e->a_region | e->a_scales_region | e->d_region) != 0) {
    publish_error(c, e, GEMMD_CODE_INVALID_ARGUMENT, "only GEMM entries name regions", accepted);
    return;
  }
  shm_op_t *op = calloc(1, sizeof *op);
  if (op == NULL) {
    publish_error(c, e, GEMMD_CODE_RESOURCE_EXHAUSTED, "out of memory", accepted);
    return;
  }
  gemmd_request_init(&op->req);
  op->c = c;
  op->opcode = e->opcode;
  op->request_id = e->request_id;
  op->accepted_ns = accepted;
  int code;
  reg_job_t *reg = NULL;
  switch (e->opcode) {
    case GEMMD_SHM_OP_GEMM:
      code = take_gemm(c, e, op, msg, sizeof msg);
      break;
    case GEMMD_SHM_OP_REGISTER_WEIGHT:
      code = take_register(c, e, &reg, msg, sizeof msg);
      break;
    case GEMMD_SHM_OP_UNREGISTER_WEIGHT:
      code = e->weight_id != 0 ? GEMMD_CODE_OK : GEMMD_CODE_INVALID_ARGUMENT;
      snprintf(msg, sizeof msg, "weight_id 0 names no weight");
      break;
    case GEMMD_SHM_OP_WEIGHT_INFO: {
      const gemmd_shm_region_t rg = region_of(c);
      const gemmd_weight_t *iw = NULL;
      code = gemmd_shm_find_weight(&rg, e, &srv->weights, &iw, msg, sizeof msg);
      if (code != GEMMD_CODE_OK) break;
      gemmd_shm_cqe_t cqe;
      memset(&cqe, 0, sizeof cqe);
      cqe.request_id = e->request_id;
      cqe.opcode = e->opcode;
      cqe.result = (uint64_t)iw->n | (uint64_t)iw->k << 32;
      cqe.batch_id = iw->id;
      publish(c, &cqe);
    free(op);
      return;
    }
    default:
      code = GEMMD_CODE_INVALID_ARGUMENT;
      snprintf(msg, sizeof msg, "unknown opcode %u", e->opcode);
      break;
  }
  if (code != GEMMD_CODE_OK) {
    publish_error(c, e, code, msg, accepted);
    gemmd_request_release(&op->req);
    free(op);
    return;
  }
  c->inflight++;
  c->refs++;
  switch (e->opcode) {
    case GEMMD_SHM_OP_GEMM:
      if (op->prep != NULL) {
        op->prep->work.data = op->prep;
        uv_queue_work(&srv->loop, &op->prep->work, prep_work, prep_done);
      } else {
        gemmd_server_submit(srv, &op->req);
      }
      break;
    case GEMMD_SHM_OP_REGISTER_WEIGHT:
      reg->op = op;
      reg->work.data = reg;
      c->registering = 1;
      uv_queue_work(&srv->loop, &reg->work, reg_work, reg_done);
      break;
    default:
      gemmd_server_unregister_weight(srv, e->weight_id, NULL, weight_op_done, op);
      break;
  }
}

static void close_client(shm_client_t *c, const char *why);

/* Takes what the ring holds, up to the in-flight limit and the room left for answers. */
static void drain_ring(shm_client_t *c) {
  if (c->state != ACTIVE || c->draining_ring) return;
  c->draining_ring = 1;
  gemmd_server_t *srv = c->ss->srv;
  gemmd_server_hold_dispatch(srv); /* the whole ring first, then batches */
  for (;;) {
    const uint32_t tail = load_acquire(&c->hdr->sq_tail);
    const uint32_t cq_head = load_acquire(&c->hdr->cq_head);
    if ((uint32_t)(tail - c->sq_head) > c->entries) {
      close_client(c, "sq_tail moved past the ring");
      break;
    }
    if ((uint32_t)(c->cq_tail - cq_head) > c->entries) {
      close_client(c, "cq_head moved past cq_tail");
      break;
    }
    if (tail == c->sq_head || c->inflight >= c->max_inflight ||
        (uint32_t)(c->cq_tail - cq_head) + c->inflight >= c->entries) {
      break;
    }
    gemmd_shm_sqe_t e;
    memcpy(&e, c->arena + c->sq_offset + (size_t)(c->sq_head & (c->entries - 1)) * GEMMD_SHM_ENTRY_BYTES,
           sizeof e);
    if (e.opcode == GEMMD_SHM_OP_REGISTER_WEIGHT && c->registering) break; /* one at a time */
    c->sq_head++;
    store_release(&c->hdr->sq_head, c->sq_head);
    take_entry(c, &e);
    if (c->state != ACTIVE) break;
  }
  c->draining_ring = 0;
  gemmd_server_release_dispatch(srv);
}

static void on_doorbell(uv_poll_t *h, int status, int events) {
  shm_client_t *c = h->data;
  uint64_t v;
  while (read(c->sq_efd, &v, sizeof v) > 0) {
  }
  drain_ring(c);
}

/* ---- Client lifetime ----------------------------------------------------------------------- */

static void maybe_done(gemmd_shm_server_t *ss) {
  if (ss->stopping && ss->listen_closed && ss->timers_open == 0 && ss->clients == NULL && ss->done != NULL) {
    void (*done)(gemmd_server_t *) = ss->done;
    gemmd_server_t *srv = ss->srv;
    srv->shm = NULL;
    free(ss);
    done(srv);
  }
}

/* ---- Pinning arenas off the loop ------------------------------------------------------------ */

static void client_hold(void *ctx) { ((shm_client_t *)ctx)->refs++; }
static void client_release(void *ctx) { client_unref(ctx); }

/* Sets up the arena's pin map; with --shm-pin-arenas all (or a test's delay standing in
 * for registration) every piece is queued now, else pieces are pinned as requests use them. */
static int start_pinning(shm_client_t *c) {
  gemmd_server_t *srv = c->ss->srv;
  if (gemmd_arena_pins_init(&c->pins, &srv->loop, c->ss->pin_mode == PIN_OFF ? NULL : srv->engine, c->arena,
                            c->arena_bytes, srv->cfg->test_shm_pin_delay_us, client_hold, client_release, c,
                            c->id, &c->ss->pinned_bytes) != GEMMD_OK) {
    return GEMMD_ENOMEM;
  }
  c->pins_ready = 1;
  if (pin_mode(c) == PIN_ALL || srv->cfg->test_shm_pin_delay_us > 0) gemmd_arena_pins_want_all(&c->pins);
  return GEMMD_OK;
}

static void unpin_work(uv_work_t *w) {
  shm_client_t *c = w->data;
  gemmd_arena_pins_unregister(&c->pins);
  munmap(c->arena, c->arena_bytes);
}

static void unpin_done(uv_work_t *w, int status) {
  (void)status;
  shm_client_t *c = w->data;
  gemmd_arena_pins_free(&c->pins);
  free(c);
}

static void on_client_handle_closed(uv_handle_t *h) {
  shm_client_t *c = h->data;
  if (--c->open_handles > 0) return;
  gemmd_shm_server_t *ss = c->ss;
  for (shm_client_t **p = &ss->clients; *p != NULL; p = &(*p)->next) {
    if (*p == c) {
      *p = c->next;
      break;
    }
  }
  ss->n_clients--;
  for (int i = 0; i < MAX_REGIONS; i++) { /* no request is in flight any more */
    const shm_region_t *g = &c->regions[i];
    if (g->id != 0) ss->srv->engine->ops->region_close(ss->srv->engine, g->base, g->bytes);
  }
  if (c->arena != NULL) ss->arena_bytes_total -= c->arena_bytes;
  if (c->sock >= 0) close(c->sock);
  if (c->sq_efd >= 0) close(c->sq_efd);
  if (c->cq_efd >= 0) close(c->cq_efd);
  pthread_mutex_destroy(&c->cq_mu);
  if (c->pins_ready && gemmd_arena_pins_retire(&c->pins)) {
    /* Unpinning takes as long as pinning: on the pool too, which then unmaps and frees. */
    c->unpin_work.data = c;
    uv_queue_work(&ss->srv->loop, &c->unpin_work, unpin_work, unpin_done);
  } else {
    if (c->arena != NULL) munmap(c->arena, c->arena_bytes);
    if (c->pins_ready) gemmd_arena_pins_free(&c->pins);
    free(c);
  }
  maybe_done(ss);
}

static void client_unref(shm_client_t *c) {
  if (--c->refs > 0) return;
  c->open_handles = 1 + c->sq_poll_inited;
  uv_close((uv_handle_t *)&c->sock_poll, on_client_handle_closed);
  if (c->sq_poll_inited) uv_close((uv_handle_t *)&c->sq_poll, on_client_handle_closed);
}

/* A client counts as busy from an entry until it has had nothing in flight for this long:
 * a model worker whose GEMMs come a few ms apart, between its other work, stays busy (and
 * the headers do not flip at every step); one that has paused no longer makes the others
 * block. The sweep's period bounds how late that is noticed. */
#define BUSY_WINDOW_NS 20000000ull
enum { BUSY_SWEEP_MS = 5 };

/* How many busy clients may spin-wait: the configured number, or the CPUs gemmd may
 * run on less the threads of gemmd that poll, at least 1. */
static unsigned spinning_clients(const gemmd_config_t *cfg) {
  if (cfg->shm_spinning_clients > 0) return (unsigned)cfg->shm_spinning_clients;
  const long cpus = gemmd_cpus_usable();
  return cpus > GEMMD_POLLING_THREADS + 1 ? (unsigned)(cpus - GEMMD_POLLING_THREADS) : 1u;
}

/* After the count of busy clients changed: when crowding starts or ends, every active
 * client's header says so (a client that spins while others need the cores slows them
 * all: docs/shm-protocol.md §3). */
static void update_crowding(gemmd_shm_server_t *ss) {
  const int crowded = ss->n_busy > ss->spinning_clients;
  if (crowded == ss->crowded) return;
  ss->crowded = crowded;
  for (shm_client_t *c = ss->clients; c != NULL; c = c->next) {
    if (c->state == ACTIVE) store_release(&c->hdr->crowded, (uint32_t)crowded);
  }
}

static void set_idle(shm_client_t *c) {
  if (!c->busy) return;
  c->busy = 0;
  if (--c->ss->n_busy == 0) uv_timer_stop(&c->ss->busy_sweep);
  update_crowding(c->ss);
}

static void on_busy_sweep(uv_timer_t *t) {
  gemmd_shm_server_t *ss = t->data;
  const uint64_t now = gemmd_now_ns();
  for (shm_client_t *c = ss->clients; c != NULL; c = c->next) {
    if (c->busy && c->inflight == 0 && now - c->last_entry_ns > BUSY_WINDOW_NS) set_idle(c);
  }
}

/* Loop thread, for every entry taken from the client's ring. */
static void set_busy(shm_client_t *c, uint64_t now) {
  c->last_entry_ns = now;
  if (c->busy) return;
  c->busy = 1;
  if (c->ss->n_busy++ == 0 && !c->ss->stopping) {
    uv_timer_start(&c->ss->busy_sweep, on_busy_sweep, BUSY_SWEEP_MS, BUSY_SWEEP_MS);
  }
  update_crowding(c->ss);
}

static void close_client(shm_client_t *c, const char *why) {
  if (c->state == CLOSING) return;
  if (c->state == HANDSHAKE) c->ss->n_handshaking--;
  const int was_active = c->state == ACTIVE;
  if (was_active) {
    c->ss->n_active--;
    set_idle(c);
    gemmd_log(GEMMD_LOG_INFO, "shm client gone", "client=%u pid=%d uid=%u reason=\"%s\" in_flight=%u",
              c->id, (int)c->peer.pid, (unsigned)c->peer.uid, why, c->inflight);
    uv_poll_stop(&c->sq_poll);
  }
  pthread_mutex_lock(&c->cq_mu);
  c->state = CLOSING;
  pthread_mutex_unlock(&c->cq_mu);
  uv_poll_stop(&c->sock_poll);
  client_unref(c); /* the connection's reference; in-flight operations hold theirs */
}

static void on_socket(uv_poll_t *h, int status, int events);

/* Sends a WELCOME that refuses (never blocks); <0 if the peer could not take it. */
static ssize_t send_refusal(int fd, int code, const char *msg) {
  gemmd_shm_welcome_t w;
  memset(&w, 0, sizeof w);
  memcpy(w.magic, GEMMD_SHM_MAGIC, 8);
  w.version = GEMMD_SHM_VERSION;
  w.status = code;
  snprintf(w.message, sizeof w.message, "%s", msg);
  return send(fd, &w, sizeof w, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void refuse(shm_client_t *c, int code, const char *msg) {
  if (send_refusal(c->sock, code, msg) < 0) {
    gemmd_log(GEMMD_LOG_DEBUG, "shm refusal not delivered", "errno=%d", errno);
  }
  gemmd_log(GEMMD_LOG_WARN, "shm client refused", "pid=%d uid=%u gid=%u code=%d reason=\"%s\"",
            (int)c->peer.pid, (unsigned)c->peer.uid, (unsigned)c->peer.gid, code, msg);
  close_client(c, msg);
}

static int allowed(const gemmd_shm_server_t *ss, const struct ucred *cr) {
  if (cr->uid == 0 || cr->uid == getuid()) return 1;
  for (int i = 0; i < ss->n_uids; i++) {
    if (ss->uids[i] == cr->uid) return 1;
  }
  for (int i = 0; i < ss->n_gids; i++) {
    if (ss->gids[i] == cr->gid) return 1;
  }
  return 0;
}

/* Makes the arena and doorbells; 0 or a gRPC code with msg. */
static int make_arena(shm_client_t *c, uint64_t bytes, uint32_t entries, int *memfd, char *msg,
                      size_t n) {
  char name[32];
  snprintf(name, sizeof name, "gemmd-shm-%u", c->id);
  *memfd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (*memfd < 0 || ftruncate(*memfd, (off_t)bytes) != 0 ||
      fcntl(*memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    snprintf(msg, n, "cannot make a %" PRIu64 "-byte arena: %s", bytes, strerror(errno));
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *memfd, 0);
  c->sq_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  c->cq_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (p == MAP_FAILED || c->sq_efd < 0 || c->cq_efd < 0) {
    if (p != MAP_FAILED) munmap(p, bytes);
    snprintf(msg, n, "cannot map the arena or make doorbells: %s", strerror(errno));
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  c->arena = p;
  c->arena_bytes = bytes;
  c->ss->arena_bytes_total += bytes;
  c->entries = entries;
  c->sq_offset = GEMMD_SHM_HEADER_BYTES;
  c->cq_offset = c->sq_offset + entries * GEMMD_SHM_ENTRY_BYTES;
  c->data_offset = c->cq_offset + (uint64_t)entries * GEMMD_SHM_ENTRY_BYTES;
  c->data_bytes = bytes - c->data_offset;
  gemmd_shm_header_t *h = (gemmd_shm_header_t *)(void *)c->arena;
  memcpy(h->magic, GEMMD_SHM_MAGIC, 8);
  h->version = c->version;
  h->header_bytes = GEMMD_SHM_HEADER_BYTES;
  h->arena_bytes = bytes;
  h->sq_offset = c->sq_offset;
  h->sq_entries = entries;
  h->cq_offset = c->cq_offset;
  h->cq_entries = entries;
  h->data_offset = c->data_offset;
  h->data_bytes = c->data_bytes;
  h->client_id = c->id;
  h->max_inflight = c->max_inflight;
  h->server_idle.value = 1; /* v1: gemmd always waits on the doorbell */
  c->hdr = h;
  return GEMMD_CODE_OK;
}

/* Arena bytes the clients of one uid hold. */
static uint64_t arena_bytes_of(const gemmd_shm_server_t *ss, uid_t uid) {
  uint64_t n = 0;
  for (const shm_client_t *c = ss->clients; c != NULL; c = c->next) {
    if (c->arena != NULL && c->peer.uid == uid) n += c->arena_bytes;
  }
  return n;
}

static void handshake(shm_client_t *c) {
  gemmd_shm_server_t *ss = c->ss;
  const gemmd_config_t *cfg = ss->srv->cfg;
  /* Room for more than a HELLO, so that a longer message is seen as such, not cut. */
  uint8_t in[2 * sizeof(gemmd_shm_hello_t)];
  const ssize_t got = recv(c->sock, in, sizeof in, MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (got <= 0) {
    close_client(c, "closed before HELLO");
    return;
  }
  char msg[224];
  gemmd_shm_hello_t hello;
  int code = gemmd_shm_hello_parse(in, (size_t)got, &hello, msg, sizeof msg);
  if (code != GEMMD_CODE_OK) {
    refuse(c, code, msg);
    return;
  }
  if (!allowed(ss, &c->peer)) {
    snprintf(msg, sizeof msg,
             "uid %u gid %u is not allowed on this socket (gemmd runs as uid %u; see "
             "--shm-allow-uids and --shm-allow-gids)",
             (unsigned)c->peer.uid, (unsigned)c->peer.gid, (unsigned)getuid());
    refuse(c, GEMMD_CODE_PERMISSION_DENIED, msg);
    return;
  }
  if (ss->srv->draining) {
    refuse(c, GEMMD_CODE_UNAVAILABLE, "gemmd is shutting down");
    return;
  }
  if (ss->n_active >= (unsigned)cfg->shm_max_clients) {
    snprintf(msg, sizeof msg, "%u clients are connected already (--shm-max-clients)", ss->n_active);
    refuse(c, GEMMD_CODE_RESOURCE_EXHAUSTED, msg);
    return;
  }
  uint64_t bytes;
  uint32_t entries;
  code = gemmd_shm_hello_geometry(&hello, cfg->shm_arena_bytes, &bytes, &entries, msg, sizeof msg);
  if (code != GEMMD_CODE_OK) {
    refuse(c, code, msg);
    return;
  }
  if (ss->arena_bytes_total + bytes > cfg->shm_arenas_bytes) {
    snprintf(msg, sizeof msg,
             "an arena of %" PRIu64 " bytes would pass --shm-arenas-bytes (%" PRIu64
             " bytes for all clients, %" PRIu64 " in use); ask for a smaller one or retry later",
             bytes, cfg->shm_arenas_bytes, ss->arena_bytes_total);
    refuse(c, GEMMD_CODE_RESOURCE_EXHAUSTED, msg);
    return;
  }
  const uint64_t of_uid = arena_bytes_of(ss, c->peer.uid);
  if (cfg->shm_arenas_bytes_per_uid > 0 && of_uid + bytes > cfg->shm_arenas_bytes_per_uid) {
    snprintf(msg, sizeof msg,
             "an arena of %" PRIu64 " bytes would pass --shm-arenas-bytes-per-uid (%" PRIu64
             " bytes; uid %u holds %" PRIu64 ")", bytes, cfg->shm_arenas_bytes_per_uid,
             (unsigned)c->peer.uid, of_uid);
    refuse(c, GEMMD_CODE_RESOURCE_EXHAUSTED, msg);
    return;
  }
  c->max_inflight = entries < (uint32_t)cfg->max_inflight_per_client
                        ? entries
                        : (uint32_t)cfg->max_inflight_per_client;
  int memfd = -1;
  c->version = hello.version;
  code = make_arena(c, bytes, entries, &memfd, msg, sizeof msg);
  if (code != GEMMD_CODE_OK) {
    if (memfd >= 0) close(memfd);
    refuse(c, code, msg);
    return;
  }
  /* Counted, and its header's crowded word set, before the client can wait for anything (a
   * WELCOME that cannot be sent takes the count back). */
  ss->n_active++;
  store_release(&c->hdr->crowded, (uint32_t)ss->crowded);
  gemmd_shm_welcome_t w;
  memset(&w, 0, sizeof w);
  memcpy(w.magic, GEMMD_SHM_MAGIC, 8);
  w.version = hello.version;
  w.arena_bytes = bytes;
  w.client_id = c->id;
  w.max_inflight = c->max_inflight;
  const int fds[3] = {memfd, c->sq_efd, c->cq_efd};
  union {
    char buf[CMSG_SPACE(sizeof fds)];
    struct cmsghdr align;
  } ctl;
  struct iovec iov = {&w, sizeof w};
  struct msghdr mh = {0};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = ctl.buf;
  mh.msg_controllen = sizeof ctl.buf;
  struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(cm), fds, sizeof fds);
  const ssize_t sent = sendmsg(c->sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
  close(memfd); /* the mapping and the client's copy keep the arena */
  if (sent != (ssize_t)sizeof w) {
    ss->n_active--;
    close_client(c, "WELCOME could not be sent");
    return;
  }
  c->state = ACTIVE;
  ss->n_handshaking--;
  uv_poll_init(&ss->srv->loop, &c->sq_poll, c->sq_efd);
  c->sq_poll_inited = 1;
  c->sq_poll.data = c;
  uv_poll_start(&c->sq_poll, UV_READABLE, on_doorbell);
  if (start_pinning(c) != GEMMD_OK) {
    gemmd_log(GEMMD_LOG_WARN, "shm arena not pinned", "client=%u: out of memory for its pin map", c->id);
  }
  gemmd_log(GEMMD_LOG_INFO, "shm client", "client=%u pid=%d uid=%u arena_bytes=%" PRIu64
            " entries=%u max_inflight=%u", c->id, (int)c->peer.pid, (unsigned)c->peer.uid, bytes,
            entries, c->max_inflight);
}

/* ---- Regions (version 2, docs/shm-protocol.md §7) ------------------------------------------ */

/* A REGION_OPEN on the uv pool: the engine maps the region there (opening a CUDA IPC handle
 * takes a while); the loop then installs it and replies. */
typedef struct {
  uv_work_t work;
  shm_client_t *c;
  gemmd_shm_ctl_t m;
  int fd;
  void *base;
  int on_device;
  int code;
  gemmd_shm_ctl_reply_t reply;
} region_job_t;

static void send_reply(shm_client_t *c, gemmd_shm_ctl_reply_t *r, int code);
static void on_socket(uv_poll_t *h, int status, int events);

static void region_open_work(uv_work_t *w) {
  region_job_t *j = w->data;
  gemmd_engine_t *eng = j->c->ss->srv->engine;
  j->code = eng->ops->region_open(eng, (int)j->m.kind, j->fd, j->m.handle, j->m.bytes, &j->base,
                                  &j->on_device, j->reply.message, sizeof j->reply.message);
}

static void region_open_done(uv_work_t *w, int status) {
  region_job_t *j = w->data;
  shm_client_t *c = j->c;
  gemmd_engine_t *eng = c->ss->srv->engine;
  if (j->fd >= 0) close(j->fd); /* the mapping keeps what it needs */
  c->opening_region = 0;
  int code = status == 0 ? j->code : GEMMD_CODE_UNAVAILABLE;
  shm_region_t *g = free_region_slot(c);
  if (code == GEMMD_CODE_OK && (c->state != ACTIVE || g == NULL)) {
    eng->ops->region_close(eng, j->base, j->m.bytes); /* the client went meanwhile */
    code = GEMMD_CODE_UNAVAILABLE;
  } else if (code == GEMMD_CODE_OK) {
    *g = (shm_region_t){++c->next_region_id, 0, 0, j->base, j->m.bytes, j->on_device};
    j->reply.region_id = g->id;
    j->reply.bytes = g->bytes;
  }
  if (c->state == ACTIVE) {
    send_reply(c, &j->reply, code);
    if (c->state == ACTIVE) uv_poll_start(&c->sock_poll, UV_READABLE | UV_DISCONNECT, on_socket);
  }
  free(j);
  client_unref(c);
}

/* Checks a REGION_OPEN and hands it to the pool (1), or refuses it in *out (0 with *code). */
static int open_region(shm_client_t *c, const gemmd_shm_ctl_t *m, int *fd,
                       gemmd_shm_ctl_reply_t *out, int *code) {
  gemmd_engine_t *eng = c->ss->srv->engine;
  *code = GEMMD_CODE_INVALID_ARGUMENT;
  if (eng->ops->region_open == NULL) {
    snprintf(out->message, sizeof out->message, "this gemmd's %s backend takes no regions yet",
             eng->backend);
    *code = GEMMD_CODE_UNIMPLEMENTED;
    return 0;
  }
  if (m->kind == GEMMD_SHM_REGION_FD && *fd < 0) {
    snprintf(out->message, sizeof out->message, "a region of kind %d needs its fd (SCM_RIGHTS)",
             GEMMD_SHM_REGION_FD);
    return 0;
  }
  if (free_region_slot(c) == NULL) {
    snprintf(out->message, sizeof out->message, "%d regions are open or closing on this connection",
             MAX_REGIONS);
    *code = GEMMD_CODE_RESOURCE_EXHAUSTED;
    return 0;
  }
  region_job_t *j = calloc(1, sizeof *j);
  if (j == NULL) {
    snprintf(out->message, sizeof out->message, "out of memory");
    *code = GEMMD_CODE_RESOURCE_EXHAUSTED;
    return 0;
  }
  j->c = c;
  j->m = *m;
  j->fd = *fd;
  j->reply = *out;
  j->work.data = j;
  *fd = -1; /* the job's now */
  c->refs++;
  c->opening_region = 1;
  /* Until the reply, the socket is watched only for the client going. */
  uv_poll_start(&c->sock_poll, UV_DISCONNECT, on_socket);
  uv_queue_work(&c->ss->srv->loop, &j->work, region_open_work, region_open_done);
  return 1;
}

static int close_region(shm_client_t *c, uint32_t id, gemmd_shm_ctl_reply_t *out) {
  shm_region_t *g = find_region(c, id);
  if (g == NULL) {
    snprintf(out->message, sizeof out->message, "region %u is not open on this connection", id);
    return GEMMD_CODE_NOT_FOUND;
  }
  out->region_id = id;
  g->closing = 1;
  g->refs++;
  region_unref(c, g); /* unmapped now, or when its last request is done */
  return GEMMD_CODE_OK;
}

/* One control message of a version-2 client: a close answered at once, an open once the
 * pool has mapped the region. An fd beyond the one a REGION_OPEN carries is closed unread.
 * The ring is drained first, so that entries the client pushed before the message are
 * taken before it (a GEMM sent just before its region's close still finds the region). */
static void on_control(shm_client_t *c) {
  drain_ring(c);
  if (c->state != ACTIVE) return;
  gemmd_shm_ctl_t m;
  int fds[4] = {-1, -1, -1, -1};
  union {
    char buf[CMSG_SPACE(sizeof fds)];
    struct cmsghdr align;
  } ctl;
  struct iovec iov = {&m, sizeof m};
  struct msghdr mh = {0};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = ctl.buf;
  mh.msg_controllen = sizeof ctl.buf;
  memset(&m, 0, sizeof m);
  const ssize_t got = recvmsg(c->sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (got <= 0) {
    close_client(c, got == 0 ? "socket closed" : "socket error");
    return;
  }
  int n_fds = 0;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    const size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k && n_fds < 4; i++) {
      memcpy(&fds[n_fds++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
    }
  }
  for (int i = 1; i < n_fds; i++) close(fds[i]);
  gemmd_shm_ctl_reply_t r;
  memset(&r, 0, sizeof r);
  r.op = m.op;
  r.tag = m.tag;
  gemmd_shm_ctl_t parsed;
  const int truncated = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  int code = gemmd_shm_ctl_parse(&m, (size_t)got, truncated, &parsed, r.message, sizeof r.message);
  if (code == GEMMD_CODE_OK && parsed.op == GEMMD_SHM_CTL_REGION_OPEN) {
    if (open_region(c, &parsed, &fds[0], &r, &code)) return; /* answered when the pool is done */
  } else if (code == GEMMD_CODE_OK) {
    code = close_region(c, parsed.region_id, &r);
  }
  if (fds[0] >= 0) close(fds[0]);
  send_reply(c, &r, code);
}

/* The client waits for each reply before its next message; one that does not read them
 * fills its socket and is let go. */
static void send_reply(shm_client_t *c, gemmd_shm_ctl_reply_t *r, int code) {
  r->status = code;
  if (code != GEMMD_CODE_OK) r->region_id = 0;
  if (send(c->sock, r, sizeof *r, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof *r) {
    close_client(c, "control reply could not be sent");
  }
}

static void on_socket(uv_poll_t *h, int status, int events) {
  shm_client_t *c = h->data;
  if (c->state == HANDSHAKE) {
    handshake(c);
    return;
  }
  if (c->state == ACTIVE && c->opening_region) { /* polled for the client going only */
    if (status < 0 || (events & UV_DISCONNECT)) close_client(c, "socket closed");
    return;
  }
  if (c->state == ACTIVE && c->version >= GEMMD_SHM_VERSION_2 && status >= 0) {
    on_control(c);
    return;
  }
  /* After a version-1 handshake the socket only says whether the client is still there. */
  char buf[256];
  const ssize_t got = recv(c->sock, buf, sizeof buf, MSG_DONTWAIT);
  if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR) || status < 0) {
    close_client(c, got == 0 ? "socket closed" : "socket error");
  }
}

static void on_listen(uv_poll_t *h, int status, int events);

static void on_accept_resume(uv_timer_t *t) {
  gemmd_shm_server_t *ss = t->data;
  if (!ss->stopping) uv_poll_start(&ss->listen_poll, UV_READABLE, on_listen);
}

/* accept() failed for want of fds or memory: the connection stays in the backlog and the
 * listener stays readable, so polling it again at once would spin the loop. */
static void pause_accepting(gemmd_shm_server_t *ss, int err) {
  ss->accept_failures++;
  const uint64_t now = gemmd_now_ns();
  if (now - ss->last_accept_log_ns > 1000000000ull) {
    ss->last_accept_log_ns = now;
    gemmd_log(GEMMD_LOG_WARN, "shm accept failing", "errno=%d reason=\"%s\" failures=%" PRIu64
              " (connections wait in the backlog; accepting again in 100 ms)", err, strerror(err),
              ss->accept_failures);
  }
  uv_poll_stop(&ss->listen_poll);
  uv_timer_start(&ss->accept_pause, on_accept_resume, 100, 0);
}

/* HELLOs in progress of one uid. */
static unsigned handshakes_of(const gemmd_shm_server_t *ss, uid_t uid) {
  unsigned n = 0;
  for (const shm_client_t *c = ss->clients; c != NULL; c = c->next) n += c->state == HANDSHAKE && c->peer.uid == uid;
  return n;
}

/* Turns a connection away before it holds anything: a refusal it can read, then close. A
 * HELLO already queued is read first: closing a socket with unread data resets the peer's
 * end, and the client would see the reset instead of the refusal. */
static void turn_away(int fd, int code, const char *msg) {
  (void)send_refusal(fd, code, msg); /* if it cannot be sent, the client sees the close */
  char sink[2 * sizeof(gemmd_shm_hello_t)];
  for (int i = 0; i < 4 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++) {
  }
  close(fd);
}

/* Closes connections that have not said HELLO within --shm-hello-timeout-ms. */
static void on_hello_sweep(uv_timer_t *t) {
  gemmd_shm_server_t *ss = t->data;
  const uint64_t now = gemmd_now_ns(), limit = (uint64_t)ss->srv->cfg->shm_hello_timeout_ms * 1000000u;
  for (shm_client_t *c = ss->clients, *next; c != NULL; c = next) {
    next = c->next;
    if (c->state == HANDSHAKE && now - c->accepted_ns > limit) {
      gemmd_log(GEMMD_LOG_INFO, "shm client refused", "pid=%d uid=%u reason=\"no HELLO within "
                "--shm-hello-timeout-ms\"", (int)c->peer.pid, (unsigned)c->peer.uid);
      close_client(c, "no HELLO in time");
    }
  }
}

static void on_listen(uv_poll_t *h, int status, int events) {
  gemmd_shm_server_t *ss = h->data;
  const gemmd_config_t *cfg = ss->srv->cfg;
  for (;;) {
    const int fd = accept4(ss->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        pause_accepting(ss, errno);
      }
      return; /* EAGAIN, or a client that gave up */
    }
    struct ucred peer;
    socklen_t len = sizeof peer;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || len != sizeof peer) {
      close(fd); /* without its credentials a peer is no one gemmd can allow */
      continue;
    }
    if (ss->n_handshaking >= (unsigned)cfg->shm_max_handshakes ||
        handshakes_of(ss, peer.uid) >= (unsigned)cfg->shm_max_handshakes_per_uid) {
      char msg[160];
      snprintf(msg, sizeof msg, "%u connections are between connect and HELLO (%u of uid %u; "
               "--shm-max-handshakes, --shm-max-handshakes-per-uid); retry", ss->n_handshaking,
               handshakes_of(ss, peer.uid), (unsigned)peer.uid);
      /* UNAVAILABLE: a burst of workers starting together passes this bound, and the
       * clients try again after a backoff (gRPC's meaning: transient, retry). */
      turn_away(fd, GEMMD_CODE_UNAVAILABLE, msg);
      continue;
    }
    shm_client_t *c = calloc(1, sizeof *c);
    if (c == NULL) {
      close(fd);
      continue;
    }
    c->ss = ss;
    c->sock = fd;
    c->sq_efd = c->cq_efd = -1;
    c->id = ++ss->next_id;
    c->refs = 1;
    c->state = HANDSHAKE;
    c->peer = peer;
    c->accepted_ns = gemmd_now_ns();
    pthread_mutex_init(&c->cq_mu, NULL);
    c->next = ss->clients;
    ss->clients = c;
    ss->n_clients++;
    ss->n_handshaking++;
    uv_poll_init(&ss->srv->loop, &c->sock_poll, fd);
    c->sock_poll.data = c;
    if (ss->stopping) {
      close_client(c, "gemmd is shutting down");
      continue;
    }
    uv_poll_start(&c->sock_poll, UV_READABLE | UV_DISCONNECT, on_socket);
  }
}

/* ---- Start and stop ------------------------------------------------------------------------ */

static int parse_ids(const char *list, unsigned *out, int *n, const char *what, char *err,
                     size_t errlen) {
  *n = 0;
  const char *p = list;
  while (*p) {
    char *end;
    const unsigned long v = strtoul(p, &end, 10);
    if (end == p || v > UINT32_MAX || *n >= MAX_IDS || (*end != ',' && *end != '\0')) {
      snprintf(err, errlen, "--%s: '%s' is not a comma-separated list of up to %d ids", what, list,
               MAX_IDS);
      return GEMMD_EINVAL;
    }
    out[(*n)++] = (unsigned)v;
    p = *end == ',' ? end + 1 : end;
  }
  return GEMMD_OK;
}

static void mkdir_parent(const char *path) {
  char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash == NULL || slash == dir) return;
  *slash = '\0';
  mkdir(dir, 0755);
}

int gemmd_shm_start(gemmd_server_t *srv, gemmd_shm_server_t **out, char *err, size_t errlen) {
  const gemmd_config_t *cfg = srv->cfg;
  gemmd_shm_server_t *ss = calloc(1, sizeof *ss);
  if (ss == NULL) {
    snprintf(err, errlen, "out of memory");
    return GEMMD_ENOMEM;
  }
  ss->pin_mode = strcmp(cfg->shm_pin_arenas, "all") == 0    ? PIN_ALL
                 : strcmp(cfg->shm_pin_arenas, "used") == 0 ? PIN_USED
                                                            : PIN_OFF;
  ss->spinning_clients = spinning_clients(cfg);
  ss->srv = srv;
  ss->listen_fd = -1;
  if (parse_ids(cfg->shm_allow_uids, (unsigned *)ss->uids, &ss->n_uids, "shm-allow-uids", err,
                errlen) != GEMMD_OK ||
      parse_ids(cfg->shm_allow_gids, (unsigned *)ss->gids, &ss->n_gids, "shm-allow-gids", err,
                errlen) != GEMMD_OK) {
    free(ss);
    return GEMMD_EINVAL;
  }
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(cfg->shm_socket) >= sizeof addr.sun_path) {
    snprintf(err, errlen, "--shm-socket: path longer than %zu bytes", sizeof addr.sun_path - 1);
    free(ss);
    return GEMMD_EINVAL;
  }
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", cfg->shm_socket);
  snprintf(ss->path, sizeof ss->path, "%s", cfg->shm_socket);
  mkdir_parent(cfg->shm_socket);
  ss->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  /* A socket file left by a gemmd that died is removed; a live one is not stolen. */
  const int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (probe >= 0) {
    if (connect(probe, (struct sockaddr *)&addr, sizeof addr) == 0) {
      close(probe);
      snprintf(err, errlen, "%s: another gemmd is listening there", cfg->shm_socket);
      close(ss->listen_fd);
      free(ss);
      return GEMMD_EIO;
    }
    if (errno == ECONNREFUSED) unlink(cfg->shm_socket);
    close(probe);
  }
  /* The socket file is made rw for everyone by bind itself (the umask it runs under), not
   * chmod'ed by path afterwards, which another process could have swapped meanwhile;
   * SO_PEERCRED and the allow-lists decide who may use it. */
  const mode_t old_umask = umask(0111);
  const int bound = ss->listen_fd >= 0 ? bind(ss->listen_fd, (struct sockaddr *)&addr, sizeof addr) : -1;
  umask(old_umask);
  if (ss->listen_fd < 0 || bound != 0 || listen(ss->listen_fd, 64) != 0) {
    snprintf(err, errlen, "cannot listen on %s: %s (use --shm-socket PATH, or --shm-socket '' "
             "for no shared memory)", cfg->shm_socket, strerror(errno));
    if (ss->listen_fd >= 0) close(ss->listen_fd);
    free(ss);
    return GEMMD_EIO;
  }
  uv_poll_init(&srv->loop, &ss->listen_poll, ss->listen_fd);
  ss->listen_poll.data = ss;
  uv_poll_start(&ss->listen_poll, UV_READABLE, on_listen);
  uv_timer_init(&srv->loop, &ss->hello_sweep);
  uv_timer_init(&srv->loop, &ss->accept_pause);
  uv_timer_init(&srv->loop, &ss->busy_sweep);
  ss->hello_sweep.data = ss->accept_pause.data = ss->busy_sweep.data = ss;
  ss->timers_open = 3;
  const uint64_t sweep_ms = cfg->shm_hello_timeout_ms / 4 + 1;
  uv_timer_start(&ss->hello_sweep, on_hello_sweep, sweep_ms, sweep_ms);
  *out = ss;
  return GEMMD_OK;
}

static void on_listen_closed(uv_handle_t *h) {
  gemmd_shm_server_t *ss = h->data;
  close(ss->listen_fd);
  unlink(ss->path);
  ss->listen_closed = 1;
  maybe_done(ss);
}

static void on_timer_closed(uv_handle_t *h) {
  gemmd_shm_server_t *ss = h->data;
  ss->timers_open--;
  maybe_done(ss);
}

void gemmd_shm_stop(gemmd_shm_server_t *ss, void (*done)(gemmd_server_t *srv)) {
  ss->stopping = 1;
  ss->done = done;
  uv_close((uv_handle_t *)&ss->hello_sweep, on_timer_closed);
  uv_close((uv_handle_t *)&ss->accept_pause, on_timer_closed);
  uv_close((uv_handle_t *)&ss->busy_sweep, on_timer_closed);
  uv_close((uv_handle_t *)&ss->listen_poll, on_listen_closed);
  for (shm_client_t *c = ss->clients, *next; c != NULL; c = next) {
    next = c->next;
    close_client(c, "gemmd is shutting down");
  }
}

unsigned gemmd_shm_clients(const gemmd_shm_server_t *ss) { return ss ? ss->n_active : 0; }

uint64_t gemmd_shm_pinned_bytes(const gemmd_shm_server_t *ss) { return ss ? ss->pinned_bytes : 0; }
