/* libgemmclient: open/close, GEMM (sync and async), weights admin, stats, health. */
#include "client/lib/gemmclient.h"

#include <grpc/grpc_security.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/lib/client_impl.h"
#include "client/lib/endpoints.h"
#include "client/lib/files.h"
#include "client/lib/rpc.h"
#include "client/lib/server_stats.h"
#include "client/lib/status.h"
#include "client/lib/wire.h"
#include "gemmd/v1/gemm.pb-c.h"
#include "grpc/health/v1/health.pb-c.h"
#include "third_party/system/absl_deadlock_detection.h"

#define DEFAULT_MAX_MESSAGE_BYTES ((uint64_t)1 << 30)

uint64_t gemmd_client_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int64_t gemmd_client_timeout(const gemmd_client_t *c, int64_t call_timeout_ms) {
  return call_timeout_ms != 0 ? call_timeout_ms : c->timeout_ms;
}

/* ---- open / close ------------------------------------------------------------------- */

/* A PEM file's text, refused when it holds no `-----BEGIN <what>`. */
static int read_pem(const char *path, const char *what, char **pem, gemmd_status_t *status) {
  const int rc = gemmd_file_read_text(path, pem, status);
  if (rc != 0) return rc;
  char marker[64];
  snprintf(marker, sizeof marker, "-----BEGIN %s", what);
  if (strstr(*pem, marker) == NULL) {
    free(*pem);
    *pem = NULL;
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT, "%s: no PEM %s in it", path,
                            strcmp(what, "CERTIFICATE") == 0 ? "certificate" : "private key");
  }
  return GEMMD_STATUS_OK;
}

static int make_credentials(const gemmd_client_options_t *o, grpc_channel_credentials **creds,
                            gemmd_status_t *status) {
  const int has_cert = o->tls_cert_chain != NULL, has_key = o->tls_private_key != NULL;
  if (has_cert != has_key) {
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT,
                            "a client certificate and its private key go together (tls_cert_chain, "
                            "tls_private_key)");
  }
  if (o->tls_root_certs == NULL) {
    if (has_cert) {
      return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT,
                              "a client certificate needs TLS: give the server's CA (tls_root_certs)");
    }
    *creds = grpc_insecure_credentials_create();
    return GEMMD_STATUS_OK;
  }
  char *roots = NULL, *chain = NULL, *key = NULL;
  int rc = read_pem(o->tls_root_certs, "CERTIFICATE", &roots, status);
  if (rc == 0 && has_cert) rc = read_pem(o->tls_cert_chain, "CERTIFICATE", &chain, status);
  if (rc == 0 && has_cert) rc = read_pem(o->tls_private_key, "", &key, status);
  if (rc == 0 && has_cert && strstr(key, "PRIVATE KEY-----") == NULL) {
    rc = gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT, "%s: no PEM private key in it",
                          o->tls_private_key);
  }
  if (rc == 0) {
    grpc_ssl_pem_key_cert_pair pair = {key, chain};
    *creds = grpc_ssl_credentials_create(roots, has_cert ? &pair : NULL, NULL, NULL);
    if (*creds == NULL) {
      rc = gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT, "%s: unusable TLS credentials",
                            has_cert ? o->tls_cert_chain : o->tls_root_certs);
    }
  }
  free(roots);
  free(chain);
  if (key != NULL) {
    memset(key, 0, strlen(key)); /* the private key does not linger in freed memory */
    free(key);
  }
  return rc;
}

