/* gemmd's process around the loop's core (server.c): start-up (engine, --weight-dir and
 * --preload weights, the listeners), the HTTP endpoints, the periodic tick, SIGTERM/SIGINT
 * and the drain that stops the transports and closes the loop. */
#include "daemon/lifecycle.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "daemon/rpc_grpc.h"
#include "daemon/safetensors.h"
#include "daemon/server.h"
#include "daemon/shm_server.h"
#include "daemon/stats.h"
#include "daemon/version.h"
#include "daemon/weight_store.h"
#include "kernels/errors.h"

#define TICK_MS 100

/* ---- Periodic jobs, signals, drain ---------------------------------------------------- */

static void maybe_stop(gemmd_server_t *srv);

/* Every TICK_MS: (1) answer queued requests whose deadline passed, so they do not hold
 * queue slots while the engine is busy; (2) reload a changed gRPC token file; (3) finish a
 * drain that is complete. */
static void on_tick(uv_timer_t *t) {
  gemmd_server_t *srv = t->data;
  gemmd_server_expire(srv);
  if (srv->rpc != NULL) gemmd_rpc_tick(srv->rpc);
  maybe_stop(srv);
}

static void rpc_stopped(gemmd_server_t *srv, void *arg);
static void shm_stopped(gemmd_server_t *srv);

