/* libgemmclient's GEMM session (gemmclient.h): synchronous GEMMs on one GemmStream.
 *
 * Over gRPC the session owns a pluck queue and one GemmStream call on it. Each GEMM is one
 * batch, SEND_MESSAGE with RECV_MESSAGE (the first also receives the initial metadata), and
 * the caller plucks that batch's completion from its own queue, polling first as a unary
 * call does (rpc.h), so no other thread touches the answer. A second batch, started with
 * the stream, waits for the call's final status. gemmd answers a stream's requests in the
 * order their batches finish; with one request in flight that is the request just sent.
 *
 * When the stream ends (the server closed it, or a call's deadline passed and the session
 * cancelled it), the call gets the stream's status and the next call opens a new stream,
 * on the next endpoint in turn. A request whose stream ended UNAVAILABLE before its answer is
 * sent again on a new stream: first to the same endpoint when the stream was left from
 * earlier calls (it may have gone while the session was idle), then to the next ones, as a
 * unary call is.
 * Over shared memory each GEMM is a synchronous call (gemmd_client_gemm). */
#include <grpc/byte_buffer.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "client/lib/endpoints.h"
#include "client/lib/rpc.h"
#include "client/lib/status.h"
#include "client/lib/wire.h"

struct gemmd_gemm_session_s {
  gemmd_client_t *c;
  grpc_completion_queue *cq; /* gRPC: the session's pluck queue */
  grpc_call *call;           /* the open stream, or NULL */
  size_t ep;                 /* the endpoint it went to */
  int first;                 /* no request sent on it yet */
  grpc_metadata_array initial_md, trailing_md;
  grpc_status_code code;
  grpc_slice details;
  grpc_byte_buffer *recv;
  char message_tag, status_tag; /* their addresses tag the two batches */
};

