/* A gRPC C-core server for the fake service: calls are taken one at a time and served
 * synchronously (all request messages read, then one reply). */
#include "client/testing/fake_server.h"

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MESSAGES 4096

struct fake_server_s {
  grpc_server *server;
  grpc_completion_queue *cq;      /* new calls and the shutdown notice */
  grpc_completion_queue *call_cq; /* the current call's operations (pluck) */
  fake_service_t *service;
  pthread_t thread;
  int shutdown_seen; /* the server's shutdown notice was taken off cq */
};

static char kShutdownTag, kCallTag, kOpTag;

static int run_batch(fake_server_t *s, grpc_call *call, grpc_op *ops, size_t n) {
  if (grpc_call_start_batch(call, ops, n, &kOpTag, NULL) != GRPC_CALL_OK) return 0;
  const grpc_event ev =
      grpc_completion_queue_pluck(s->call_cq, &kOpTag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  return ev.type == GRPC_OP_COMPLETE && ev.success;
}

/* Every message the client sends, until it half-closes. */
static size_t receive_all(fake_server_t *s, grpc_call *call, grpc_slice *msgs) {
  size_t n = 0;
  while (n < MAX_MESSAGES) {
    grpc_byte_buffer *bb = NULL;
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &bb;
    if (!run_batch(s, call, &op, 1) || bb == NULL) break;
    grpc_byte_buffer_reader reader;
    grpc_byte_buffer_reader_init(&reader, bb);
    msgs[n++] = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    grpc_byte_buffer_destroy(bb);
  }
  return n;
}

static void send_reply(fake_server_t *s, grpc_call *call, const fake_reply_t *r) {
  grpc_op ops[4];
  size_t n = 0;
  int cancelled = 0;
  grpc_byte_buffer *bb = NULL;
  grpc_slice details = grpc_slice_from_copied_string(r->message);
  memset(ops, 0, sizeof ops);
  ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  if (r->code == GRPC_STATUS_OK) {
    grpc_slice body = grpc_slice_from_copied_buffer((const char *)r->body, r->body_len);
    bb = grpc_raw_byte_buffer_create(&body, 1);
    grpc_slice_unref(body);
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = bb;
  }
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = r->code;
  ops[n++].data.send_status_from_server.status_details = &details;
  ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  ops[n++].data.recv_close_on_server.cancelled = &cancelled;
  run_batch(s, call, ops, n);
  if (bb != NULL) grpc_byte_buffer_destroy(bb);
  grpc_slice_unref(details);
}

static void serve_call(fake_server_t *s, grpc_call *call, const grpc_call_details *d) {
  static grpc_slice msgs[MAX_MESSAGES];
  char method[128];
  snprintf(method, sizeof method, "%.*s", (int)GRPC_SLICE_LENGTH(d->method),
           (const char *)GRPC_SLICE_START_PTR(d->method));
  const size_t n = receive_all(s, call, msgs);
  fake_reply_t r;
  fake_service_handle(s->service, method, msgs, n, &r);
  for (size_t i = 0; i < n; i++) grpc_slice_unref(msgs[i]);
  send_reply(s, call, &r);
  free(r.body);
}

static void *server_main(void *arg) {
  fake_server_t *s = arg;
  for (;;) {
    grpc_call *call = NULL;
    grpc_call_details details;
    grpc_metadata_array md;
    grpc_call_details_init(&details);
    grpc_metadata_array_init(&md);
    grpc_server_request_call(s->server, &call, &details, &md, s->call_cq, s->cq, &kCallTag);
    grpc_event ev;
    for (;;) {
      ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
      if (ev.type != GRPC_OP_COMPLETE || ev.tag != &kShutdownTag) break;
      s->shutdown_seen = 1;
    }
    const int got_call = ev.type == GRPC_OP_COMPLETE && ev.success;
    if (got_call) serve_call(s, call, &details);
    if (call != NULL) grpc_call_unref(call);
    grpc_call_details_destroy(&details);
    grpc_metadata_array_destroy(&md);
    if (!got_call) break; /* shutting down */
  }
  return NULL;
}

fake_server_t *fake_server_start(int port, int *bound_port) {
  fake_server_t *s = calloc(1, sizeof *s);
  char addr[64];
  grpc_init();
  grpc_arg arg = {GRPC_ARG_INTEGER, (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = -1}};
  grpc_channel_args args = {1, &arg};
  s->service = fake_service_create();
  s->server = grpc_server_create(&args, NULL);
  s->cq = grpc_completion_queue_create_for_next(NULL);
  s->call_cq = grpc_completion_queue_create_for_pluck(NULL);
  grpc_server_register_completion_queue(s->server, s->cq, NULL);
  grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  *bound_port = grpc_server_add_http2_port(s->server, addr, creds);
  grpc_server_credentials_release(creds);
  if (*bound_port == 0) {
    fprintf(stderr, "fake_server: cannot listen on %s\n", addr);
    exit(2);
  }
  grpc_server_start(s->server);
  pthread_create(&s->thread, NULL, server_main, s);
  return s;
}

fake_service_t *fake_server_service(fake_server_t *s) { return s->service; }

static void drain_and_destroy(grpc_completion_queue *cq, int pluck) {
  grpc_completion_queue_shutdown(cq);
  grpc_event ev;
  do {
    ev = pluck ? grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
               : grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  } while (ev.type != GRPC_QUEUE_SHUTDOWN);
  grpc_completion_queue_destroy(cq);
}

void fake_server_stop(fake_server_t *s) {
  grpc_server_shutdown_and_notify(s->server, s->cq, &kShutdownTag);
  grpc_server_cancel_all_calls(s->server);
  pthread_join(s->thread, NULL);
  while (!s->shutdown_seen) { /* destroy needs the notice */
    const grpc_event ev =
        grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    s->shutdown_seen = ev.type != GRPC_OP_COMPLETE || ev.tag == &kShutdownTag;
  }
  grpc_server_destroy(s->server);
  drain_and_destroy(s->cq, 0);
  drain_and_destroy(s->call_cq, 1);
  fake_service_destroy(s->service);
  free(s);
  grpc_shutdown();
}