static void close_handle(uv_handle_t *h) {
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* Drained: nothing queued, on the engine, or writing weight files. Also the server's
 * on_quiet hook, which the core calls after a batch or a weight operation finishes. */
static void maybe_stop(gemmd_server_t *srv) {
  if (!srv->draining || srv->stopped) return;
  if (srv->batcher.queued > 0 || srv->engine_busy > 0 || srv->inflight > 0 || srv->weight_ops > 0)
    return;
  srv->stopped = 1;
  gemmd_log(GEMMD_LOG_INFO, "drained", "uptime_s=%.1f",
            (double)(gemmd_now_ns() - srv->start_ns) * 1e-9);
  if (srv->http != NULL) {
    gemmd_http_stop(srv->http);
    srv->http = NULL;
  }
  if (srv->shm != NULL) {
    gemmd_shm_stop(srv->shm, shm_stopped);
  } else {
    shm_stopped(srv);
  }
}

static void shm_stopped(gemmd_server_t *srv) {
  if (srv->rpc != NULL) {
    gemmd_rpc_shutdown(srv->rpc, rpc_stopped, NULL);
  } else {
    rpc_stopped(srv, NULL);
  }
}

/* The server's own loop handles (the core's and this file's); once they are closed uv_run
 * returns. */
static void close_server_handles(gemmd_server_t *srv) {
  close_handle((uv_handle_t *)&srv->tick);
  close_handle((uv_handle_t *)&srv->batch_delay);
  close_handle((uv_handle_t *)&srv->sigterm);
  close_handle((uv_handle_t *)&srv->sigint);
  close_handle((uv_handle_t *)&srv->wakeup);
  close_handle((uv_handle_t *)&srv->spin);
}

static void rpc_stopped(gemmd_server_t *srv, void *arg) {
  (void)arg;
  srv->rpc = NULL;
  close_server_handles(srv);
}

static void on_signal(uv_signal_t *h, int signum) {
  gemmd_server_t *srv = h->data;
  if (srv->draining) {
    gemmd_log(GEMMD_LOG_INFO, "already draining", "signal=%d inflight=%" PRIu64, signum,
              srv->inflight);
    return;
  }
  gemmd_log(GEMMD_LOG_INFO, "draining", "signal=%s queued=%u inflight=%" PRIu64,
            signum == SIGTERM ? "SIGTERM" : "SIGINT", srv->batcher.depth, srv->inflight);
  srv->draining = 1;
  gemmd_server_notify_watchers(srv);
  maybe_stop(srv);
}

/* ---- HTTP endpoints ------------------------------------------------------------------- */

static void set_text(gemmd_http_response_t *resp, int status, const char *text) {
  resp->status = status;
  resp->content_type = "text/plain; charset=utf-8";
  resp->body = strdup(text);
  resp->body_len = resp->body ? strlen(resp->body) : 0;
}

static void on_http(void *ctx, const char *path, gemmd_http_response_t *resp) {
  gemmd_server_t *srv = ctx;
  if (strcmp(path, "/metrics") == 0) {
    gemmd_stats_refresh_gauges(srv);
    char *text;
    size_t len;
    if (gemmd_metrics_render(&srv->metrics, &text, &len) != GEMMD_OK) {
      set_text(resp, 500, "out of memory\n");
      return;
    }
    resp->status = 200;
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    resp->body = text;
    resp->body_len = len;
  } else if (strcmp(path, "/healthz") == 0) {
    set_text(resp, 200, "ok\n");
  } else if (strcmp(path, "/readyz") == 0) {
    if (gemmd_server_serving(srv)) {
      set_text(resp, 200, "ready\n");
    } else {
      set_text(resp, 503, srv->draining ? "draining\n" : "not ready\n");
    }
  } else if (strcmp(path, "/stats") == 0) {
    char *json = gemmd_stats_json(srv);
    if (json == NULL) {
      set_text(resp, 500, "out of memory\n");
      return;
    }
    resp->status = 200;
    resp->content_type = "application/json";
    resp->body = json;
    resp->body_len = strlen(json);
  }
}

/* ---- Start-up ------------------------------------------------------------------------- */

typedef struct {
  gemmd_server_t *srv;
  int loaded, bad;
} restore_ctx_t;

static void restore_one(void *ctx, gemmd_weight_t *w) {
  restore_ctx_t *rc = ctx;
  char msg[512];
  const int code = gemmd_weights_reserve(&rc->srv->weights, w, msg, sizeof msg);
  if (code != 0 || rc->srv->engine->ops->weight_load(rc->srv->engine, w) != GEMMD_OK) {
    gemmd_log(GEMMD_LOG_ERROR, "weight not restored", "id=%" PRIu64 " name=\"%s\" reason=\"%s\"",
              w->id, w->name, code ? msg : "engine could not load it");
    if (code == 0) {
      gemmd_weights_unreserve(&rc->srv->weights, w);
    } else {
      gemmd_weight_free(w);
    }
    rc->bad++;
    return;
  }
  gemmd_weights_activate(&rc->srv->weights, w);
  rc->loaded++;
}

static void restore_bad(void *ctx, const char *path, const char *reason) {
  restore_ctx_t *rc = ctx;
  gemmd_log(GEMMD_LOG_ERROR, "weight file skipped", "path=\"%s\" reason=\"%s\"", path, reason);
  rc->bad++;
}

static int restore_weights(gemmd_server_t *srv) {
  char err[512];
  if (gemmd_weight_store_open(srv->cfg->weight_dir, err, sizeof err) != GEMMD_OK) {
    gemmd_log(GEMMD_LOG_ERROR, "weight directory unusable", "reason=\"%s\"", err);
    return GEMMD_EIO;
  }
  restore_ctx_t ctx = {srv, 0, 0};
  const uint64_t t0 = gemmd_now_ns();
  if (gemmd_weight_store_load_all(srv->cfg->weight_dir, restore_one, restore_bad, &ctx) < 0) {
    gemmd_log(GEMMD_LOG_ERROR, "weight directory unreadable", "dir=\"%s\"", srv->cfg->weight_dir);
    return GEMMD_EIO;
  }
  gemmd_log(GEMMD_LOG_INFO, "weights restored",
            "dir=\"%s\" loaded=%d skipped=%d bytes=%" PRIu64 " ms=%.1f", srv->cfg->weight_dir,
            ctx.loaded, ctx.bad, srv->weights.bytes, (double)(gemmd_now_ns() - t0) * 1e-6);
  return GEMMD_OK;
}

/* --preload: each FP8 tensor of each safetensors file becomes a weight. Not written to
 * --weight-dir: the files are read again at every start. */
static int preload_weights(gemmd_server_t *srv) {
  for (int i = 0; i < srv->cfg->n_preload; i++) {
    const char *path = srv->cfg->preload[i];
    restore_ctx_t ctx = {srv, 0, 0};
    char err[512];
    int skipped = 0;
    const uint64_t t0 = gemmd_now_ns();
    const int rc = gemmd_safetensors_load(path, restore_one, &ctx, &skipped, err, sizeof err);
    if (rc < 0) {
      gemmd_log(GEMMD_LOG_ERROR, "preload failed", "file=\"%s\" reason=\"%s\"", path, err);
      return rc;
    }
    gemmd_log(GEMMD_LOG_INFO, "preloaded", "file=\"%s\" weights=%d refused=%d other_tensors=%d ms=%.1f",
              path, ctx.loaded, ctx.bad, skipped, (double)(gemmd_now_ns() - t0) * 1e-6);
  }
  return GEMMD_OK;
}

static int create_engine(gemmd_server_t *srv) {
  const gemmd_config_t *cfg = srv->cfg;
  const char *backend = cfg->backend;
  char why[512] = "this gemmd was built without the CUDA engine";
  if (strcmp(backend, "cpu") != 0) {
#ifdef GEMMD_HAVE_CUDA
    const gemmd_cuda_options_t o = {(int)cfg->device,
                                    strcmp(cfg->gemm_kernel, "auto") == 0 ? "wgmma" : cfg->gemm_kernel,
                                    strcmp(cfg->cuda_graphs, "on") == 0, cfg->test_fault_after_batches,
                                    cfg->engine_spin_us, cfg->engine_slots};
    const int rc = gemmd_engine_cuda_create(&o, gemmd_server_engine_done, srv, &srv->engine, why, sizeof why);
    if (rc == GEMMD_OK) {
      gemmd_log(GEMMD_LOG_INFO, "backend chosen", "backend=cuda device=\"%s\"", srv->engine->device);
      return GEMMD_OK;
    }
#endif
    if (strcmp(backend, "cuda") == 0) {
      gemmd_log(GEMMD_LOG_ERROR, "backend unavailable", "backend=cuda reason=\"%s\"", why);
      return GEMMD_ENOTSUP;
    }
    gemmd_log(GEMMD_LOG_INFO, "backend chosen", "backend=cpu reason=\"%s\"", why);
  }
  return gemmd_engine_cpu_create((int)cfg->cpu_threads, (double)cfg->cpu_inline_flops,
                                 gemmd_server_engine_done, srv, &srv->engine);
}


int gemmd_run(const gemmd_config_t *cfg) {
  gemmd_server_t *srv = calloc(1, sizeof *srv);
  if (srv == NULL) return 1;
  gemmd_rpc_choose_poller(cfg); /* setenv: before gemmd has any other thread */
  gemmd_server_init(srv, cfg);
  srv->on_quiet = maybe_stop;

  int rc = create_engine(srv);
  if (rc != GEMMD_OK) {
    gemmd_log(GEMMD_LOG_ERROR, "engine failed to start", "reason=\"%s\"", gemmd_strerror(rc));
    srv->exit_code = 1;
    goto fail;
  }
  gemmd_metrics_init(&srv->metrics, GEMMD_VERSION, srv->engine->backend, srv->engine->device);
  gemmd_log(GEMMD_LOG_INFO, "engine ready", "backend=%s device=\"%s\" kernel=\"%s\"",
            srv->engine->backend, srv->engine->device, srv->engine->kernel);
  if (cfg->weight_dir[0] != '\0' && restore_weights(srv) != GEMMD_OK) {
    srv->exit_code = 1;
    goto fail;
  }
  if (preload_weights(srv) != GEMMD_OK) {
    srv->exit_code = 1;
    goto fail;
  }

  char err[512];
  if (gemmd_http_start(&srv->loop, cfg->metrics_listen, on_http, srv, &srv->http,
                       &srv->http_port, err, sizeof err) != GEMMD_OK) {
    gemmd_log(GEMMD_LOG_ERROR, "metrics listener failed", "address=\"%s\" reason=\"%s\"",
              cfg->metrics_listen, err);
    srv->exit_code = 1;
    goto fail;
  }
  gemmd_http_set_limits(srv->http, (unsigned)cfg->http_max_connections, (uint64_t)cfg->http_head_timeout_ms);
  if (gemmd_rpc_start(srv, &srv->rpc, &srv->grpc_port, err, sizeof err) != GEMMD_OK) {
    gemmd_log(GEMMD_LOG_ERROR, "gRPC listener failed", "address=\"%s\" reason=\"%s\"",
              cfg->grpc_listen, err);
    srv->exit_code = 1;
    goto fail;
  }
  if (cfg->shm_socket[0] != '\0' &&
      gemmd_shm_start(srv, &srv->shm, err, sizeof err) != GEMMD_OK) {
    gemmd_log(GEMMD_LOG_ERROR, "shm listener failed", "reason=\"%s\"", err);
    srv->exit_code = 1;
    goto fail;
  }
  uv_signal_start(&srv->sigterm, on_signal, SIGTERM);
  uv_signal_start(&srv->sigint, on_signal, SIGINT);
  uv_timer_start(&srv->tick, on_tick, TICK_MS, TICK_MS);
  srv->ready = 1;
  gemmd_log(GEMMD_LOG_INFO, "listening",
            "grpc_port=%d metrics_port=%d grpc=\"%s\" metrics=\"%s\" shm=\"%s\"", srv->grpc_port,
            srv->http_port, cfg->grpc_listen, cfg->metrics_listen, cfg->shm_socket);

  uv_run(&srv->loop, UV_RUN_DEFAULT);
  goto done;

fail:
  if (srv->http != NULL) gemmd_http_stop(srv->http);
  srv->http = NULL;
  close_server_handles(srv);
  uv_run(&srv->loop, UV_RUN_DEFAULT);
done:
  gemmd_server_teardown(srv);
  const int code = srv->exit_code;
  gemmd_log(GEMMD_LOG_INFO, "exit", "code=%d", code);
  free(srv);
  return code;
}
