/* gRPC Gemm (unary) and GemmStream (bidi): decode and validate GemmRequest on the CQ
 * thread, hand a gemmd_request_t to the loop, pack GemmResponse when it is answered. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "daemon/rpc_decode.h"
#include "daemon/rpc_internal.h"
#include "daemon/status.h"
#include "kernels/errors.h"


/* ---- Decoding ----------------------------------------------------------------------- */

/* Fills r from a decoded GemmRequest (which must outlive r). Returns a gRPC code. */
static int decode_request(const gemmd_rpc_t *rpc, const Gemmd__V1__GemmRequest *m,
                          gemmd_request_t *r, char *msg, size_t n) {
  return gemmd_rpc_decode_gemm(m, &rpc->srv->limits, rpc->srv->engine->quantizes_a, r, msg, n);
}

/* The packed GemmResponse for an answered request (malloc'd), or NULL. error_code and
 * error_message are set for the stream's failed requests only. */
static uint8_t *pack_response(const gemmd_request_t *r, int with_error, size_t *len) {
  Gemmd__V1__GemmResponse resp = GEMMD__V1__GEMM_RESPONSE__INIT;
  Gemmd__V1__Matrix d = GEMMD__V1__MATRIX__INIT;
  Gemmd__V1__RequestStats st = GEMMD__V1__REQUEST_STATS__INIT;
  resp.request_id = r->request_id;
  if (r->status == GEMMD_CODE_OK) {
    d.rows = r->m;
    d.cols = r->n;
    d.dtype = (Gemmd__V1__DType)r->out_dtype;
    d.data.data = (uint8_t *)r->d;
    d.data.len = r->d_bytes;
    resp.d = &d;
  }
  if (r->dispatched_ns != 0) {
    st.queue_ns = r->dispatched_ns - r->accepted_ns;
    st.compute_ns = r->compute_ns;
    st.batch_requests = r->batch_requests;
    st.batch_groups = r->batch_groups;
    st.batch_id = r->batch_id;
  }
  st.total_ns = r->done_ns - r->accepted_ns;
  resp.stats = &st;
  if (with_error && r->status != GEMMD_CODE_OK) {
    resp.error_code = r->status;
    resp.error_message = (char *)r->message;
  }
  *len = gemmd__v1__gemm_response__get_packed_size(&resp);
  uint8_t *buf = malloc(*len + 1);
  if (buf != NULL) gemmd__v1__gemm_response__pack(&resp, buf);
  return buf;
}

/* ---- Gemm (unary) --------------------------------------------------------------------- */

typedef struct {
  rpc_call_t base;
  gemmd_request_t req;
  Gemmd__V1__GemmRequest *msg;
} gemm_call_t;

size_t rpc_gemm_call_size(void) { return sizeof(gemm_call_t); }

static void gemm_cleanup(rpc_call_t *c) {
  gemm_call_t *g = (gemm_call_t *)c;
  gemmd_request_release(&g->req);
  if (g->msg) gemmd__v1__gemm_request__free_unpacked(g->msg, NULL);
}

/* Packs the response (D copied into it) and starts its send; any thread. */
static void send_answer(gemm_call_t *g, gemmd_request_t *r) {
  if (r->status != GEMMD_CODE_OK) {
    rpc_finish(&g->base, NULL, 0, r->status, r->message);
    return;
  }
  size_t len;
  uint8_t *buf = pack_response(r, 0, &len);
  if (buf == NULL) {
    rpc_finish(&g->base, NULL, 0, GEMMD_CODE_RESOURCE_EXHAUSTED, "out of memory packing the response");
  } else {
    rpc_finish(&g->base, buf, len, GEMMD_CODE_OK, "");
  }
}

/* The engine's thread, for a batch that completed OK (request.h answer_early): the answer
 * leaves from here, off the loop, which would otherwise pack and send every answer
 * itself. gRPC takes a batch from any thread; the call's reference for the loop stays
 * until gemm_respond. */
static void gemm_answer_early(gemmd_request_t *r) {
  r->done_ns = gemmd_now_ns();
  send_answer(r->respond_ctx, r);
}

/* Loop thread: the answer, unless the engine's thread gave it; then the loop's reference
 * goes. */
