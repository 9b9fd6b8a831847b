/* gRPC GetStats and grpc.health.v1.Health (Check and Watch).
 *
 * "" and "gemmd.v1.GemmService" are SERVING while gemmd is ready and not draining,
 * NOT_SERVING otherwise (readiness: also while the start-up weights load). "liveness" is
 * SERVING whenever the loop answers, loading and draining included: a liveness probe that
 * never kills a pod for loading a large checkpoint. Check on an unknown service is
 * NOT_FOUND; Watch on one streams SERVICE_UNKNOWN (grpc/doc/health-checking.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/rpc_internal.h"
#include "daemon/stats.h"
#include "daemon/status.h"
#include "kernels/errors.h"


typedef Grpc__Health__V1__HealthCheckResponse__ServingStatus serving_status_t;
#define ST_SERVING GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
#define ST_NOT_SERVING GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING
#define ST_UNKNOWN_SERVICE GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN

enum { SERVICE_UNKNOWN = 0, SERVICE_READINESS = 1, SERVICE_LIVENESS = 2 };

static int service_kind(const char *s) {
  if (s == NULL || s[0] == '\0' || strcmp(s, "gemmd.v1.GemmService") == 0) return SERVICE_READINESS;
  return strcmp(s, "liveness") == 0 ? SERVICE_LIVENESS : SERVICE_UNKNOWN;
}

/* What a service of this kind says now (loop thread). */
static serving_status_t status_of(gemmd_server_t *srv, int kind) {
  if (kind == SERVICE_UNKNOWN) return ST_UNKNOWN_SERVICE;
  return kind == SERVICE_LIVENESS || gemmd_server_serving(srv) ? ST_SERVING : ST_NOT_SERVING;
}

static uint8_t *pack_status(serving_status_t st, size_t *len) {
  Grpc__Health__V1__HealthCheckResponse resp = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
  resp.status = st;
  *len = grpc__health__v1__health_check_response__get_packed_size(&resp);
  uint8_t *buf = malloc(*len + 1);
  if (buf) grpc__health__v1__health_check_response__pack(&resp, buf);
  return buf;
}

/* The service name of a HealthCheckRequest, malloc'd; NULL when the bytes are not one. */
static char *decode_service(grpc_byte_buffer *bb) {
  rpc_message_t in;
  if (rpc_read_message(bb, &in) != GEMMD_OK) return NULL;
  Grpc__Health__V1__HealthCheckRequest *m =
      grpc__health__v1__health_check_request__unpack(NULL, in.len, in.data);
  rpc_message_release(&in);
  if (m == NULL) return NULL;
  char *service = strdup(m->service ? m->service : "");
  grpc__health__v1__health_check_request__free_unpacked(m, NULL);
  return service;
}

/* ---- GetStats -------------------------------------------------------------------------- */

static void stats_on_loop(gemmd_server_t *srv, void *arg) {
  rpc_call_t *c = arg;
  size_t len;
  uint8_t *buf = gemmd_stats_pack(srv, &len);
  rpc_finish(c, buf, len, buf ? GEMMD_CODE_OK : GEMMD_CODE_RESOURCE_EXHAUSTED, buf ? "" : "out of memory");
  rpc_call_unref(c);
}

void rpc_stats_arrived(rpc_call_t *c) {
  rpc_message_t in;
  if (rpc_read_message(c->payload, &in) != GEMMD_OK) {
    rpc_finish(c, NULL, 0, GEMMD_CODE_INVALID_ARGUMENT, "the request carried no message");
    return;
  }
  Gemmd__V1__GetStatsRequest *m = gemmd__v1__get_stats_request__unpack(NULL, in.len, in.data);
  rpc_message_release(&in);
  if (m == NULL) {
    rpc_finish(c, NULL, 0, GEMMD_CODE_INVALID_ARGUMENT,
               "the request is not a valid gemmd.v1.GetStatsRequest message");
    return;
  }
  gemmd__v1__get_stats_request__free_unpacked(m, NULL);
  rpc_call_ref(c);
  gemmd_server_post(c->rpc->srv, stats_on_loop, c);
}

