/* libgemmclient's GemmStream (gemmclient.h).
 *
 * Over gRPC: one call on the client's async queue (completion_queues.h). Three chains of
 * batches run on it, each with its tag: the status (SEND_INITIAL_METADATA with
 * RECV_STATUS_ON_CLIENT, started at open, completes when the call ends); the receives (one
 * RECV_MESSAGE after another, each answer handed to `done` on the loop's thread); the sends
 * (gRPC allows one SEND_MESSAGE at a time, so a sender waits for the previous one; the last
 * send is the half-close). Requests in flight are kept with their send time, so each answer
 * gets its round trip and, should the stream end early, every unanswered request still
 * gets its `done`, with UNAVAILABLE.
 * Over shared memory: each request is an async call whose `done` passes through here. */
#include <grpc/byte_buffer.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "client/lib/endpoints.h"
#include "client/lib/rpc.h"
#include "client/lib/status.h"
#include "client/lib/wire.h"

typedef struct {
  uint64_t request_id, sent_ns;
} pending_t;

struct gemmd_gemm_stream_s {
  gemmd_client_t *c;
  gemmd_gemm_done_fn done;
  void *user;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* any of the flags below changed, or an answer came */
  pending_t *pending; /* gRPC: requests sent and not answered, oldest first */
  size_t n_pending, cap_pending;
  size_t shm_outstanding; /* shared memory: async calls whose `done` has not returned */
  /* gRPC only */
  size_t ep; /* the endpoint the stream went to */
  grpc_call *call;
  gemmd_async_tag_t send_tag, recv_tag, status_tag;
  int sending;     /* a send (or the half-close) is in flight */
  int receiving;   /* the receive chain runs */
  int finished;    /* the final status arrived */
  int broken;      /* a send failed: the call is over */
  uint64_t sending_id;
  grpc_byte_buffer *send_buf, *recv_buf;
  grpc_metadata_array initial_md, trailing_md;
  grpc_status_code code;
  grpc_slice details;
};

#define STREAM_OF(tag, field) \
  ((gemmd_gemm_stream_t *)(void *)((char *)(tag) - offsetof(gemmd_gemm_stream_t, field)))

/* ---- requests in flight (under mu) ---------------------------------------------------- */

static int pending_add(gemmd_gemm_stream_t *s, uint64_t id) {
  if (s->n_pending == s->cap_pending) {
    const size_t cap = s->cap_pending ? 2 * s->cap_pending : 64;
    pending_t *p = realloc(s->pending, cap * sizeof *p);
    if (p == NULL) return -1;
    s->pending = p;
    s->cap_pending = cap;
  }
  s->pending[s->n_pending++] = (pending_t){id, gemmd_client_now_ns()};
  return 0;
}

/* Takes the oldest request with this id off the list: its send time, or 0 if none. */
static uint64_t pending_take(gemmd_gemm_stream_t *s, uint64_t id) {
  for (size_t i = 0; i < s->n_pending; i++) {
    if (s->pending[i].request_id == id) {
      const uint64_t t = s->pending[i].sent_ns;
      memmove(&s->pending[i], &s->pending[i + 1], (s->n_pending - i - 1) * sizeof s->pending[0]);
      s->n_pending--;
      return t;
    }
  }
  return 0;
}

/* `done` for one request that will get no answer from the server. */
static void give_up(gemmd_gemm_stream_t *s, uint64_t id, const char *why) {
  gemmd_gemm_result_t *r = calloc(1, sizeof *r);
  if (r != NULL) r->request_id = id;
  gemmd_status_t st;
  gemmd_status_set(&st, GEMMD_STATUS_UNAVAILABLE, "%s", why);
  s->done(s->user, r, &st);
}

/* ---- gRPC: the three chains ------------------------------------------------------------ */

static void start_recv(gemmd_gemm_stream_t *s, int first);