static int open_grpc(gemmd_client_t *c, const char *target, const gemmd_client_options_t *o,
                     gemmd_status_t *status) {
  uint64_t max = o->max_message_bytes ? o->max_message_bytes : DEFAULT_MAX_MESSAGE_BYTES;
  if (max > INT_MAX) max = INT_MAX;
  grpc_arg args[2];
  memset(args, 0, sizeof args);
  args[0].type = args[1].type = GRPC_ARG_INTEGER;
  args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
  args[1].key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
  args[0].value.integer = args[1].value.integer = (int)max;
  const grpc_channel_args channel_args = {2, args};
  int rc = gemmd_address_endpoints(target, c->endpoints, &c->n_channels, status);
  if (rc != 0) return rc;
  grpc_channel_credentials *creds = NULL;
  rc = make_credentials(o, &creds, status);
  if (rc != 0) return rc;
  for (size_t i = 0; i < c->n_channels && rc == 0; i++) {
    c->channels[i] = grpc_channel_create(c->endpoints[i], creds, &channel_args);
    if (c->channels[i] == NULL) {
      rc = gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT, "cannot make a gRPC channel to '%s'",
                            c->endpoints[i]);
    }
  }
  grpc_channel_credentials_release(creds);
  if (rc != 0) return rc;
  if (gemmd_async_loop_start(&c->async) != 0) {
    return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED,
                            "cannot start the client's completion thread");
  }
  return GEMMD_STATUS_OK;
}

/* The one place that picks a transport for an address. */
static int open_transport(gemmd_client_t *c, const gemmd_address_t *addr,
                          const gemmd_client_options_t *o, gemmd_status_t *status) {
  switch (addr->transport) {
    case GEMMD_TRANSPORT_GRPC:
      return open_grpc(c, addr->target, o, status);
    case GEMMD_TRANSPORT_SHM:
      return gemmd_shm_connect(addr->target, o, &c->shm, status);
  }
  return gemmd_status_set(status, GEMMD_STATUS_INTERNAL, "unknown transport");
}

/* Once per process, before the client's first grpc_init: gRPC's mutexes skip Debian's
 * debug-build lock-order tracking (third_party/system/absl_deadlock_detection.h); and, if gRPC
 * has not read its configuration yet, $GRPC_POLL_STRATEGY defaults to poll (gemmclient.h
 * says why). */
static pthread_once_t grpc_setup_once = PTHREAD_ONCE_INIT;

static void grpc_setup(void) {
  gemmd_absl_deadlock_detection_off();
  if (!grpc_is_initialized()) setenv("GRPC_POLL_STRATEGY", "poll", 0); /* 0: a value set stays */
}

int gemmd_client_open(const char *address, const gemmd_client_options_t *opts, gemmd_client_t **out,
                      gemmd_status_t *status) {
  static const gemmd_client_options_t kDefaults = {0, 0, NULL, NULL, NULL, NULL};
  const gemmd_client_options_t *o = opts != NULL ? opts : &kDefaults;
  gemmd_address_t addr;
  *out = NULL;
  int rc = gemmd_address_parse(address, &addr, status);
  if (rc != 0) return rc;
  if (o->timeout_ms < 0) {
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT, "timeout_ms is %lld; want >= 0",
                            (long long)o->timeout_ms);
  }
  gemmd_client_t *c = calloc(1, sizeof *c);
  if (c == NULL) {
    return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  }
  pthread_once(&grpc_setup_once, grpc_setup);
  grpc_init();
  c->transport = addr.transport;
  c->timeout_ms = o->timeout_ms;
  if (o->bearer_token != NULL && o->bearer_token[0] != '\0') {
    char *value = malloc(strlen(o->bearer_token) + 8);
    if (value == NULL) {
      gemmd_client_close(c);
      return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    }
    sprintf(value, "Bearer %s", o->bearer_token);
    c->auth_md.key = grpc_slice_from_static_string("authorization");
    c->auth_md.value = grpc_slice_from_copied_string(value);
    free(value);
    c->has_auth = 1;
  }
  gemmd_cq_pool_init(&c->cqs);
  gemmd_rpc_wait_init(&c->wait);
  pthread_mutex_init(&c->ids_mu, NULL);
  rc = open_transport(c, &addr, o, status);
  if (rc != 0) {
    gemmd_client_close(c);
    return rc;
  }
  gemmd_status_clear(status);
  *out = c;
  return GEMMD_STATUS_OK;
}