static void gemm_respond(gemmd_request_t *r) {
  gemm_call_t *g = r->respond_ctx;
  if (!r->answered_early) send_answer(g, r);
  rpc_call_unref(&g->base); /* the loop's reference */
}

static void gemm_submit(gemmd_server_t *srv, void *arg) {
  gemm_call_t *g = arg;
  gemmd_server_submit(srv, &g->req);
}

/* A request refused on this thread: answered here, counted on the loop. */
static void gemm_refuse(rpc_call_t *c, int code, const char *msg) {
  gemmd_server_count_refused(c->rpc->srv, GEMMD_TRANSPORT_GRPC, code, c->accepted_ns);
  rpc_finish(c, NULL, 0, code, msg);
}

void rpc_gemm_arrived(rpc_call_t *c) {
  gemm_call_t *g = (gemm_call_t *)c;
  c->cleanup = gemm_cleanup;
  gemmd_request_init(&g->req);
  rpc_message_t in;
  if (rpc_read_message(c->payload, &in) != GEMMD_OK) {
    gemm_refuse(c, GEMMD_CODE_INVALID_ARGUMENT, "the request carried no message");
    return;
  }
  g->msg = gemmd__v1__gemm_request__unpack(NULL, in.len, in.data);
  rpc_message_release(&in);
  if (g->msg == NULL) {
    gemm_refuse(c, GEMMD_CODE_INVALID_ARGUMENT, "the request is not a valid gemmd.v1.GemmRequest message");
    return;
  }
  char msg[512];
  const int code = decode_request(c->rpc, g->msg, &g->req, msg, sizeof msg);
  if (code != GEMMD_CODE_OK) {
    gemm_refuse(c, code, msg);
    return;
  }
  g->req.transport = GEMMD_TRANSPORT_GRPC;
  g->req.conn_id = c->conn_id;
  g->req.accepted_ns = c->accepted_ns;
  g->req.deadline_ns = c->deadline_ns;
  g->req.respond = gemm_respond;
  g->req.answer_early = gemm_answer_early;
  g->req.respond_ctx = g;
  rpc_call_ref(c);
  gemmd_server_post(c->rpc->srv, gemm_submit, g);
}

/* ---- GemmStream (bidi) --------------------------------------------------------------- */

typedef struct out_msg_s {
  struct out_msg_s *next;
  grpc_byte_buffer *buf;
  size_t len;
} out_msg_t;

typedef struct {
  rpc_call_t base;
  rpc_tag_t on_recv, on_send;
  grpc_byte_buffer *recv_buf;
  pthread_mutex_t mu;
  out_msg_t *out_head, *out_tail; /* responses waiting to be sent, in answer order */
  grpc_byte_buffer *sending;      /* the one SEND_MESSAGE in flight */
  size_t sending_len;
  grpc_slice status_details;
  int metadata_sent, recv_done, outstanding, status_sent, broken;
  /* Backpressure: a stream holds at most --stream-window requests in gemmd or answered and
   * unsent, and --stream-queue-bytes of unsent answers; past either, gemmd stops reading
   * the stream (HTTP/2 flow control then holds the client) until sends catch up. */
  unsigned queued;      /* answers waiting or being sent */
  size_t queued_bytes;
  int recv_paused;
} stream_call_t;

typedef struct {
  gemmd_request_t req; /* first: respond() gets this pointer */
  Gemmd__V1__GemmRequest *msg;
  stream_call_t *s;
} stream_req_t;

size_t rpc_gemm_stream_call_size(void) { return sizeof(stream_call_t); }

static void stream_cleanup(rpc_call_t *c) {
  stream_call_t *s = (stream_call_t *)c;
  while (s->out_head) {
    out_msg_t *o = s->out_head;
    s->out_head = o->next;
    grpc_byte_buffer_destroy(o->buf);
    free(o);
  }
  if (s->sending) grpc_byte_buffer_destroy(s->sending);
  if (s->recv_buf) grpc_byte_buffer_destroy(s->recv_buf);
  if (s->status_sent) grpc_slice_unref(s->status_details);
  pthread_mutex_destroy(&s->mu);
}

static void on_stream_send(rpc_tag_t *tag, int ok);

