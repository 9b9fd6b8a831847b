/* gRPC C-core calls: unary (sync and async) and client streaming. */
#include "client/lib/rpc.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/lib/client_impl.h"
#include "client/lib/status.h"

gpr_timespec gemmd_rpc_deadline(int64_t timeout_ms) {
  if (timeout_ms <= 0) return gpr_inf_future(GPR_CLOCK_MONOTONIC);
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
}

grpc_byte_buffer *gemmd_rpc_buffer_from(uint8_t *buf, size_t len) {
  grpc_slice slice = grpc_slice_new(buf, len, free);
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&slice, 1);
  grpc_slice_unref(slice);
  return bb;
}

grpc_slice gemmd_rpc_read_all(grpc_byte_buffer *bb) {
  grpc_byte_buffer_reader reader;
  if (!grpc_byte_buffer_reader_init(&reader, bb)) return grpc_empty_slice();
  grpc_slice s = grpc_byte_buffer_reader_readall(&reader);
  grpc_byte_buffer_reader_destroy(&reader);
  return s;
}

static grpc_call *create_call(grpc_channel *ch, grpc_completion_queue *cq, const char *method,
                              gpr_timespec deadline) {
  return grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                  grpc_slice_from_static_string(method), NULL, deadline, NULL);
}

static int start_failed(const char *what, grpc_call_error err, gemmd_status_t *status) {
  return gemmd_status_set(status, GEMMD_STATUS_INTERNAL, "%s: grpc call error %d", what, (int)err);
}

/* The status a finished call ended with, and its response bytes on OK. */
static int call_result(grpc_status_code code, grpc_slice details, int ok, grpc_byte_buffer *recv,
                       grpc_slice *resp, gemmd_status_t *status) {
  if (!ok && code == GRPC_STATUS_OK) {
    return gemmd_status_set(status, GEMMD_STATUS_UNKNOWN, "the call ended without a status");
  }
  if (code != GRPC_STATUS_OK) {
    const int n = (int)GRPC_SLICE_LENGTH(details);
    if (n == 0) return gemmd_status_set(status, (int)code, "%s", gemmd_status_name(code));
    return gemmd_status_set(status, (int)code, "%.*s", n,
                            (const char *)GRPC_SLICE_START_PTR(details));
  }
  if (recv == NULL) {
    return gemmd_status_set(status, GEMMD_STATUS_INTERNAL, "the server sent no response");
  }
  *resp = gemmd_rpc_read_all(recv);
  gemmd_status_clear(status);
  return GEMMD_STATUS_OK;
}

/* The SEND_INITIAL_METADATA op, with the token when there is one. */
static void initial_metadata(grpc_op *op, const grpc_metadata *auth) {
  op->op = GRPC_OP_SEND_INITIAL_METADATA;
  if (auth != NULL) {
    op->data.send_initial_metadata.count = 1;
    op->data.send_initial_metadata.metadata = (grpc_metadata *)auth;
  }
}

void gemmd_rpc_open_ops(grpc_op ops[2], const grpc_metadata *auth, grpc_metadata_array *trailing,
                        grpc_status_code *code, grpc_slice *details) {
  memset(ops, 0, 2 * sizeof ops[0]);
  initial_metadata(&ops[0], auth);
  ops[1].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[1].data.recv_status_on_client.trailing_metadata = trailing;
  ops[1].data.recv_status_on_client.status = code;
  ops[1].data.recv_status_on_client.status_details = details;
}

static void fill_unary_ops(gemmd_rpc_unary_t *u, grpc_op ops[6]) {
  memset(ops, 0, 6 * sizeof ops[0]);
  initial_metadata(&ops[0], u->auth);
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = u->send;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &u->initial_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &u->recv;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &u->trailing_md;
  ops[5].data.recv_status_on_client.status = &u->code;
  ops[5].data.recv_status_on_client.status_details = &u->details;
}

static void unary_release(gemmd_rpc_unary_t *u) {
  if (u->send != NULL) grpc_byte_buffer_destroy(u->send);
  if (u->recv != NULL) grpc_byte_buffer_destroy(u->recv);
  grpc_metadata_array_destroy(&u->initial_md);
  grpc_metadata_array_destroy(&u->trailing_md);
  grpc_slice_unref(u->details);
  if (u->call != NULL) grpc_call_unref(u->call);
  memset(u, 0, sizeof *u);
}