void gemmd_client_close(gemmd_client_t *c) {
  if (c == NULL) return;
  gemmd_shm_close(c->shm);
  gemmd_async_loop_stop(&c->async);
  gemmd_cq_pool_destroy(&c->cqs);
  for (size_t i = 0; i < GEMMD_MAX_ENDPOINTS; i++) {
    if (c->channels[i] != NULL) grpc_channel_destroy(c->channels[i]);
    free(c->endpoints[i]);
  }
  gemmd_endpoint_ids_free(c);
  pthread_mutex_destroy(&c->ids_mu);
  if (c->has_auth) grpc_slice_unref(c->auth_md.value);
  free(c);
  grpc_shutdown();
}

const char *gemmd_client_transport(const gemmd_client_t *c) {
  return gemmd_transport_name(c->transport);
}

/* ---- unary plumbing ------------------------------------------------------------------ */

/* One unary call to endpoint ep (req's ownership passes). */
static int call_bytes(gemmd_client_t *c, size_t ep, const char *method, int64_t timeout_ms, uint8_t *req,
                      size_t len, grpc_slice *resp, gemmd_status_t *status) {
  grpc_completion_queue *cq = gemmd_cq_pool_get(&c->cqs);
  if (cq == NULL) {
    free(req);
    return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED,
                            "cannot create a completion queue");
  }
  const int rc = gemmd_rpc_unary_sync(c->channels[ep], gemmd_client_auth(c), cq, &c->wait, method,
                                      gemmd_rpc_deadline(gemmd_client_timeout(c, timeout_ms)), req,
                                      len, resp, status);
  gemmd_cq_pool_put(&c->cqs, cq);
  return rc;
}

int gemmd_client_call_message_on(gemmd_client_t *c, size_t ep, const char *method,
                                 const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
                                 ProtobufCMessage **resp, gemmd_status_t *status) {
  uint8_t *buf;
  size_t len;
  grpc_slice bytes;
  int rc = gemmd_wire_pack(req, &buf, &len, status);
  if (rc == 0) rc = call_bytes(c, ep, method, 0, buf, len, &bytes, status);
  if (rc != 0) return rc;
  rc = gemmd_wire_unpack(resp_desc, GRPC_SLICE_START_PTR(bytes), GRPC_SLICE_LENGTH(bytes), resp,
                         status);
  grpc_slice_unref(bytes);
  return rc;
}

int gemmd_client_call_message(gemmd_client_t *c, const char *method, const ProtobufCMessage *req,
                              const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                              gemmd_status_t *status) {
  int rc = GEMMD_STATUS_UNAVAILABLE;
  for (size_t ep = 0; ep < c->n_channels; ep++) {
    rc = gemmd_client_call_message_on(c, ep, method, req, resp_desc, resp, status);
    if (!gemmd_endpoint_retryable(rc)) break;
  }
  return rc;
}

/* ---- GEMM ------------------------------------------------------------------------------ */

void gemmd_gemm_result_free(gemmd_gemm_result_t *r) {
  if (r == NULL) return;
  if (!r->data_borrowed) free(r->data);
  memset(r, 0, sizeof *r);
}

static int decode_result(grpc_slice bytes, gemmd_gemm_result_t *result, gemmd_status_t *status) {
  const int rc =
      gemmd_wire_decode_gemm(GRPC_SLICE_START_PTR(bytes), GRPC_SLICE_LENGTH(bytes), result, status);
  grpc_slice_unref(bytes);
  return rc;
}

int gemmd_client_not_over_shm(const char *what, gemmd_status_t *status) {
  return gemmd_status_set(status, GEMMD_STATUS_UNIMPLEMENTED,
                          "%s is not carried over shared memory (GEMMs and weights are); use "
                          "gemmd's gRPC address for it", what);
}

static int not_over_grpc(const char *what, gemmd_status_t *status) {
  return gemmd_status_set(status, GEMMD_STATUS_UNIMPLEMENTED,
                          "%s are a shared-memory feature: connect to gemmd's socket "
                          "(unix:///...) for them", what);
}