/* With mu held: start the next send, or the final status when everything is answered. */
static void stream_pump(stream_call_t *s) {
  if (s->sending || s->status_sent || s->broken) return;
  const int have_msg = s->out_head != NULL;
  const int finish = !have_msg && s->recv_done && s->outstanding == 0;
  if (!have_msg && !finish) return;
  grpc_op ops[2];
  size_t n = 0;
  memset(ops, 0, sizeof ops);
  if (!s->metadata_sent) {
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    s->metadata_sent = 1;
  }
  if (have_msg) {
    out_msg_t *o = s->out_head;
    s->out_head = o->next;
    if (s->out_head == NULL) s->out_tail = NULL;
    s->sending = o->buf;
    s->sending_len = o->len;
    free(o);
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = s->sending;
  } else {
    s->status_sent = 1;
    s->status_details = grpc_slice_from_static_string("");
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = GRPC_STATUS_OK;
    ops[n++].data.send_status_from_server.status_details = &s->status_details;
  }
  rpc_call_ref(&s->base);
  rpc_send_started(s->base.rpc);
  if (grpc_call_start_batch(s->base.call, ops, n, &s->on_send, NULL) != GRPC_CALL_OK) {
    s->broken = 1;
    rpc_send_done(s->base.rpc);
    rpc_call_unref(&s->base);
  }
}

static void stream_recv(stream_call_t *s);

/* With mu held: whether the stream holds as much as it may (see stream_call_t). */
static int stream_full(const stream_call_t *s) {
  const gemmd_config_t *cfg = s->base.rpc->srv->cfg;
  return (int64_t)(s->outstanding + s->queued) >= cfg->stream_window ||
         s->queued_bytes >= cfg->stream_queue_bytes;
}

static void on_stream_send(rpc_tag_t *tag, int ok) {
  stream_call_t *s = RPC_CONTAINER(tag, stream_call_t, on_send);
  rpc_send_done(s->base.rpc);
  pthread_mutex_lock(&s->mu);
  if (s->sending) {
    grpc_byte_buffer_destroy(s->sending);
    s->sending = NULL;
    s->queued--;
    s->queued_bytes -= s->sending_len;
  }
  if (!ok) s->broken = 1; /* the client went away: drop what is left */
  stream_pump(s);
  const int resume = s->recv_paused && !s->broken && !stream_full(s);
  if (resume) s->recv_paused = 0;
  pthread_mutex_unlock(&s->mu);
  if (resume) stream_recv(s);
  rpc_call_unref(&s->base);
}

/* Queues one packed GemmResponse (taken over). Any thread. */
static void stream_send(stream_call_t *s, uint8_t *packed, size_t len, int answered) {
  out_msg_t *o = packed ? malloc(sizeof *o) : NULL;
  pthread_mutex_lock(&s->mu);
  if (answered) s->outstanding--;
  if (o != NULL) {
    o->next = NULL;
    o->buf = rpc_buffer(packed, len);
    o->len = len;
    s->queued++;
    s->queued_bytes += len;
    if (s->out_tail) {
      s->out_tail->next = o;
    } else {
      s->out_head = o;
    }
    s->out_tail = o;
  } else {
    free(packed);
  }
  stream_pump(s);
  pthread_mutex_unlock(&s->mu);
}

/* A failed request answered in the stream, without the loop. */
static void stream_reject(stream_call_t *s, uint64_t request_id, int code, const char *message) {
  gemmd_request_t r;
  gemmd_request_init(&r);
  r.request_id = request_id;
  r.status = code;
  snprintf(r.message, sizeof r.message, "%s", message);
  r.accepted_ns = r.done_ns = gemmd_now_ns();
  gemmd_server_count_refused(s->base.rpc->srv, GEMMD_TRANSPORT_GRPC, code, r.accepted_ns);
  size_t len;
  uint8_t *buf = pack_response(&r, 1, &len);
  stream_send(s, buf, len, 0);
}

/* Packs a stream request's answer and queues it on its stream; any thread. */
static void stream_answer(gemmd_request_t *r) {
  size_t len;
  uint8_t *buf = pack_response(r, 1, &len);
  stream_send(((stream_req_t *)r)->s, buf, len, 1);
}

/* The engine's thread, for a batch that completed OK: the answer leaves here, off the
 * loop, as a unary call's does (gemm_answer_early); the loop's stream_respond then only
 * lets the request go. */