int gemmd_rpc_unary_start(gemmd_rpc_unary_t *u, grpc_channel *ch, const grpc_metadata *auth,
                          grpc_completion_queue *cq, const char *method, gpr_timespec deadline,
                          uint8_t *req, size_t len, void *tag, gemmd_status_t *status) {
  memset(u, 0, sizeof *u);
  u->auth = auth;
  grpc_metadata_array_init(&u->initial_md);
  grpc_metadata_array_init(&u->trailing_md);
  u->details = grpc_empty_slice();
  u->code = GRPC_STATUS_OK;
  u->send = gemmd_rpc_buffer_from(req, len);
  u->call = create_call(ch, cq, method, deadline);
  if (u->call == NULL) {
    unary_release(u);
    return gemmd_status_set(status, GEMMD_STATUS_INTERNAL, "cannot create a call to %s", method);
  }
  grpc_op ops[6];
  fill_unary_ops(u, ops);
  const grpc_call_error err = grpc_call_start_batch(u->call, ops, 6, tag, NULL);
  if (err != GRPC_CALL_OK) {
    unary_release(u);
    return start_failed(method, err, status);
  }
  return GEMMD_STATUS_OK;
}

int gemmd_rpc_unary_finish(gemmd_rpc_unary_t *u, int ok, grpc_slice *resp, gemmd_status_t *status) {
  const int rc = call_result(u->code, u->details, ok, u->recv, resp, status);
  unary_release(u);
  return rc;
}