/* ---- Check ------------------------------------------------------------------------------ */

static void check_reply(gemmd_server_t *srv, rpc_call_t *c, int kind) {
  size_t len;
  uint8_t *buf = pack_status(status_of(srv, kind), &len);
  rpc_finish(c, buf, len, buf ? GEMMD_CODE_OK : GEMMD_CODE_RESOURCE_EXHAUSTED, buf ? "" : "out of memory");
  rpc_call_unref(c);
}

static void check_on_loop(gemmd_server_t *srv, void *arg) { check_reply(srv, arg, SERVICE_READINESS); }

static void liveness_on_loop(gemmd_server_t *srv, void *arg) { check_reply(srv, arg, SERVICE_LIVENESS); }

void rpc_health_check_arrived(rpc_call_t *c) {
  char *service = decode_service(c->payload);
  if (service == NULL) {
    rpc_finish(c, NULL, 0, GEMMD_CODE_INVALID_ARGUMENT,
               "the request is not a valid grpc.health.v1.HealthCheckRequest message");
    return;
  }
  const int kind = service_kind(service);
  if (kind == SERVICE_UNKNOWN) {
    char msg[400];
    snprintf(msg, sizeof msg, "unknown service '%.300s'; known: \"\", gemmd.v1.GemmService and liveness",
             service);
    free(service);
    rpc_finish(c, NULL, 0, GEMMD_CODE_NOT_FOUND, msg);
    return;
  }
  free(service);
  rpc_call_ref(c);
  gemmd_server_post(c->rpc->srv, kind == SERVICE_LIVENESS ? liveness_on_loop : check_on_loop, c);
}

/* ---- Watch ------------------------------------------------------------------------------ */

typedef struct {
  rpc_call_t base;
  gemmd_watcher_t watcher; /* registered with the server while the stream lives */
  rpc_tag_t on_recv, on_send, on_closed;
  grpc_byte_buffer *recv_buf;
  pthread_mutex_t mu;
  int kind; /* SERVICE_*: what the stream watches */
  serving_status_t want, sent; /* latest status, and the last one sent (-1: none) */
  int sending, metadata_sent, ended, watching;
  grpc_byte_buffer *send_buf;
} watch_call_t;

size_t rpc_health_watch_call_size(void) { return sizeof(watch_call_t); }

static void watch_cleanup(rpc_call_t *c) {
  watch_call_t *w = (watch_call_t *)c;
  if (w->recv_buf) grpc_byte_buffer_destroy(w->recv_buf);
  if (w->send_buf) grpc_byte_buffer_destroy(w->send_buf);
  pthread_mutex_destroy(&w->mu);
}

static void on_watch_send(rpc_tag_t *tag, int ok);

/* With mu held: send the latest status if it differs from the last one sent. */
static void watch_pump(watch_call_t *w) {
  if (w->sending || w->ended || w->want == w->sent) return;
  size_t len;
  uint8_t *buf = pack_status(w->want, &len);
  if (buf == NULL) return;
  grpc_op ops[2];
  size_t n = 0;
  memset(ops, 0, sizeof ops);
  if (!w->metadata_sent) {
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    w->metadata_sent = 1;
  }
  w->send_buf = rpc_buffer(buf, len);
  ops[n].op = GRPC_OP_SEND_MESSAGE;
  ops[n++].data.send_message.send_message = w->send_buf;
  w->sending = 1;
  w->sent = w->want;
  rpc_call_ref(&w->base);
  rpc_send_started(w->base.rpc);
  if (grpc_call_start_batch(w->base.call, ops, n, &w->on_send, NULL) != GRPC_CALL_OK) {
    w->sending = 0;
    w->ended = 1;
    rpc_send_done(w->base.rpc);
    rpc_call_unref(&w->base);
  }
}

