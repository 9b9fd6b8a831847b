/* The gRPC transport's core: server set-up, completion-queue threads, the life of a
 * call, and the helpers the method files share (rpc_internal.h). */
#include "daemon/rpc_grpc.h"

#include <errno.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/cpus.h"
#include "daemon/log.h"
#include "daemon/rpc_internal.h"
#include "kernels/errors.h"
#include "third_party/system/absl_deadlock_detection.h"

static const struct {
  const char *path;
  int with_payload; /* unary: the request message arrives with the call */
  int preposted;    /* calls requested ahead, per completion queue */
} kMethods[M_COUNT] = {
    [M_GEMM] = {"/gemmd.v1.GemmService/Gemm", 1, 32},
    [M_GEMM_STREAM] = {"/gemmd.v1.GemmService/GemmStream", 0, 4},
    [M_REGISTER] = {"/gemmd.v1.GemmService/RegisterWeight", 0, 2},
    [M_UNREGISTER] = {"/gemmd.v1.GemmService/UnregisterWeight", 1, 2},
    [M_LIST] = {"/gemmd.v1.GemmService/ListWeights", 1, 2},
    [M_STATS] = {"/gemmd.v1.GemmService/GetStats", 1, 2},
    [M_HEALTH_CHECK] = {"/grpc.health.v1.Health/Check", 1, 2},
    [M_HEALTH_WATCH] = {"/grpc.health.v1.Health/Watch", 0, 2},
    [M_UNKNOWN] = {NULL, 0, 2},
};

static void request_call(gemmd_rpc_t *rpc, int method, int cq);
static void maybe_finish_shutdown(gemmd_rpc_t *rpc);

/* ---- Calls ----------------------------------------------------------------------------- */

static size_t call_size(int method) {
  switch (method) {
    case M_GEMM:
      return rpc_gemm_call_size();
    case M_GEMM_STREAM:
      return rpc_gemm_stream_call_size();
    case M_REGISTER:
      return rpc_register_call_size();
    case M_HEALTH_WATCH:
      return rpc_health_watch_call_size();
    default:
      return sizeof(rpc_call_t);
  }
}

void rpc_call_ref(rpc_call_t *c) { atomic_fetch_add(&c->refs, 1); }

void rpc_call_unref(rpc_call_t *c) {
  if (atomic_fetch_sub(&c->refs, 1) != 1) return;
  gemmd_rpc_t *rpc = c->rpc;
  if (c->cleanup) c->cleanup(c);
  if (c->call) grpc_call_unref(c->call);
  if (c->payload) grpc_byte_buffer_destroy(c->payload);
  if (c->final_buf) grpc_byte_buffer_destroy(c->final_buf);
  if (c->has_final_details) grpc_slice_unref(c->final_details);
  grpc_metadata_array_destroy(&c->md);
  if (c->method == M_UNKNOWN) grpc_call_details_destroy(&c->details);
  free(c);
  atomic_fetch_sub(&rpc->live_calls, 1);
  maybe_finish_shutdown(rpc);
}