/* Waits for `tag` on a pluck queue; the event's success. */
static int pluck(grpc_completion_queue *cq, void *tag) {
  const grpc_event ev =
      grpc_completion_queue_pluck(cq, tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  return ev.type == GRPC_OP_COMPLETE && ev.success;
}

enum { SPIN_AUTO_US = 200, SPIN_MIN_CPUS = 8, SPIN_MAX_US = 1000000 };

void gemmd_rpc_wait_init(gemmd_rpc_wait_t *w) {
  const char *env = getenv("GEMMD_GRPC_SPIN_US");
  long us;
  if (env != NULL && env[0] != '\0') {
    us = atol(env);
  } else {
    cpu_set_t set;
    const long cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    us = cpus >= SPIN_MIN_CPUS ? SPIN_AUTO_US : 0;
  }
  if (us > SPIN_MAX_US) us = SPIN_MAX_US;
  w->spin_ns = us > 0 ? (uint64_t)us * 1000u : 0;
  atomic_init(&w->avg_ns, 0);
}

int gemmd_rpc_wait_for(grpc_completion_queue *cq, void *tag, gemmd_rpc_wait_t *w, gpr_timespec deadline) {
  const uint64_t start = gemmd_client_now_ns();
  grpc_event ev = {.type = GRPC_QUEUE_TIMEOUT};
  if (w->spin_ns > 0 && atomic_load_explicit(&w->avg_ns, memory_order_relaxed) <= w->spin_ns) {
    const gpr_timespec past = gpr_inf_past(GPR_CLOCK_MONOTONIC);
    do {
      ev = grpc_completion_queue_pluck(cq, tag, past, NULL);
    } while (ev.type == GRPC_QUEUE_TIMEOUT && gemmd_client_now_ns() - start < w->spin_ns);
  }
  if (ev.type == GRPC_QUEUE_TIMEOUT) ev = grpc_completion_queue_pluck(cq, tag, deadline, NULL);
  if (ev.type == GRPC_QUEUE_TIMEOUT) return -1;
  /* An average over about the last 8 answers; concurrent callers may lose an update. */
  const int64_t took = (int64_t)(gemmd_client_now_ns() - start);
  const int64_t avg = (int64_t)atomic_load_explicit(&w->avg_ns, memory_order_relaxed);
  atomic_store_explicit(&w->avg_ns, (uint64_t)(avg + (took - avg) / 8), memory_order_relaxed);
  return ev.type == GRPC_OP_COMPLETE && ev.success;
}

int gemmd_rpc_unary_sync(grpc_channel *ch, const grpc_metadata *auth, grpc_completion_queue *cq,
                         gemmd_rpc_wait_t *wait, const char *method, gpr_timespec deadline, uint8_t *req,
                         size_t len, grpc_slice *resp, gemmd_status_t *status) {
  gemmd_rpc_unary_t u;
  const int rc = gemmd_rpc_unary_start(&u, ch, auth, cq, method, deadline, req, len, &u, status);
  if (rc != 0) return rc;
  const int ok = gemmd_rpc_wait_for(cq, &u, wait, gpr_inf_future(GPR_CLOCK_MONOTONIC)) == 1;
  return gemmd_rpc_unary_finish(&u, ok, resp, status);
}

/* ---- client streaming ---------------------------------------------------------------- */

static void stream_release(gemmd_rpc_stream_t *s) {
  if (s->recv != NULL) grpc_byte_buffer_destroy(s->recv);
  grpc_metadata_array_destroy(&s->initial_md);
  grpc_metadata_array_destroy(&s->trailing_md);
  grpc_slice_unref(s->details);
  if (s->call != NULL) grpc_call_unref(s->call);
  memset(s, 0, sizeof *s);
}

int gemmd_rpc_stream_open(gemmd_rpc_stream_t *s, grpc_channel *ch, const grpc_metadata *auth,
                          grpc_completion_queue *cq, const char *method, gpr_timespec deadline,
                          gemmd_status_t *status) {
  memset(s, 0, sizeof *s);
  s->auth = auth;
  grpc_metadata_array_init(&s->initial_md);
  grpc_metadata_array_init(&s->trailing_md);
  s->details = grpc_empty_slice();
  s->cq = cq;
  s->call = create_call(ch, cq, method, deadline);
  if (s->call == NULL) {
    stream_release(s);
    return gemmd_status_set(status, GEMMD_STATUS_INTERNAL, "cannot create a call to %s", method);
  }
  return GEMMD_STATUS_OK;
}

int gemmd_rpc_stream_send(gemmd_rpc_stream_t *s, uint8_t *buf, size_t len) {
  if (s->broken) {
    free(buf);
    return -1;
  }
  grpc_byte_buffer *bb = gemmd_rpc_buffer_from(buf, len);
  grpc_op ops[2];
  size_t n = 0;
  memset(ops, 0, sizeof ops);
  if (!s->sent_metadata) initial_metadata(&ops[n++], s->auth);
  ops[n].op = GRPC_OP_SEND_MESSAGE;
  ops[n++].data.send_message.send_message = bb;
  const grpc_call_error err = grpc_call_start_batch(s->call, ops, n, s, NULL);
  const int ok = err == GRPC_CALL_OK && pluck(s->cq, s);
  grpc_byte_buffer_destroy(bb);
  s->sent_metadata = 1;
  if (!ok) s->broken = 1;
  return ok ? 0 : -1;
}

int gemmd_rpc_stream_finish(gemmd_rpc_stream_t *s, grpc_slice *resp, gemmd_status_t *status) {
  grpc_op ops[5];
  size_t n = 0;
  memset(ops, 0, sizeof ops);
  if (!s->sent_metadata) initial_metadata(&ops[n++], s->auth);
  if (!s->broken) ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[n++].data.recv_initial_metadata.recv_initial_metadata = &s->initial_md;
  ops[n].op = GRPC_OP_RECV_MESSAGE;
  ops[n++].data.recv_message.recv_message = &s->recv;
  ops[n].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[n].data.recv_status_on_client.trailing_metadata = &s->trailing_md;
  ops[n].data.recv_status_on_client.status = &s->code;
  ops[n++].data.recv_status_on_client.status_details = &s->details;
  const grpc_call_error err = grpc_call_start_batch(s->call, ops, n, s, NULL);
  int rc;
  if (err != GRPC_CALL_OK) {
    rc = start_failed("stream finish", err, status);
  } else {
    const int ok = pluck(s->cq, s);
    rc = call_result(s->code, s->details, ok, s->recv, resp, status);
  }
  stream_release(s);
  return rc;
}