static void on_watch_send(rpc_tag_t *tag, int ok) {
  watch_call_t *w = RPC_CONTAINER(tag, watch_call_t, on_send);
  rpc_send_done(w->base.rpc);
  pthread_mutex_lock(&w->mu);
  w->sending = 0;
  grpc_byte_buffer_destroy(w->send_buf);
  w->send_buf = NULL;
  if (!ok) w->ended = 1;
  watch_pump(w);
  pthread_mutex_unlock(&w->mu);
  rpc_call_unref(&w->base);
}

/* Loop thread: the server's status changed. */
static void watch_changed(gemmd_watcher_t *gw, int serving) {
  watch_call_t *w = RPC_CONTAINER(gw, watch_call_t, watcher);
  pthread_mutex_lock(&w->mu);
  if (w->kind == SERVICE_READINESS) w->want = serving ? ST_SERVING : ST_NOT_SERVING;
  watch_pump(w);
  pthread_mutex_unlock(&w->mu);
}

static void watch_start_on_loop(gemmd_server_t *srv, void *arg) {
  watch_call_t *w = arg;
  pthread_mutex_lock(&w->mu);
  const int ended = w->ended;
  w->want = status_of(srv, w->kind);
  watch_pump(w);
  if (!ended) {
    w->watching = 1;
    w->watcher.changed = watch_changed;
    gemmd_server_watch(srv, &w->watcher); /* keeps the loop's reference */
  }
  pthread_mutex_unlock(&w->mu);
  if (ended) rpc_call_unref(&w->base);
}

static void watch_stop_on_loop(gemmd_server_t *srv, void *arg) {
  watch_call_t *w = arg;
  if (w->watching) {
    gemmd_server_unwatch(srv, &w->watcher);
    w->watching = 0;
    rpc_call_unref(&w->base); /* the registration's reference */
  }
  rpc_call_unref(&w->base); /* this post's reference */
}

/* The client cancelled or the server is shutting down: stop watching. */
static void on_watch_closed(rpc_tag_t *tag, int ok) {
  (void)ok;
  watch_call_t *w = RPC_CONTAINER(tag, watch_call_t, on_closed);
  pthread_mutex_lock(&w->mu);
  w->ended = 1;
  pthread_mutex_unlock(&w->mu);
  gemmd_server_post(w->base.rpc->srv, watch_stop_on_loop, w); /* takes the close's reference */
}

static void on_watch_recv(rpc_tag_t *tag, int ok) {
  watch_call_t *w = RPC_CONTAINER(tag, watch_call_t, on_recv);
  char *service = ok && w->recv_buf ? decode_service(w->recv_buf) : NULL;
  if (service == NULL) {
    pthread_mutex_lock(&w->mu);
    w->ended = 1;
    pthread_mutex_unlock(&w->mu);
    if (ok) {
      rpc_finish(&w->base, NULL, 0, GEMMD_CODE_INVALID_ARGUMENT,
                 "the request is not a valid grpc.health.v1.HealthCheckRequest message");
    }
    rpc_call_unref(&w->base);
    return;
  }
  w->kind = service_kind(service);
  free(service);
  gemmd_server_post(w->base.rpc->srv, watch_start_on_loop, w); /* takes the recv's reference */
}

void rpc_health_watch_arrived(rpc_call_t *c) {
  watch_call_t *w = (watch_call_t *)c;
  pthread_mutex_init(&w->mu, NULL);
  c->cleanup = watch_cleanup;
  w->sent = (serving_status_t)-1;
  w->want = (serving_status_t)-1;
  w->on_recv.fn = on_watch_recv;
  w->on_send.fn = on_watch_send;
  w->on_closed.fn = on_watch_closed;
  /* Our own recv-close, so that a cancel also unregisters the watcher. */
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  op.data.recv_close_on_server.cancelled = &c->cancelled;
  rpc_call_ref(c);
  if (grpc_call_start_batch(c->call, &op, 1, &w->on_closed, NULL) != GRPC_CALL_OK) {
    rpc_call_unref(c);
    return;
  }
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &w->recv_buf;
  rpc_call_ref(c);
  if (grpc_call_start_batch(c->call, &op, 1, &w->on_recv, NULL) != GRPC_CALL_OK) {
    rpc_call_unref(c);
  }
}