static void stream_answer_early(gemmd_request_t *r) {
  r->done_ns = gemmd_now_ns();
  stream_answer(r);
}

static void stream_respond(gemmd_request_t *r) {
  stream_req_t *sr = (stream_req_t *)r;
  stream_call_t *s = sr->s;
  if (!r->answered_early) stream_answer(r);
  gemmd_request_release(&sr->req);
  gemmd__v1__gemm_request__free_unpacked(sr->msg, NULL);
  free(sr);
  rpc_call_unref(&s->base);
}

static void stream_submit(gemmd_server_t *srv, void *arg) {
  stream_req_t *sr = arg;
  gemmd_server_submit(srv, &sr->req);
}

static void on_stream_recv(rpc_tag_t *tag, int ok) {
  stream_call_t *s = RPC_CONTAINER(tag, stream_call_t, on_recv);
  rpc_call_t *c = &s->base;
  if (!ok || s->recv_buf == NULL) { /* half-close (or the call broke): answer what is left */
    pthread_mutex_lock(&s->mu);
    s->recv_done = 1;
    if (!ok) s->broken = 1;
    stream_pump(s);
    pthread_mutex_unlock(&s->mu);
    rpc_call_unref(c);
    return;
  }
  rpc_message_t in;
  const int read_rc = rpc_read_message(s->recv_buf, &in);
  grpc_byte_buffer_destroy(s->recv_buf);
  s->recv_buf = NULL;
  Gemmd__V1__GemmRequest *msg =
      read_rc == GEMMD_OK ? gemmd__v1__gemm_request__unpack(NULL, in.len, in.data) : NULL;
  if (read_rc == GEMMD_OK) rpc_message_release(&in);
  if (msg == NULL) {
    stream_reject(s, 0, GEMMD_CODE_INVALID_ARGUMENT, "the message is not a valid gemmd.v1.GemmRequest");
  } else {
    stream_req_t *sr = calloc(1, sizeof *sr);
    char err[512];
    int code = sr ? GEMMD_CODE_OK : GEMMD_CODE_RESOURCE_EXHAUSTED;
    if (sr == NULL) {
      snprintf(err, sizeof err, "out of memory");
    } else {
      gemmd_request_init(&sr->req);
      code = decode_request(c->rpc, msg, &sr->req, err, sizeof err);
    }
    if (code != GEMMD_CODE_OK) {
      stream_reject(s, msg->request_id, code, err);
      if (sr) gemmd_request_release(&sr->req);
      free(sr);
      gemmd__v1__gemm_request__free_unpacked(msg, NULL);
    } else {
      sr->msg = msg;
      sr->s = s;
      sr->req.transport = GEMMD_TRANSPORT_GRPC;
      sr->req.conn_id = c->conn_id;
      sr->req.accepted_ns = gemmd_now_ns();
      sr->req.deadline_ns = c->deadline_ns;
      sr->req.respond = stream_respond;
      sr->req.answer_early = stream_answer_early;
      sr->req.respond_ctx = sr;
      pthread_mutex_lock(&s->mu);
      s->outstanding++;
      pthread_mutex_unlock(&s->mu);
      rpc_call_ref(c);
      gemmd_server_post(c->rpc->srv, stream_submit, sr);
    }
  }
  pthread_mutex_lock(&s->mu);
  const int pause = stream_full(s);
  s->recv_paused = pause;
  pthread_mutex_unlock(&s->mu);
  if (!pause) stream_recv(s); /* else on_stream_send reads on once sends catch up */
  rpc_call_unref(c); /* this receive's reference */
}

static void stream_recv(stream_call_t *s) {
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &s->recv_buf;
  rpc_call_ref(&s->base);
  if (grpc_call_start_batch(s->base.call, &op, 1, &s->on_recv, NULL) != GRPC_CALL_OK) {
    rpc_call_unref(&s->base);
  }
}

void rpc_gemm_stream_arrived(rpc_call_t *c) {
  stream_call_t *s = (stream_call_t *)c;
  pthread_mutex_init(&s->mu, NULL);
  c->cleanup = stream_cleanup;
  s->on_recv.fn = on_stream_recv;
  s->on_send.fn = on_stream_send;
  rpc_watch_close(c);
  stream_recv(s);
}
