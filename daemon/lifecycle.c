/* gemmd's process around the loop's core (server.c): start-up (engine, the listeners, then
 * the --weight-dir and --preload weights on the loader's thread, loader.h), the HTTP
 * endpoints, the periodic tick, SIGTERM/SIGINT, readiness for systemd (notify.h) and the
 * drain that stops the transports and closes the loop. */
#include "daemon/lifecycle.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/loader.h"
#include "daemon/log.h"
#include "daemon/notify.h"
#include "daemon/nvml.h"
#include "daemon/rpc_grpc.h"
#include "daemon/server.h"
#include "daemon/shm_server.h"
#include "daemon/stats.h"
#include "daemon/version.h"
#include "daemon/weight_store.h"
#include "kernels/errors.h"

#define TICK_MS 100

/* ---- Periodic jobs, signals, drain ---------------------------------------------------- */

static void maybe_stop(gemmd_server_t *srv);

/* The engine's state that outlives a start (save_state), written on the uv pool. */
static void save_state_work(uv_work_t *w) {
  gemmd_server_t *srv = w->data;
  srv->engine->ops->save_state(srv->engine);
}

static void save_state_done(uv_work_t *w, int status) {
  (void)status;
  ((gemmd_server_t *)w->data)->state_saving = 0;
}

enum { SAVE_STATE_TICKS = 50 }; /* 5 s */

/* Every TICK_MS: (1) answer queued requests whose deadline passed, so they do not hold
 * queue slots while the engine is busy; (2) reload a changed gRPC token file; (3) every
 * SAVE_STATE_TICKS, save what the engine learned (its kernel choices); (4) finish a drain
 * that is complete. */