static uint64_t hash_peer(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* The call's deadline as CLOCK_MONOTONIC ns (0: none). */
static uint64_t deadline_ns(gpr_timespec deadline) {
  const gpr_timespec d = gpr_convert_clock_type(deadline, GPR_CLOCK_MONOTONIC);
  if (gpr_time_cmp(d, gpr_inf_future(GPR_CLOCK_MONOTONIC)) == 0) return 0;
  const gpr_timespec left = gpr_time_sub(d, gpr_now(GPR_CLOCK_MONOTONIC));
  const int64_t ns = left.tv_sec * 1000000000ll + left.tv_nsec;
  const uint64_t now = gemmd_now_ns();
  return ns <= 0 ? (now ? now : 1) : now + (uint64_t)ns;
}

static void on_close_done(rpc_tag_t *tag, int ok) {
  (void)ok;
  rpc_call_t *c = RPC_CONTAINER(tag, rpc_call_t, on_close);
  rpc_call_unref(c);
}

void rpc_watch_close(rpc_call_t *c) {
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  op.data.recv_close_on_server.cancelled = &c->cancelled;
  c->on_close.fn = on_close_done;
  rpc_call_ref(c);
  if (grpc_call_start_batch(c->call, &op, 1, &c->on_close, NULL) != GRPC_CALL_OK) {
    rpc_call_unref(c);
  }
}

static void unknown_arrived(rpc_call_t *c) {
  char msg[300];
  const grpc_slice m = c->details.method;
  snprintf(msg, sizeof msg, "method %.*s is not served by gemmd",
           (int)GRPC_SLICE_LENGTH(m), (const char *)GRPC_SLICE_START_PTR(m));
  rpc_finish(c, NULL, 0, GRPC_STATUS_UNIMPLEMENTED, msg);
}

/* With --grpc-token-file: 1 when the call carries a valid bearer token. grpc.health.v1 is
 * open, as Kubernetes' gRPC probes send no metadata. */
static int authorized(gemmd_rpc_t *rpc, const rpc_call_t *c) {
  if (!rpc->auth_on || c->method == M_HEALTH_CHECK || c->method == M_HEALTH_WATCH) return 1;
  for (size_t i = 0; i < c->md.count; i++) {
    const grpc_slice k = c->md.metadata[i].key;
    if (GRPC_SLICE_LENGTH(k) == 13 && memcmp(GRPC_SLICE_START_PTR(k), "authorization", 13) == 0) {
      const grpc_slice v = c->md.metadata[i].value;
      return gemmd_auth_check(&rpc->auth, (const char *)GRPC_SLICE_START_PTR(v), GRPC_SLICE_LENGTH(v));
    }
  }
  return 0;
}

static void on_arrive(rpc_tag_t *tag, int ok) {
  rpc_call_t *c = RPC_CONTAINER(tag, rpc_call_t, on_arrive);
  gemmd_rpc_t *rpc = c->rpc;
  if (!ok) { /* the server is shutting down: this request slot is void */
    rpc_call_unref(c);
    return;
  }
  if (!atomic_load(&rpc->shutting_down)) request_call(rpc, c->method, c->cq);
  c->accepted_ns = gemmd_now_ns();
  c->deadline_ns = deadline_ns(c->deadline);
  char *peer = grpc_call_get_peer(c->call);
  c->conn_id = hash_peer(peer);
  gpr_free(peer);
  if (!authorized(rpc, c)) {
    rpc_finish(c, NULL, 0, GRPC_STATUS_UNAUTHENTICATED,
               "this gemmd requires 'authorization: Bearer <token>' metadata with a token from its "
               "--grpc-token-file");
    rpc_call_unref(c);
    return;
  }
  switch (c->method) {
    case M_GEMM:
      rpc_gemm_arrived(c);
      break;
    case M_GEMM_STREAM:
      rpc_gemm_stream_arrived(c);
      break;
    case M_REGISTER:
      rpc_register_arrived(c);
      break;
    case M_UNREGISTER:
      rpc_unregister_arrived(c);
      break;
    case M_LIST:
      rpc_list_arrived(c);
      break;
    case M_STATS:
      rpc_stats_arrived(c);
      break;
    case M_HEALTH_CHECK:
      rpc_health_check_arrived(c);
      break;
    case M_HEALTH_WATCH:
      rpc_health_watch_arrived(c);
      break;
    default:
      unknown_arrived(c);
      break;
  }
  rpc_call_unref(c); /* the arrival's own reference */
}

/* Asks gRPC for the next call of `method` on completion queue `cq`. */
static void request_call(gemmd_rpc_t *rpc, int method, int cq) {
  rpc_call_t *c = calloc(1, call_size(method));
  if (c == NULL) {
    gemmd_log(GEMMD_LOG_ERROR, "out of memory requesting a gRPC call", "");
    return;
  }
  c->rpc = rpc;
  c->method = method;
  c->cq = cq;
  atomic_init(&c->refs, 1);
  c->on_arrive.fn = on_arrive;
  grpc_metadata_array_init(&c->md);
  atomic_fetch_add(&rpc->live_calls, 1);
  grpc_call_error err;
  if (method == M_UNKNOWN) {
    grpc_call_details_init(&c->details);
    err = grpc_server_request_call(rpc->server, &c->call, &c->details, &c->md, rpc->cq[cq],
                                   rpc->cq[cq], &c->on_arrive);
  } else {
    err = grpc_server_request_registered_call(
        rpc->server, rpc->handles[method], &c->call, &c->deadline, &c->md,
        kMethods[method].with_payload ? &c->payload : NULL, rpc->cq[cq], rpc->cq[cq],
        &c->on_arrive);
  }
  if (err != GRPC_CALL_OK) {
    if (!atomic_load(&rpc->shutting_down)) {
      gemmd_log(GEMMD_LOG_ERROR, "gRPC refused a call request", "method=%d error=%d", method, err);
    }
    rpc_call_unref(c);
  }
}

/* ---- Helpers ---------------------------------------------------------------------------- */

int rpc_read_message(grpc_byte_buffer *bb, rpc_message_t *m) {
  grpc_byte_buffer_reader reader;
  if (bb == NULL || !grpc_byte_buffer_reader_init(&reader, bb)) return GEMMD_EINVAL;
  m->slice = grpc_byte_buffer_reader_readall(&reader);
  grpc_byte_buffer_reader_destroy(&reader);
  m->data = GRPC_SLICE_START_PTR(m->slice);
  m->len = GRPC_SLICE_LENGTH(m->slice);
  return GEMMD_OK;
}

void rpc_message_release(rpc_message_t *m) { grpc_slice_unref(m->slice); }

grpc_byte_buffer *rpc_buffer(uint8_t *packed, size_t len) {
  grpc_slice s = grpc_slice_new(packed, len, free);
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
  return bb;
}

static void on_final_done(rpc_tag_t *tag, int ok) {
  (void)ok;
  rpc_call_t *c = RPC_CONTAINER(tag, rpc_call_t, on_final);
  rpc_send_done(c->rpc);
  rpc_call_unref(c);
}

void rpc_finish(rpc_call_t *c, uint8_t *packed, size_t len, int code, const char *message) {
  grpc_op ops[3];
  size_t n = 0;
  memset(ops, 0, sizeof ops);
  ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  if (packed != NULL) {
    c->final_buf = rpc_buffer(packed, len);
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = c->final_buf;
  }
  c->final_details = grpc_slice_from_copied_string(message ? message : "");
  c->has_final_details = 1;
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = (grpc_status_code)code;
  ops[n++].data.send_status_from_server.status_details = &c->final_details;
  c->on_final.fn = on_final_done;
  rpc_call_ref(c);
  rpc_send_started(c->rpc);
  if (grpc_call_start_batch(c->call, ops, n, &c->on_final, NULL) != GRPC_CALL_OK) {
    rpc_send_done(c->rpc);
    rpc_call_unref(c);
  }
}

/* ---- Threads ---------------------------------------------------------------------------- */

typedef struct {
  gemmd_rpc_t *rpc;
  int index;
} thread_arg_t;

/* --grpc-spin-us, where -1 picks by the CPUs gemmd may run on: a spinning completion-queue
 * thread takes a core from the clients and gemmd's other threads, which on a 2-CPU machine
 * made a 64 KB answer 6-27% slower (docs/bench/grpc_cpu.md). */
enum { CQ_SPIN_AUTO_US = 200, CQ_SPIN_MIN_CPUS = 8 };

static int64_t cq_spin_us(const gemmd_config_t *cfg) {
  if (cfg->grpc_spin_us >= 0) return cfg->grpc_spin_us;
  return gemmd_cpus_usable() >= CQ_SPIN_MIN_CPUS ? CQ_SPIN_AUTO_US : 0;
}

/* For --grpc-spin-us after each event the thread asks its queue with a deadline already
 * past, which polls the sockets once without sleeping, so that the next request or send
 * completion is not a thread wake-up away; then it blocks. */
static void *cq_thread(void *arg) {
  thread_arg_t *ta = arg;
  const uint64_t spin_ns = ta->rpc->spin_ns;
  grpc_completion_queue *cq = ta->rpc->cq[ta->index];
  free(ta);
  uint64_t spin_until = 0;
  for (;;) {
    const int spin = spin_ns > 0 && gemmd_now_ns() < spin_until;
    grpc_event ev = grpc_completion_queue_next(
        cq, spin ? gpr_time_0(GPR_CLOCK_REALTIME) : gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
    if (ev.type == GRPC_OP_COMPLETE) {
      rpc_tag_t *tag = ev.tag;
      tag->fn(tag, ev.success);
      if (spin_ns > 0) spin_until = gemmd_now_ns() + spin_ns;
    }
  }
  return NULL;
}

/* ---- Start and shutdown ------------------------------------------------------------------ */

static char *read_file(const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
    return NULL;
  }
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 8192;
      char *grown = realloc(buf, cap);
      if (grown == NULL) {
        free(buf);
        fclose(f);
        snprintf(err, errlen, "out of memory reading %s", path);
        return NULL;
      }
      buf = grown;
    }
    const size_t got = fread(buf + len, 1, 4096, f);
    len += got;
    if (got < 4096) break;
  }
  fclose(f);
  buf[len] = '\0';
  return buf;
}