static int open_stream(gemmd_gemm_session_t *s, size_t ep, gemmd_status_t *status) {
  s->ep = ep;
  s->first = 1;
  s->code = GRPC_STATUS_OK;
  s->details = grpc_empty_slice();
  grpc_metadata_array_init(&s->initial_md);
  grpc_metadata_array_init(&s->trailing_md);
  s->call = grpc_channel_create_call(s->c->channels[ep], NULL, GRPC_PROPAGATE_DEFAULTS, s->cq,
                                     grpc_slice_from_static_string(GEMMD_METHOD_GEMM_STREAM), NULL,
                                     gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
  if (s->call == NULL) {
    grpc_metadata_array_destroy(&s->initial_md);
    grpc_metadata_array_destroy(&s->trailing_md);
    return gemmd_status_set(status, GEMMD_STATUS_INTERNAL, "cannot create a GemmStream call");
  }
  grpc_op ops[2];
  gemmd_rpc_open_ops(ops, gemmd_client_auth(s->c), &s->trailing_md, &s->code, &s->details);
  if (grpc_call_start_batch(s->call, ops, 2, &s->status_tag, NULL) != GRPC_CALL_OK) {
    grpc_call_unref(s->call);
    s->call = NULL;
    grpc_metadata_array_destroy(&s->initial_md);
    grpc_metadata_array_destroy(&s->trailing_md);
    return gemmd_status_set(status, GEMMD_STATUS_INTERNAL, "cannot start a GemmStream call");
  }
  return GEMMD_STATUS_OK;
}

/* Waits for the stream's final status (cancelling the call if it has not come by
 * `deadline`) and releases the call: the status it ended with (OK after a clean close).
 * No batch but the status one may be pending. */
static int end_stream(gemmd_gemm_session_t *s, gpr_timespec deadline, gemmd_status_t *status) {
  const grpc_event ev = grpc_completion_queue_pluck(s->cq, &s->status_tag, deadline, NULL);
  if (ev.type == GRPC_QUEUE_TIMEOUT) {
    grpc_call_cancel(s->call, NULL);
    grpc_completion_queue_pluck(s->cq, &s->status_tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
  }
  int rc = GEMMD_STATUS_OK;
  if (s->code != GRPC_STATUS_OK) {
    const int n = (int)GRPC_SLICE_LENGTH(s->details);
    rc = gemmd_status_set(status, (int)s->code, "the stream ended: %.*s", n,
                          (const char *)GRPC_SLICE_START_PTR(s->details));
  }
  if (s->recv != NULL) grpc_byte_buffer_destroy(s->recv);
  s->recv = NULL;
  grpc_metadata_array_destroy(&s->initial_md);
  grpc_metadata_array_destroy(&s->trailing_md);
  grpc_slice_unref(s->details);
  grpc_call_unref(s->call);
  s->call = NULL;
  return rc;
}

/* One request on the open stream (opening one on `ep` first when none is): its answer's
 * bytes in *resp, or the status that ended the stream. */
static int exchange(gemmd_gemm_session_t *s, size_t ep, const gemmd_gemm_call_t *call, grpc_slice *resp,
                    gemmd_status_t *status) {
  if (s->call == NULL) {
    const int rc = open_stream(s, ep, status);
    if (rc != 0) return rc;
  }
  gemmd_gemm_call_t at = *call;
  at.weight_id = gemmd_endpoint_weight_id(s->c, call->weight_id, s->ep);
  at.timeout_ms = 0;
  uint8_t *buf;
  size_t len;
  int rc = gemmd_wire_encode_gemm(&at, &buf, &len, status);
  if (rc != 0) return rc;
  grpc_byte_buffer *send = gemmd_rpc_buffer_from(buf, len);
  grpc_op ops[3];
  size_t n = 0;
  memset(ops, 0, sizeof ops);
  if (s->first) {
    ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[n++].data.recv_initial_metadata.recv_initial_metadata = &s->initial_md;
  }
  ops[n].op = GRPC_OP_SEND_MESSAGE;
  ops[n++].data.send_message.send_message = send;
  ops[n].op = GRPC_OP_RECV_MESSAGE;
  ops[n++].data.recv_message.recv_message = &s->recv;
  if (grpc_call_start_batch(s->call, ops, n, &s->message_tag, NULL) != GRPC_CALL_OK) {
    grpc_byte_buffer_destroy(send);
    grpc_call_cancel(s->call, NULL);
    end_stream(s, gpr_inf_future(GPR_CLOCK_MONOTONIC), status);
    return gemmd_status_set(status, GEMMD_STATUS_INTERNAL, "cannot start a GemmStream request");
  }
  s->first = 0;
  const int64_t timeout_ms = gemmd_client_timeout(s->c, call->timeout_ms);
  int got = gemmd_rpc_wait_for(s->cq, &s->message_tag, &s->c->wait, gemmd_rpc_deadline(timeout_ms));
  if (got < 0) { /* one request cannot be cancelled alone: the stream goes */
    grpc_call_cancel(s->call, NULL);
    grpc_completion_queue_pluck(s->cq, &s->message_tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
  }
  grpc_byte_buffer_destroy(send);
  if (got == 1 && s->recv != NULL) {
    *resp = gemmd_rpc_read_all(s->recv);
    grpc_byte_buffer_destroy(s->recv);
    s->recv = NULL;
    return GEMMD_STATUS_OK;
  }
  rc = end_stream(s, gpr_inf_future(GPR_CLOCK_MONOTONIC), status);
  if (got < 0) {
    return gemmd_status_set(status, GEMMD_STATUS_DEADLINE_EXCEEDED, "no answer within %lld ms",
                            (long long)timeout_ms);
  }
  if (rc == GEMMD_STATUS_OK) { /* a stream the server closed cleanly with this request open */
    rc = gemmd_status_set(status, GEMMD_STATUS_UNAVAILABLE, "the stream ended before the answer");
  }
  return rc;
}

int gemmd_client_gemm_session_open(gemmd_client_t *c, gemmd_gemm_session_t **out, gemmd_status_t *status) {
  *out = NULL;
  gemmd_gemm_session_t *s = calloc(1, sizeof *s);
  if (s == NULL) return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  s->c = c;
  if (c->shm == NULL) {
    s->cq = gemmd_cq_pool_get(&c->cqs);
    if (s->cq == NULL) {
      free(s);
      return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "cannot create a completion queue");
    }
  }
  gemmd_status_clear(status);
  *out = s;
  return GEMMD_STATUS_OK;
}

int gemmd_gemm_session_call(gemmd_gemm_session_t *s, const gemmd_gemm_call_t *call,
                            gemmd_gemm_result_t *result, gemmd_status_t *status) {
  if (s->c->shm != NULL) return gemmd_client_gemm(s->c, call, result, status);
  const uint64_t t0 = gemmd_client_now_ns();
  memset(result, 0, sizeof *result);
  grpc_slice bytes;
  /* The open stream's endpoint. A stream left from earlier calls may have ended since
   * (the connection went while the session was idle): UNAVAILABLE on it gets a new stream
   * there first. Then the next endpoints, as for a unary call. */
  const int reused = s->call != NULL;
  const size_t first = reused ? s->ep : gemmd_endpoint_pick(s->c);
  int rc = exchange(s, first, call, &bytes, status);
  if (reused && gemmd_endpoint_retryable(rc)) rc = exchange(s, first, call, &bytes, status);
  for (size_t k = 1; k < s->c->n_channels && gemmd_endpoint_retryable(rc); k++) {
    rc = exchange(s, (first + k) % s->c->n_channels, call, &bytes, status);
  }
  if (rc == 0) {
    rc = gemmd_wire_decode_gemm(GRPC_SLICE_START_PTR(bytes), GRPC_SLICE_LENGTH(bytes), result, status);
    grpc_slice_unref(bytes);
  }
  if (rc == 0) gemmd_status_clear(status);
  result->client_ns = gemmd_client_now_ns() - t0;
  return rc;
}

int gemmd_gemm_session_close(gemmd_gemm_session_t *s, gemmd_status_t *status) {
  int rc = GEMMD_STATUS_OK;
  gemmd_status_clear(status);
  if (s->call != NULL) {
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    if (grpc_call_start_batch(s->call, &op, 1, &s->message_tag, NULL) == GRPC_CALL_OK) {
      grpc_completion_queue_pluck(s->cq, &s->message_tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    } else {
      grpc_call_cancel(s->call, NULL);
    }
    /* The server ends the stream once it has answered: within the client's timeout. */
    rc = end_stream(s, gemmd_rpc_deadline(gemmd_client_timeout(s->c, 0)), status);
  }
  if (s->cq != NULL) gemmd_cq_pool_put(&s->c->cqs, s->cq);
  free(s);
  return rc;
}