static void on_tick(uv_timer_t *t) {
  gemmd_server_t *srv = t->data;
  gemmd_server_expire(srv);
  if (srv->rpc != NULL) gemmd_rpc_tick(srv->rpc);
  if (srv->engine != NULL && srv->engine->ops->save_state != NULL && !srv->state_saving &&
      ++srv->ticks_since_save >= SAVE_STATE_TICKS) {
    srv->ticks_since_save = 0;
    srv->state_saving = 1;
    srv->save_state.data = srv;
    if (uv_queue_work(&srv->loop, &srv->save_state, save_state_work, save_state_done) != 0) srv->state_saving = 0;
  }
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
  if (!srv->draining || srv->stopped || srv->loading) return;
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

/* No new work; the loop ends once what was accepted is answered (and the start-up
 * loader, told to skip the rest, has stopped). */
static void start_drain(gemmd_server_t *srv, const char *key, const char *why) {
  gemmd_log(GEMMD_LOG_INFO, "draining", "%s=%s queued=%u inflight=%" PRIu64 " loading=%d", key, why,
            srv->batcher.depth, srv->inflight, srv->loading);
  srv->draining = 1;
  gemmd_loader_cancel(srv);
  gemmd_notify("STOPPING=1\nSTATUS=draining");
  gemmd_server_notify_watchers(srv);
  maybe_stop(srv);
}

static void on_signal(uv_signal_t *h, int signum) {
  gemmd_server_t *srv = h->data;
  if (srv->draining) {
    gemmd_log(GEMMD_LOG_INFO, "already draining", "signal=%d inflight=%" PRIu64, signum,
              srv->inflight);
    return;
  }
  start_drain(srv, "signal", signum == SIGTERM ? "SIGTERM" : "SIGINT");
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
      set_text(resp, 503, srv->draining ? "draining\n" : srv->loading ? "loading\n" : "not ready\n");
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

/* The start-up weights are in (loader.h): serve, or stop when they could not be read. */
static void on_loaded(gemmd_server_t *srv, int ok) {
  if (srv->draining) { /* a signal came while loading */
    maybe_stop(srv);
    return;
  }
  if (!ok) {
    gemmd_log(GEMMD_LOG_ERROR, "start-up weights could not be loaded", "exit_code=1");
    srv->exit_code = 1;
    start_drain(srv, "reason", "load-failed");
    return;
  }
  srv->ready = 1;
  gemmd_server_notify_watchers(srv);
  gemmd_log(GEMMD_LOG_INFO, "serving", "weights=%u weight_bytes=%" PRIu64 " startup_ms=%.1f",
            srv->weights.active, srv->weights.bytes, (double)(gemmd_now_ns() - srv->start_ns) * 1e-6);
  char status[160];
  snprintf(status, sizeof status, "READY=1\nSTATUS=serving, %u weights", srv->weights.active);
  gemmd_notify(status);
}

static int create_engine(gemmd_server_t *srv) {
  const gemmd_config_t *cfg = srv->cfg;
  const char *backend = cfg->backend;
  char why[512] = "this gemmd was built without the CUDA engine";
  if (strcmp(backend, "cpu") != 0) {
#ifdef GEMMD_HAVE_CUDA
    char choices_path[1100];
    snprintf(choices_path, sizeof choices_path, "%s/kernel-choices", cfg->weight_dir);
    const gemmd_cuda_options_t o = {(int)cfg->device,
                                    strcmp(cfg->gemm_kernel, "auto") == 0 ? "wgmma" : cfg->gemm_kernel,
                                    strcmp(cfg->cuda_graphs, "on") == 0,
                                    cfg->test_fault_after_batches,
                                    cfg->engine_spin_us,
                                    cfg->engine_slots,
                                    cfg->kernel_choice_samples,
                                    cfg->weight_dir[0] != '\0' ? choices_path : NULL,
                                    cfg->engine_copy_kernel_bytes};
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

static int engine_quantize_weight(void *ctx, const gemmd_operand_t *src, uint8_t *dst, float *scales) {
  gemmd_engine_t *e = ctx;
  return e->ops->weight_quantize(e, src, dst, scales);
}


int gemmd_run(const gemmd_config_t *cfg) {
  gemmd_server_t *srv = calloc(1, sizeof *srv);
  if (srv == NULL) return 1;
  gemmd_rpc_process_setup(cfg); /* setenv: before gemmd has any other thread */
  if (gemmd_server_init(srv, cfg) != GEMMD_OK) {
    free(srv);
    return 1;
  }
  srv->weight_dir_lock = -1;
  srv->on_quiet = maybe_stop;

  int rc = create_engine(srv);
  if (rc != GEMMD_OK) {
    gemmd_log(GEMMD_LOG_ERROR, "engine failed to start", "reason=\"%s\"", gemmd_strerror(rc));
    srv->exit_code = 1;
    goto fail;
  }
  gemmd_slot_gate_init(&srv->slot_gate, srv->engine->slots);
  if (srv->engine->ops->weight_quantize != NULL) {
    srv->weight_quantizer = (gemmd_weight_quantizer_t){engine_quantize_weight, srv->engine};
  }
  gemmd_metrics_init(&srv->metrics, GEMMD_VERSION, srv->engine->backend, srv->engine->device);
  if (srv->engine->pci_bus_id[0] != '\0') {
    char why[256];
    srv->nvml = gemmd_nvml_open(NULL, srv->engine->pci_bus_id, why, sizeof why);
    if (srv->nvml != NULL) {
      gemmd_log(GEMMD_LOG_INFO, "GPU gauges", "source=NVML pci_bus_id=%s", srv->engine->pci_bus_id);
    } else {
      gemmd_log(GEMMD_LOG_WARN, "no GPU gauges", "reason=\"%s\"", why);
    }
  }
  gemmd_log(GEMMD_LOG_INFO, "engine ready", "backend=%s device=\"%s\" kernel=\"%s\"",
            srv->engine->backend, srv->engine->device, srv->engine->kernel);

  char err[512];
  if (cfg->weight_dir[0] != '\0' &&
      (gemmd_weight_store_open(cfg->weight_dir, err, sizeof err) != GEMMD_OK ||
       (srv->weight_dir_lock = gemmd_weight_store_lock(cfg->weight_dir, err, sizeof err)) < 0)) {
    gemmd_log(GEMMD_LOG_ERROR, "weight directory unusable", "reason=\"%s\"", err);
    srv->exit_code = 1;
    goto fail;
  }
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
  gemmd_log(GEMMD_LOG_INFO, "listening",
            "grpc_port=%d metrics_port=%d grpc=\"%s\" metrics=\"%s\" shm=\"%s\"", srv->grpc_port,
            srv->http_port, cfg->grpc_listen, cfg->metrics_listen, cfg->shm_socket);
  if (gemmd_loader_start(srv, on_loaded) != GEMMD_OK) {
    gemmd_log(GEMMD_LOG_ERROR, "start-up loader failed to start", "");
    srv->exit_code = 1;
    start_drain(srv, "reason", "load-failed");
  }

  uv_run(&srv->loop, UV_RUN_DEFAULT);
  goto done;

fail:
  if (srv->http != NULL) gemmd_http_stop(srv->http);
  srv->http = NULL;
  close_server_handles(srv);
  uv_run(&srv->loop, UV_RUN_DEFAULT);
done:
  if (srv->weight_dir_lock >= 0) close(srv->weight_dir_lock);
  gemmd_nvml_close(srv->nvml);
  gemmd_server_teardown(srv);
  const int code = srv->exit_code;
  gemmd_log(GEMMD_LOG_INFO, "exit", "code=%d", code);
  free(srv);
  return code;
}