int gemmd_client_region_open_fd(gemmd_client_t *c, int fd, uint64_t bytes, uint32_t *region_id,
                                gemmd_status_t *status) {
  if (!c->shm) return not_over_grpc("regions", status);
  return gemmd_shm_region_open(c->shm, fd, NULL, bytes, region_id, status);
}

int gemmd_client_region_open_cuda_ipc(gemmd_client_t *c, const void *ipc_handle, uint64_t bytes,
                                      uint32_t *region_id, gemmd_status_t *status) {
  if (!c->shm) return not_over_grpc("regions", status);
  if (ipc_handle == NULL) {
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT, "no CUDA IPC handle");
  }
  return gemmd_shm_region_open(c->shm, -1, ipc_handle, bytes, region_id, status);
}

int gemmd_client_region_close(gemmd_client_t *c, uint32_t region_id, gemmd_status_t *status) {
  if (!c->shm) return not_over_grpc("regions", status);
  return gemmd_shm_region_close(c->shm, region_id, status);
}

void *gemmd_client_shm_alloc(gemmd_client_t *c, size_t bytes) {
  return c->shm ? gemmd_shm_alloc(c->shm, bytes) : NULL;
}

void gemmd_client_shm_free(gemmd_client_t *c, void *p) {
  if (c->shm) gemmd_shm_free(c->shm, p);
}

int gemmd_client_gemm(gemmd_client_t *c, const gemmd_gemm_call_t *call, gemmd_gemm_result_t *result,
                      gemmd_status_t *status) {
  if (c->shm) return gemmd_shm_gemm(c->shm, call, result, status);
  const uint64_t t0 = gemmd_client_now_ns();
  uint8_t *buf;
  size_t len;
  grpc_slice bytes;
  memset(result, 0, sizeof *result);
  /* One endpoint after another from the next in turn, while they answer UNAVAILABLE. */
  const size_t first = gemmd_endpoint_pick(c);
  int rc = GEMMD_STATUS_UNAVAILABLE;
  for (size_t k = 0; k < c->n_channels && gemmd_endpoint_retryable(rc); k++) {
    const size_t ep = (first + k) % c->n_channels;
    gemmd_gemm_call_t at = *call;
    at.weight_id = gemmd_endpoint_weight_id(c, call->weight_id, ep);
    rc = gemmd_wire_encode_gemm(&at, &buf, &len, status);
    if (rc == 0) rc = call_bytes(c, ep, GEMMD_METHOD_GEMM, call->timeout_ms, buf, len, &bytes, status);
  }
  if (rc == 0) rc = decode_result(bytes, result, status);
  if (rc == 0) gemmd_status_clear(status);
  result->client_ns = gemmd_client_now_ns() - t0;
  return rc;
}

typedef struct async_gemm_s {
  gemmd_async_tag_t tag; /* first: the loop hands this back */
  gemmd_rpc_unary_t rpc;
  gemmd_client_t *c;
  gemmd_gemm_call_t call; /* for another endpoint, after an UNAVAILABLE */
  size_t first, tries;    /* the first endpoint, and how many were tried */
  gemmd_gemm_done_fn done;
  void *user;
  uint64_t start_ns;
} async_gemm_t;

/* Starts the call on its next endpoint. */
static int async_gemm_start(async_gemm_t *op, gemmd_status_t *status) {
  gemmd_client_t *c = op->c;
  const size_t ep = (op->first + op->tries++) % c->n_channels;
  gemmd_gemm_call_t at = op->call;
  at.weight_id = gemmd_endpoint_weight_id(c, op->call.weight_id, ep);
  uint8_t *buf;
  size_t len;
  int rc = gemmd_wire_encode_gemm(&at, &buf, &len, status);
  if (rc == 0) {
    gemmd_async_loop_begin(&c->async);
    rc = gemmd_rpc_unary_start(&op->rpc, c->channels[ep], gemmd_client_auth(c), c->async.cq,
                               GEMMD_METHOD_GEMM, gemmd_rpc_deadline(gemmd_client_timeout(c, at.timeout_ms)),
                               buf, len, &op->tag, status);
    if (rc != 0) gemmd_async_loop_end(&c->async);
  }
  return rc;
}