static void recv_complete(gemmd_async_tag_t *tag, int ok) {
  gemmd_gemm_stream_t *s = STREAM_OF(tag, recv_tag);
  if (!ok || s->recv_buf == NULL) { /* no more answers */
    pthread_mutex_lock(&s->mu);
    s->receiving = 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return;
  }
  grpc_slice bytes = gemmd_rpc_read_all(s->recv_buf);
  grpc_byte_buffer_destroy(s->recv_buf);
  s->recv_buf = NULL;
  gemmd_gemm_result_t *r = calloc(1, sizeof *r);
  gemmd_status_t st;
  int rc = GEMMD_STATUS_OK;
  if (r == NULL) {
    rc = gemmd_status_set(&st, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    rc = gemmd_wire_decode_gemm(GRPC_SLICE_START_PTR(bytes), GRPC_SLICE_LENGTH(bytes), r, &st);
  }
  grpc_slice_unref(bytes);
  if (rc == 0) gemmd_status_clear(&st);
  pthread_mutex_lock(&s->mu);
  const uint64_t sent = r != NULL ? pending_take(s, r->request_id) : 0;
  pthread_mutex_unlock(&s->mu);
  if (r != NULL && sent != 0) r->client_ns = gemmd_client_now_ns() - sent;
  s->done(s->user, r, &st);
  pthread_mutex_lock(&s->mu);
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  start_recv(s, 0);
}

static void start_recv(gemmd_gemm_stream_t *s, int first) {
  grpc_op ops[2];
  size_t n = 0;
  memset(ops, 0, sizeof ops);
  if (first) {
    ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[n++].data.recv_initial_metadata.recv_initial_metadata = &s->initial_md;
  }
  ops[n].op = GRPC_OP_RECV_MESSAGE;
  ops[n++].data.recv_message.recv_message = &s->recv_buf;
  gemmd_async_loop_begin(&s->c->async);
  if (grpc_call_start_batch(s->call, ops, n, &s->recv_tag, NULL) != GRPC_CALL_OK) {
    gemmd_async_loop_end(&s->c->async);
    pthread_mutex_lock(&s->mu);
    s->receiving = 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
  }
}

static void send_complete(gemmd_async_tag_t *tag, int ok) {
  gemmd_gemm_stream_t *s = STREAM_OF(tag, send_tag);
  pthread_mutex_lock(&s->mu); /* send_buf was set by the sender, under mu */
  grpc_byte_buffer *sent = s->send_buf;
  s->send_buf = NULL;
  pthread_mutex_unlock(&s->mu);
  const int was_message = sent != NULL;
  if (was_message) grpc_byte_buffer_destroy(sent);
  pthread_mutex_lock(&s->mu);
  int lost = 0;
  if (!ok) {
    s->broken = 1;
    lost = was_message && pending_take(s, s->sending_id) != 0;
  }
  pthread_mutex_unlock(&s->mu);
  if (lost) give_up(s, s->sending_id, "the stream ended before this request was sent");
  pthread_mutex_lock(&s->mu); /* the stream may be freed once this is seen */
  s->sending = 0;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void status_complete(gemmd_async_tag_t *tag, int ok) {
  gemmd_gemm_stream_t *s = STREAM_OF(tag, status_tag);
  (void)ok;
  pthread_mutex_lock(&s->mu);
  s->finished = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static int open_grpc_stream(gemmd_gemm_stream_t *s, gemmd_status_t *status) {
  gemmd_client_t *c = s->c;
  grpc_metadata_array_init(&s->initial_md);
  grpc_metadata_array_init(&s->trailing_md);
  s->details = grpc_empty_slice();
  s->send_tag.complete = send_complete;
  s->recv_tag.complete = recv_complete;
  s->status_tag.complete = status_complete;
  s->ep = gemmd_endpoint_pick(c);
  s->call = grpc_channel_create_call(c->channels[s->ep], NULL, GRPC_PROPAGATE_DEFAULTS, c->async.cq,
                                     grpc_slice_from_static_string(GEMMD_METHOD_GEMM_STREAM),
                                     NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
  if (s->call == NULL) {
    return gemmd_status_set(status, GEMMD_STATUS_INTERNAL, "cannot create a GemmStream call");
  }
  grpc_op ops[2];
  gemmd_rpc_open_ops(ops, gemmd_client_auth(c), &s->trailing_md, &s->code, &s->details);
  gemmd_async_loop_begin(&c->async);
  if (grpc_call_start_batch(s->call, ops, 2, &s->status_tag, NULL) != GRPC_CALL_OK) {
    gemmd_async_loop_end(&c->async);
    return gemmd_status_set(status, GEMMD_STATUS_INTERNAL, "cannot start a GemmStream call");
  }
  s->receiving = 1;
  start_recv(s, 1);
  return GEMMD_STATUS_OK;
}

/* Starts one send batch: a message (buf, owned from here) or, with buf NULL, the
 * half-close. s->sending is already set. */
static int start_send(gemmd_gemm_stream_t *s, uint8_t *buf, size_t len) {
  grpc_op op;
  memset(&op, 0, sizeof op);
  if (buf != NULL) {
    grpc_byte_buffer *bb = gemmd_rpc_buffer_from(buf, len);
    pthread_mutex_lock(&s->mu); /* send_complete, on the loop's thread, takes it back */
    s->send_buf = bb;
    pthread_mutex_unlock(&s->mu);
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = bb;
  } else {
    op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  }
  gemmd_async_loop_begin(&s->c->async);
  if (grpc_call_start_batch(s->call, &op, 1, &s->send_tag, NULL) == GRPC_CALL_OK) return 0;
  gemmd_async_loop_end(&s->c->async);
  pthread_mutex_lock(&s->mu);
  grpc_byte_buffer *unsent = s->send_buf;
  s->send_buf = NULL;
  pthread_mutex_unlock(&s->mu);
  if (unsent != NULL) grpc_byte_buffer_destroy(unsent);
  return -1;
}

/* ---- shared memory: async calls ---------------------------------------------------------- */

static void shm_done(void *user, gemmd_gemm_result_t *result, const gemmd_status_t *status) {
  gemmd_gemm_stream_t *s = user;
  s->done(s->user, result, status);
  pthread_mutex_lock(&s->mu); /* the stream may be freed once this is seen */
  s->shm_outstanding--;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* ---- the API ---------------------------------------------------------------------------- */

int gemmd_client_gemm_stream_open(gemmd_client_t *c, gemmd_gemm_done_fn done, void *user,
                                  gemmd_gemm_stream_t **out, gemmd_status_t *status) {
  *out = NULL;
  if (done == NULL) return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT, "no done callback");
  gemmd_gemm_stream_t *s = calloc(1, sizeof *s);
  if (s == NULL) return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  s->c = c;
  s->done = done;
  s->user = user;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  if (c->shm == NULL) {
    const int rc = open_grpc_stream(s, status);
    if (rc != 0) {
      if (s->call != NULL) grpc_call_unref(s->call);
      grpc_metadata_array_destroy(&s->initial_md);
      grpc_metadata_array_destroy(&s->trailing_md);
      pthread_mutex_destroy(&s->mu);
      pthread_cond_destroy(&s->cv);
      free(s);
      return rc;
    }
  }
  gemmd_status_clear(status);
  *out = s;
  return GEMMD_STATUS_OK;
}

/* The stream is over for sending: the status to give. Under mu. */
static int ended(const gemmd_gemm_stream_t *s, gemmd_status_t *status) {
  if (s->finished && s->code != GRPC_STATUS_OK) {
    return gemmd_status_set(status, (int)s->code, "the stream ended: %.*s", (int)GRPC_SLICE_LENGTH(s->details),
                            (const char *)GRPC_SLICE_START_PTR(s->details));
  }
  return gemmd_status_set(status, GEMMD_STATUS_UNAVAILABLE, "the stream has ended");
}

int gemmd_gemm_stream_send(gemmd_gemm_stream_t *s, const gemmd_gemm_call_t *call,
                           gemmd_status_t *status) {
  pthread_mutex_lock(&s->mu);
  while (s->sending && !s->broken && !s->finished) pthread_cond_wait(&s->cv, &s->mu);
  if (s->call != NULL && (s->broken || s->finished)) {
    const int rc = ended(s, status);
    pthread_mutex_unlock(&s->mu);
    return rc;
  }
  if (s->call == NULL) { /* shared memory */
    s->shm_outstanding++;
    pthread_mutex_unlock(&s->mu);
    gemmd_gemm_call_t c = *call;
    c.timeout_ms = 0;
    const int rc = gemmd_client_gemm_async(s->c, &c, shm_done, s, status);
    if (rc != 0) {
      pthread_mutex_lock(&s->mu);
      s->shm_outstanding--;
      pthread_mutex_unlock(&s->mu);
    }
    return rc;
  }
  if (pending_add(s, call->request_id) != 0) {
    pthread_mutex_unlock(&s->mu);
    return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  }
  s->sending = 1;
  s->sending_id = call->request_id;
  pthread_mutex_unlock(&s->mu);
  uint8_t *buf;
  size_t len;
  gemmd_gemm_call_t at = *call;
  at.weight_id = gemmd_endpoint_weight_id(s->c, call->weight_id, s->ep);
  int rc = gemmd_wire_encode_gemm(&at, &buf, &len, status);
  if (rc == 0 && start_send(s, buf, len) != 0) {
    rc = gemmd_status_set(status, GEMMD_STATUS_INTERNAL, "cannot start a GemmStream send");
  }
  if (rc != 0) {
    pthread_mutex_lock(&s->mu);
    s->sending = 0;
    pending_take(s, call->request_id);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return rc;
  }
  gemmd_status_clear(status);
  return GEMMD_STATUS_OK;
}

int gemmd_gemm_stream_close(gemmd_gemm_stream_t *s, gemmd_status_t *status) {
  int rc = GEMMD_STATUS_OK;
  pthread_mutex_lock(&s->mu);
  if (s->call == NULL) {
    while (s->shm_outstanding > 0) pthread_cond_wait(&s->cv, &s->mu);
  } else {
    while (s->sending) pthread_cond_wait(&s->cv, &s->mu);
    if (!s->broken && !s->finished) {
      s->sending = 1;
      pthread_mutex_unlock(&s->mu);
      const int failed = start_send(s, NULL, 0);
      pthread_mutex_lock(&s->mu);
      if (failed) s->sending = 0;
    }
    while (s->sending || s->receiving || !s->finished) pthread_cond_wait(&s->cv, &s->mu);
  }
  /* Whatever is still pending will not be answered. */
  pending_t *left = s->pending;
  const size_t n_left = s->n_pending;
  s->pending = NULL;
  s->n_pending = s->cap_pending = 0;
  if (s->call != NULL && s->code != GRPC_STATUS_OK) {
    const int n = (int)GRPC_SLICE_LENGTH(s->details);
    rc = gemmd_status_set(status, (int)s->code, "%.*s", n, (const char *)GRPC_SLICE_START_PTR(s->details));
  } else if (n_left > 0) {
    rc = gemmd_status_set(status, GEMMD_STATUS_UNAVAILABLE, "the stream ended with %zu requests unanswered",
                          n_left);
  }
  pthread_mutex_unlock(&s->mu);
  for (size_t i = 0; i < n_left; i++) give_up(s, left[i].request_id, "the stream ended before its answer");
  free(left);
  if (rc == GEMMD_STATUS_OK) gemmd_status_clear(status);
  if (s->call != NULL) {
    grpc_call_unref(s->call);
    grpc_metadata_array_destroy(&s->initial_md);
    grpc_metadata_array_destroy(&s->trailing_md);
    grpc_slice_unref(s->details);
  }
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
  return rc;
}
