#include "daemon/stats.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/pbjson.h"
#include "daemon/shm_server.h"
#include "daemon/version.h"

void gemmd_stats_refresh_gauges(gemmd_server_t *srv) {
  gemmd_metrics_t *m = &srv->metrics;
  m->queue_depth = srv->batcher.depth;
  m->inflight = srv->inflight;
  m->weights = srv->weights.active;
  m->weight_bytes = srv->weights.bytes;
  m->shm_clients = gemmd_shm_clients(srv->shm);
  m->shm_pinned_bytes = gemmd_shm_pinned_bytes(srv->shm);
  m->device_memory_used = srv->engine ? srv->engine->ops->memory_used(srv->engine) : 0;
  m->weight_budget_bytes = srv->weights.budget;
  m->queue_capacity = (uint64_t)srv->cfg->queue_depth;
  m->device_failed = srv->exit_code == 3;
  m->gpu = gemmd_nvml_sample(srv->nvml);
  m->up = gemmd_server_serving(srv);
}

static void summarize(const gemmd_histogram_t *h, Gemmd__V1__LatencySummary *out) {
  gemmd__v1__latency_summary__init(out);
  out->count = h->count;
  out->mean_us = gemmd_histogram_mean(h) * 1e6;
  out->p50_us = gemmd_histogram_quantile(h, 0.50) * 1e6;
  out->p90_us = gemmd_histogram_quantile(h, 0.90) * 1e6;
  out->p99_us = gemmd_histogram_quantile(h, 0.99) * 1e6;
  out->p999_us = gemmd_histogram_quantile(h, 0.999) * 1e6;
  out->max_us = h->max * 1e6;
}

/* Everything a ServerStats points to, kept together so one free releases it. */
typedef struct {
  Gemmd__V1__ServerStats st;
  Gemmd__V1__LatencySummary request, queue, batch;
  Gemmd__V1__CodeCount codes[GEMMD_N_TRANSPORTS * GEMMD_N_CODES];
  Gemmd__V1__CodeCount *code_ptrs[GEMMD_N_TRANSPORTS * GEMMD_N_CODES];
  gemmd_histogram_t all_requests;
} stats_t;

static void fill(gemmd_server_t *srv, stats_t *s) {
  gemmd_stats_refresh_gauges(srv);
  const gemmd_metrics_t *m = &srv->metrics;
  Gemmd__V1__ServerStats *st = &s->st;
  gemmd__v1__server_stats__init(st);
  st->version = (char *)GEMMD_VERSION;
  st->backend = (char *)(srv->engine ? srv->engine->backend : "");
  st->device = srv->engine ? srv->engine->device : (char *)"";
  st->gemm_kernel = srv->engine ? srv->engine->kernel : (char *)"";
  st->uptime_ns = gemmd_now_ns() - srv->start_ns;
  st->ready = gemmd_server_serving(srv);
  st->draining = srv->draining;
  size_t nc = 0;
  for (int t = 0; t < GEMMD_N_TRANSPORTS; t++) {
    for (int c = 0; c < GEMMD_N_CODES; c++) {
      const uint64_t n = m->requests[t][c];
      st->requests_total += n;
      if (c != 0) st->requests_failed += n;
      if (n == 0) continue;
      Gemmd__V1__CodeCount *cc = &s->codes[nc];
      gemmd__v1__code_count__init(cc);
      cc->transport = (char *)gemmd_transport_name((gemmd_transport_t)t);
      cc->code = (char *)gemmd_code_name(c);
      cc->count = n;
      s->code_ptrs[nc++] = cc;
    }
  }
  st->n_requests_by_code = nc;
  st->requests_by_code = s->code_ptrs;
  st->batches_total = m->batches;
  st->flops_total = m->flops;
  st->input_bytes_total = m->input_bytes;
  st->output_bytes_total = m->output_bytes;
  st->graph_replays_total = m->graph_replays;
  st->graph_captures_total = m->graph_captures;
  /* Request latency over both transports: the bucket bounds are the same. */
  s->all_requests = m->request_seconds[0];
  for (int t = 1; t < GEMMD_N_TRANSPORTS; t++) {
    const gemmd_histogram_t *h = &m->request_seconds[t];
    for (int i = 0; i <= h->n_bounds; i++) s->all_requests.counts[i] += h->counts[i];
    s->all_requests.count += h->count;
    s->all_requests.sum += h->sum;
    if (h->max > s->all_requests.max) s->all_requests.max = h->max;
  }
  summarize(&s->all_requests, &s->request);
  summarize(&m->queue_seconds, &s->queue);
  summarize(&m->batch_seconds, &s->batch);
  st->request_latency = &s->request;
  st->queue_latency = &s->queue;
  st->batch_latency = &s->batch;
  st->mean_batch_requests = gemmd_histogram_mean(&m->batch_requests);
  st->queue_depth = (uint32_t)m->queue_depth;
  st->inflight_requests = (uint32_t)m->inflight;
  st->shm_clients = (uint32_t)m->shm_clients;
  st->weights = (uint32_t)m->weights;
  st->weight_bytes = m->weight_bytes;
  st->weight_budget_bytes = srv->weights.budget;
  st->device_memory_used_bytes = m->device_memory_used;
  st->device_memory_total_bytes = 0;
  st->loading = srv->loading;
  st->startup_files = m->startup_files;
  st->startup_files_loaded = m->startup_files_done;
  st->startup_weights_loaded = m->startup_weights;
}

uint8_t *gemmd_stats_pack(gemmd_server_t *srv, size_t *len) {
  stats_t *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  fill(srv, s);
  *len = gemmd__v1__server_stats__get_packed_size(&s->st);
  uint8_t *out = malloc(*len + 1);
  if (out != NULL) gemmd__v1__server_stats__pack(&s->st, out);
  free(s);
  return out;
}

char *gemmd_stats_json(gemmd_server_t *srv) {
  stats_t *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  fill(srv, s);
  char *json = gemmd_pbjson(&s->st.base);
  free(s);
  return json;
}