static void async_gemm_complete(gemmd_async_tag_t *tag, int ok) {
  async_gemm_t *op = (async_gemm_t *)tag;
  gemmd_status_t status;
  grpc_slice bytes;
  int rc = gemmd_rpc_unary_finish(&op->rpc, ok, &bytes, &status);
  if (gemmd_endpoint_retryable(rc) && op->tries < op->c->n_channels) {
    gemmd_status_t again;
    if (async_gemm_start(op, &again) == 0) return; /* `done` runs when that one ends */
  }
  gemmd_gemm_result_t *result = calloc(1, sizeof *result);
  if (rc == 0 && result == NULL) {
    grpc_slice_unref(bytes);
    rc = gemmd_status_set(&status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  } else if (rc == 0) {
    rc = decode_result(bytes, result, &status);
  }
  if (rc == 0) gemmd_status_clear(&status);
  if (result != NULL) result->client_ns = gemmd_client_now_ns() - op->start_ns;
  op->done(op->user, result, &status);
  free(op);
}

int gemmd_client_gemm_async(gemmd_client_t *c, const gemmd_gemm_call_t *call,
                            gemmd_gemm_done_fn done, void *user, gemmd_status_t *status) {
  if (done == NULL) {
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT, "no done callback");
  }
  if (c->shm) return gemmd_shm_gemm_async(c->shm, call, done, user, status);
  async_gemm_t *op = calloc(1, sizeof *op);
  if (op == NULL) return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  op->tag.complete = async_gemm_complete;
  op->c = c;
  op->call = *call;
  op->first = gemmd_endpoint_pick(c);
  op->done = done;
  op->user = user;
  op->start_ns = gemmd_client_now_ns();
  const int rc = async_gemm_start(op, status);
  if (rc != 0) {
    free(op);
    return rc;
  }
  gemmd_status_clear(status);
  return GEMMD_STATUS_OK;
}

void gemmd_client_drain(gemmd_client_t *c) {
  if (c->shm) {
    gemmd_shm_drain(c->shm);
  } else {
    gemmd_async_loop_drain(&c->async);
  }
}

/* ---- weights, stats, health ------------------------------------------------------------ */

int gemmd_client_unregister_weight(gemmd_client_t *c, uint64_t weight_id, const char *name,
                                   gemmd_status_t *status) {
  if (c->shm) return gemmd_shm_unregister_weight(c->shm, weight_id, name, status);
  Gemmd__V1__UnregisterWeightRequest req = GEMMD__V1__UNREGISTER_WEIGHT_REQUEST__INIT;
  if (weight_id != 0) {
    req.weight_case = GEMMD__V1__UNREGISTER_WEIGHT_REQUEST__WEIGHT_WEIGHT_ID;
    req.weight_id = weight_id;
  } else if (name != NULL) {
    req.weight_case = GEMMD__V1__UNREGISTER_WEIGHT_REQUEST__WEIGHT_NAME;
    req.name = (char *)name;
  } else {
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT,
                            "name the weight to unregister (an id or a name)");
  }
  /* On every endpoint, each by the id it knows; the first failure is the answer. */
  int rc = GEMMD_STATUS_OK;
  for (size_t ep = 0; ep < c->n_channels; ep++) {
    if (weight_id != 0) req.weight_id = gemmd_endpoint_weight_id(c, weight_id, ep);
    ProtobufCMessage *resp = NULL;
    gemmd_status_t st;
    const int one = gemmd_client_call_message_on(c, ep, GEMMD_METHOD_UNREGISTER_WEIGHT, &req.base,
                                                 &gemmd__v1__unregister_weight_response__descriptor, &resp, &st);
    if (resp != NULL) protobuf_c_message_free_unpacked(resp, NULL);
    if (one != 0 && rc == 0) {
      rc = c->n_channels > 1 ? gemmd_status_set(status, one, "%s: %s", c->endpoints[ep], st.message)
                             : gemmd_status_set(status, one, "%s", st.message);
    }
  }
  if (rc == 0) {
    if (weight_id != 0) gemmd_endpoint_ids_remove(c, weight_id);
    gemmd_status_clear(status);
  }
  return rc;
}