static grpc_server_credentials *make_credentials(const gemmd_config_t *cfg, char *err,
                                                 size_t errlen) {
  if (cfg->tls_cert[0] == '\0' && cfg->tls_key[0] == '\0') {
    return grpc_insecure_server_credentials_create();
  }
  if (cfg->tls_cert[0] == '\0' || cfg->tls_key[0] == '\0') {
    snprintf(err, errlen, "--tls-cert and --tls-key go together");
    return NULL;
  }
  char *cert = read_file(cfg->tls_cert, err, errlen);
  char *key = cert ? read_file(cfg->tls_key, err, errlen) : NULL;
  char *ca = (key && cfg->tls_client_ca[0]) ? read_file(cfg->tls_client_ca, err, errlen) : NULL;
  grpc_server_credentials *creds = NULL;
  if (cert && key && (ca || cfg->tls_client_ca[0] == '\0')) {
    grpc_ssl_pem_key_cert_pair pair = {key, cert};
    creds = grpc_ssl_server_credentials_create_ex(
        ca, &pair, 1,
        ca ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
           : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
        NULL);
    if (creds == NULL) snprintf(err, errlen, "gRPC rejected the TLS certificate or key");
  }
  free(cert);
  free(key);
  free(ca);
  return creds;
}

static void on_shutdown_tag(rpc_tag_t *tag, int ok) {
  (void)ok;
  gemmd_rpc_t *rpc = RPC_CONTAINER(tag, gemmd_rpc_t, shutdown_tag);
  atomic_store(&rpc->shutdown_notified, 1);
  maybe_finish_shutdown(rpc);
}

