/* Internal: gRPC C-core call mechanics for gemmd's methods, message bytes in and out.
 * Unary calls are one batch; a client stream is a series of single-message batches
 * (never two sends outstanding) and one closing batch. */
#ifndef GEMMD_CLIENT_LIB_RPC_H_
#define GEMMD_CLIENT_LIB_RPC_H_

#include <grpc/grpc.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "client/lib/gemmclient.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every call takes `auth`: the metadata sent with it (the bearer token), or NULL. It must
 * outlive the call. */

/* A byte buffer over buf without copying; gRPC frees buf (with free()) when done with it. */
grpc_byte_buffer *gemmd_rpc_buffer_from(uint8_t *buf, size_t len);

/* A received message's bytes as one slice (grpc_slice_unref it); empty if unreadable. */
grpc_slice gemmd_rpc_read_all(grpc_byte_buffer *bb);

/* A deadline timeout_ms from now (monotonic); infinite for timeout_ms <= 0. */
gpr_timespec gemmd_rpc_deadline(int64_t timeout_ms);

/* How a synchronous call waits for its answer: it polls gRPC's sockets (a completion-queue
 * pluck with a deadline already past) for up to spin_ns before it sleeps, so that an answer
 * that comes soon is not a thread wake-up away. avg_ns is a moving average of how long
 * answers took: while it exceeds spin_ns a caller sleeps at once, because spinning for an
 * answer that comes after the spin only takes a core from gemmd and the other clients. */
typedef struct gemmd_rpc_wait_s {
  uint64_t spin_ns; /* 0: never spin */
  _Atomic uint64_t avg_ns;
} gemmd_rpc_wait_t;

/* $GEMMD_GRPC_SPIN_US when set (at most 1 s); else 200 µs where this process may run on 8
 * CPUs or more, and 0 below (on 2 CPUs a spinning waiter takes the core that gemmd needs). */
void gemmd_rpc_wait_init(gemmd_rpc_wait_t *w);

/* Waits for `tag` on the pluck queue cq, polling first as `w` says, until `deadline`:
 * 1 when its batch succeeded, 0 when it failed, -1 when the deadline passed first (the
 * batch is still pending). The wait goes into w's average. */
int gemmd_rpc_wait_for(grpc_completion_queue *cq, void *tag, gemmd_rpc_wait_t *w, gpr_timespec deadline);

/* The first batch of a call that streams both ways: SEND_INITIAL_METADATA (with `auth`
 * when given) and RECV_STATUS_ON_CLIENT into *trailing, *code and *details, which
 * complete when the call ends. */
void gemmd_rpc_open_ops(grpc_op ops[2], const grpc_metadata *auth, grpc_metadata_array *trailing,
                        grpc_status_code *code, grpc_slice *details);

/* One unary call in flight. Zero it before start. */
typedef struct gemmd_rpc_unary_s {
  grpc_call *call;
  grpc_metadata_array initial_md, trailing_md;
  grpc_byte_buffer *send, *recv;
  grpc_status_code code;
  grpc_slice details;
  const grpc_metadata *auth;
} gemmd_rpc_unary_t;

/* Starts `method` with the request bytes req (ownership passes: freed with free() on every
 * path). The batch completes on cq with `tag`. */
int gemmd_rpc_unary_start(gemmd_rpc_unary_t *u, grpc_channel *ch, const grpc_metadata *auth,
                          grpc_completion_queue *cq, const char *method, gpr_timespec deadline, uint8_t *req, size_t len,
                          void *tag, gemmd_status_t *status);

/* After the batch's completion (ok = the event's success): the call's status; on OK,
 * *resp holds the response bytes (grpc_slice_unref it). Releases the call. */
int gemmd_rpc_unary_finish(gemmd_rpc_unary_t *u, int ok, grpc_slice *resp, gemmd_status_t *status);

/* start + wait on a pluck queue (as `wait` says) + finish. */
int gemmd_rpc_unary_sync(grpc_channel *ch, const grpc_metadata *auth, grpc_completion_queue *cq,
                         gemmd_rpc_wait_t *wait, const char *method,
                         gpr_timespec deadline, uint8_t *req, size_t len, grpc_slice *resp,
                         gemmd_status_t *status);

/* A client-streaming call on a pluck queue. */
typedef struct gemmd_rpc_stream_s {
  grpc_call *call;
  grpc_completion_queue *cq;
  grpc_metadata_array initial_md, trailing_md;
  grpc_byte_buffer *recv;
  grpc_status_code code;
  grpc_slice details;
  const grpc_metadata *auth;
  int sent_metadata;
  int broken; /* a send failed: the server ended the call; finish says why */
} gemmd_rpc_stream_t;

int gemmd_rpc_stream_open(gemmd_rpc_stream_t *s, grpc_channel *ch, const grpc_metadata *auth,
                          grpc_completion_queue *cq, const char *method, gpr_timespec deadline,
                          gemmd_status_t *status);

/* Sends one message (ownership of buf passes). Returns 0 when it was sent, -1 when the
 * stream is broken (stop sending; gemmd_rpc_stream_finish gives the status). */
int gemmd_rpc_stream_send(gemmd_rpc_stream_t *s, uint8_t *buf, size_t len);

/* Half-closes (unless broken), receives the response and status; as unary_finish. */
int gemmd_rpc_stream_finish(gemmd_rpc_stream_t *s, grpc_slice *resp, gemmd_status_t *status);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_LIB_RPC_H_ */