int gemmd_client_list_weights(gemmd_client_t *c, gemmd_weight_info_t **infos, size_t *count,
                              gemmd_status_t *status) {
  Gemmd__V1__ListWeightsRequest req = GEMMD__V1__LIST_WEIGHTS_REQUEST__INIT;
  ProtobufCMessage *msg = NULL;
  *infos = NULL;
  *count = 0;
  if (c->shm) return gemmd_client_not_over_shm("ListWeights", status);
  int rc = gemmd_client_call_message(c, GEMMD_METHOD_LIST_WEIGHTS, &req.base,
                                     &gemmd__v1__list_weights_response__descriptor, &msg, status);
  if (rc != 0) return rc;
  const Gemmd__V1__ListWeightsResponse *resp = (const Gemmd__V1__ListWeightsResponse *)msg;
  if (resp->n_weights > 0) {
    *infos = calloc(resp->n_weights, sizeof **infos);
    if (*infos == NULL) {
      rc = gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    }
  }
  for (size_t i = 0; rc == 0 && i < resp->n_weights; i++) {
    gemmd_wire_weight_info(resp->weights[i], &(*infos)[i]);
  }
  if (rc == 0) *count = resp->n_weights;
  protobuf_c_message_free_unpacked(msg, NULL);
  return rc;
}

int gemmd_client_get_stats(gemmd_client_t *c, gemmd_server_stats_t *stats, gemmd_status_t *status) {
  Gemmd__V1__GetStatsRequest req = GEMMD__V1__GET_STATS_REQUEST__INIT;
  ProtobufCMessage *msg = NULL;
  memset(stats, 0, sizeof *stats);
  if (c->shm) return gemmd_client_not_over_shm("GetStats", status);
  int rc = gemmd_client_call_message(c, GEMMD_METHOD_GET_STATS, &req.base,
                                     &gemmd__v1__server_stats__descriptor, &msg, status);
  if (rc != 0) return rc;
  rc = gemmd_server_stats_from_pb((const Gemmd__V1__ServerStats *)msg, stats, status);
  protobuf_c_message_free_unpacked(msg, NULL);
  return rc;
}

int gemmd_client_get_stats_json(gemmd_client_t *c, char **json, gemmd_status_t *status) {
  gemmd_server_stats_t stats;
  *json = NULL;
  int rc = gemmd_client_get_stats(c, &stats, status);
  if (rc != 0) return rc;
  rc = gemmd_server_stats_json(&stats, json);
  gemmd_server_stats_free(&stats);
  if (rc != 0) return gemmd_status_set(status, rc, "out of memory rendering ServerStats");
  return GEMMD_STATUS_OK;
}

int gemmd_client_health(gemmd_client_t *c, const char *service, int *serving,
                        gemmd_status_t *status) {
  Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
  ProtobufCMessage *msg = NULL;
  req.service = (char *)(service != NULL ? service : "");
  *serving = 0;
  if (c->shm) return gemmd_client_not_over_shm("the health check", status);
  const int rc =
      gemmd_client_call_message(c, GEMMD_METHOD_HEALTH_CHECK, &req.base,
                                &grpc__health__v1__health_check_response__descriptor, &msg, status);
  if (rc != 0) return rc;
  *serving = ((const Grpc__Health__V1__HealthCheckResponse *)msg)->status ==
             GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
  protobuf_c_message_free_unpacked(msg, NULL);
  return GEMMD_STATUS_OK;
}