void gemmd_rpc_process_setup(const gemmd_config_t *cfg) {
  gemmd_absl_deadlock_detection_off();
  if (strcmp(cfg->grpc_poller, "auto") != 0) {
    setenv("GRPC_POLL_STRATEGY", cfg->grpc_poller, 1);
  } else if (getenv("GRPC_POLL_STRATEGY") == NULL) {
    setenv("GRPC_POLL_STRATEGY", "poll", 1);
  }
}

int gemmd_rpc_start(gemmd_server_t *srv, gemmd_rpc_t **out, int *port, char *err, size_t errlen) {
  const gemmd_config_t *cfg = srv->cfg;
  grpc_init();
  gemmd_rpc_t *rpc = calloc(1, sizeof *rpc);
  if (rpc == NULL) {
    snprintf(err, errlen, "out of memory");
    grpc_shutdown();
    return GEMMD_ENOMEM;
  }
  rpc->srv = srv;
  rpc->max_message_bytes = (uint32_t)cfg->max_message_bytes;
  if (cfg->grpc_token_file[0] != '\0') {
    char msg[1200];
    if (gemmd_auth_init(&rpc->auth, cfg->grpc_token_file, msg, sizeof msg) != 0) {
      snprintf(err, errlen, "--grpc-token-file: %s", msg);
      gemmd_auth_free(&rpc->auth);
      free(rpc);
      grpc_shutdown();
      return GEMMD_EINVAL;
    }
    rpc->auth_on = 1;
    gemmd_log(GEMMD_LOG_INFO, "gRPC requires bearer tokens", "file=\"%s\" tokens=%zu",
              cfg->grpc_token_file, rpc->auth.n);
  }
  rpc->shutdown_tag.fn = on_shutdown_tag;
  grpc_arg args[2];
  args[0].type = GRPC_ARG_INTEGER;
  args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
  args[0].value.integer = (int)cfg->max_message_bytes;
  args[1].type = GRPC_ARG_INTEGER;
  args[1].key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
  args[1].value.integer = (int)cfg->max_message_bytes;
  const grpc_channel_args channel_args = {2, args};
  rpc->server = grpc_server_create(&channel_args, NULL);
  rpc->n_cq = (int)cfg->grpc_threads;
  rpc->spin_ns = (uint64_t)cq_spin_us(cfg) * 1000u;
  rpc->cq = calloc((size_t)rpc->n_cq, sizeof *rpc->cq);
  rpc->threads = calloc((size_t)rpc->n_cq, sizeof *rpc->threads);
  for (int i = 0; i < rpc->n_cq; i++) {
    rpc->cq[i] = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(rpc->server, rpc->cq[i], NULL);
  }
  for (int m = 0; m < M_COUNT; m++) {
    if (kMethods[m].path == NULL) continue;
    rpc->handles[m] = grpc_server_register_method(
        rpc->server, kMethods[m].path, NULL,
        kMethods[m].with_payload ? GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER
                                 : GRPC_SRM_PAYLOAD_NONE,
        0);
  }
  grpc_server_credentials *creds = make_credentials(cfg, err, errlen);
  if (creds == NULL) goto fail;
  *port = grpc_server_add_http2_port(rpc->server, cfg->grpc_listen, creds);
  grpc_server_credentials_release(creds);
  if (*port == 0) {
    snprintf(err, errlen, "cannot listen on %s (address in use or invalid)", cfg->grpc_listen);
    goto fail;
  }
  grpc_server_start(rpc->server);
  for (int i = 0; i < rpc->n_cq; i++) {
    for (int m = 0; m < M_COUNT; m++) {
      for (int k = 0; k < kMethods[m].preposted; k++) request_call(rpc, m, i);
    }
    thread_arg_t *ta = malloc(sizeof *ta);
    ta->rpc = rpc;
    ta->index = i;
    pthread_create(&rpc->threads[i], NULL, cq_thread, ta);
    pthread_setname_np(rpc->threads[i], "gemmd-grpc-cq");
  }
  *out = rpc;
  return GEMMD_OK;

fail:
  grpc_server_shutdown_and_notify(rpc->server, rpc->cq[0], &rpc->shutdown_tag);
  grpc_completion_queue_pluck(rpc->cq[0], &rpc->shutdown_tag, gpr_inf_future(GPR_CLOCK_REALTIME),
                              NULL);
  grpc_server_destroy(rpc->server);
  for (int i = 0; i < rpc->n_cq; i++) {
    grpc_completion_queue_shutdown(rpc->cq[i]);
    while (grpc_completion_queue_next(rpc->cq[i], gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(rpc->cq[i]);
  }
  free(rpc->cq);
  free(rpc->threads);
  if (rpc->auth_on) gemmd_auth_free(&rpc->auth);
  free(rpc);
  grpc_shutdown();
  return GEMMD_EIO;
}

/* Loop thread, once the server has shut down and the last call is gone. */
static void finish_shutdown(gemmd_server_t *srv, void *arg) {
  gemmd_rpc_t *rpc = arg;
  for (int i = 0; i < rpc->n_cq; i++) grpc_completion_queue_shutdown(rpc->cq[i]);
  for (int i = 0; i < rpc->n_cq; i++) pthread_join(rpc->threads[i], NULL);
  grpc_server_destroy(rpc->server);
  for (int i = 0; i < rpc->n_cq; i++) grpc_completion_queue_destroy(rpc->cq[i]);
  void (*done)(gemmd_server_t *, void *) = rpc->done;
  void *done_arg = rpc->done_arg;
  free(rpc->cq);
  free(rpc->threads);
  if (rpc->auth_on) gemmd_auth_free(&rpc->auth);
  free(rpc);
  grpc_shutdown();
  gemmd_log(GEMMD_LOG_INFO, "gRPC stopped", "");
  done(srv, done_arg);
}

static void maybe_finish_shutdown(gemmd_rpc_t *rpc) {
  if (!atomic_load(&rpc->flush_done) || !atomic_load(&rpc->shutdown_notified) ||
      atomic_load(&rpc->live_calls) != 0) {
    return;
  }
  if (atomic_exchange(&rpc->finish_posted, 1)) return;
  gemmd_server_post(rpc->srv, finish_shutdown, rpc);
}

/* How long shutdown waits for answers already sent to reach their clients. A large answer
 * to a client on a loaded machine can take seconds; the wait ends early once all are sent,
 * so only a client that stopped reading holds shutdown this long (Triton's default exit
 * timeout is the same 30 s). */
static const uint64_t kFlushGraceNs = 30000000000ull;
/* How long after the last send completed its client may take to read it before the calls
 * left are cancelled (nginx's lingering close waits up to 5 s for a client's last bytes). */
static const uint64_t kLingerNs = 1000000000ull;

/* Shutdown, step 2: once the answers already given have been sent and read (or after a
 * grace period for clients that stopped reading), cancel the calls left: health watches
 * and streams that are open but idle. */
static void on_flush_closed(uv_handle_t *h) {
  gemmd_rpc_t *rpc = h->data;
  atomic_store(&rpc->flush_done, 1);
  maybe_finish_shutdown(rpc);
}

static void on_flush_timer(uv_timer_t *t) {
  gemmd_rpc_t *rpc = t->data;
  const uint64_t now = gemmd_now_ns();
  if (now < rpc->flush_deadline_ns) {
    if (atomic_load(&rpc->sends_in_flight) > 0) return;
    /* A completed send is in the kernel's socket buffers, perhaps not yet read by its
     * client, and cancelling disconnects every transport: a socket closed with the
     * client's frames unread resets, and the answer's tail is lost. So after a recent send
     * wait until the clients have closed their connections after the GOAWAY (the shutdown
     * tag comes then) or a linger has passed (idle health watches and streams stay). */
    if (!atomic_load(&rpc->shutdown_notified) && now < atomic_load(&rpc->last_send_done_ns) + kLingerNs)
      return;
  }
  uv_timer_stop(t);
  grpc_server_cancel_all_calls(rpc->server);
  uv_close((uv_handle_t *)t, on_flush_closed);
}

void gemmd_rpc_shutdown(gemmd_rpc_t *rpc, void (*done)(gemmd_server_t *, void *), void *arg) {
  rpc->done = done;
  rpc->done_arg = arg;
  /* Sends that completed before now may still be unread: the linger counts from here at
   * the earliest (rpc_send_done records the later ones). */
  atomic_store(&rpc->last_send_done_ns, gemmd_now_ns());
  atomic_store(&rpc->shutting_down, 1);
  /* Step 1: no new calls. */
  grpc_server_shutdown_and_notify(rpc->server, rpc->cq[0], &rpc->shutdown_tag);
  rpc->flush_deadline_ns = gemmd_now_ns() + kFlushGraceNs;
  uv_timer_init(&rpc->srv->loop, &rpc->flush_timer);
  rpc->flush_timer.data = rpc;
  uv_timer_start(&rpc->flush_timer, on_flush_timer, 0, 10);
}

void gemmd_rpc_tick(gemmd_rpc_t *rpc) {
  if (!rpc->auth_on) return;
  char err[1200];
  const int rc = gemmd_auth_maybe_reload(&rpc->auth, err, sizeof err);
  if (rc > 0) {
    gemmd_log(GEMMD_LOG_INFO, "gRPC tokens reloaded", "tokens=%zu", rpc->auth.n);
  } else if (rc < 0) {
    gemmd_log(GEMMD_LOG_WARN, "gRPC token file not reloaded; the previous tokens stay",
              "reason=\"%s\"", err);
  }
}
