/* gemmd_server_stats_t -> JSON, field names and order as in gemm.proto's ServerStats. */
#include <stdlib.h>

#include "client/gemmclient.h"
#include "client/json.h"

static void key_u64(gemmd_json_t *j, const char *k, uint64_t v) {
  gemmd_json_key(j, k);
  gemmd_json_u64(j, v);
}

static void key_double(gemmd_json_t *j, const char *k, double v) {
  gemmd_json_key(j, k);
  gemmd_json_double(j, v);
}

static void key_string(gemmd_json_t *j, const char *k, const char *v) {
  gemmd_json_key(j, k);
  gemmd_json_string(j, v);
}

static void key_bool(gemmd_json_t *j, const char *k, int v) {
  gemmd_json_key(j, k);
  gemmd_json_bool(j, v);
}

static void latency(gemmd_json_t *j, const char *k, const gemmd_latency_summary_t *l) {
  gemmd_json_key(j, k);
  gemmd_json_begin_object(j);
  key_u64(j, "count", l->count);
  key_double(j, "mean_us", l->mean_us);
  key_double(j, "p50_us", l->p50_us);
  key_double(j, "p90_us", l->p90_us);
  key_double(j, "p99_us", l->p99_us);
  key_double(j, "p999_us", l->p999_us);
  key_double(j, "max_us", l->max_us);
  gemmd_json_end_object(j);
}

static void codes(gemmd_json_t *j, const gemmd_server_stats_t *s) {
  gemmd_json_key(j, "requests_by_code");
  gemmd_json_begin_array(j);
  for (size_t i = 0; i < s->n_requests_by_code; i++) {
    gemmd_json_begin_object(j);
    key_string(j, "transport", s->requests_by_code[i].transport);
    key_string(j, "code", s->requests_by_code[i].code);
    key_u64(j, "count", s->requests_by_code[i].count);
    gemmd_json_end_object(j);
  }
  gemmd_json_end_array(j);
}

static void identity(gemmd_json_t *j, const gemmd_server_stats_t *s) {
  key_string(j, "version", s->version);
  key_string(j, "backend", s->backend);
  key_string(j, "device", s->device);
  key_string(j, "gemm_kernel", s->gemm_kernel);
  key_u64(j, "uptime_ns", s->uptime_ns);
  key_bool(j, "ready", s->ready);
  key_bool(j, "draining", s->draining);
}

static void counters(gemmd_json_t *j, const gemmd_server_stats_t *s) {
  key_u64(j, "requests_total", s->requests_total);
  key_u64(j, "requests_failed", s->requests_failed);
  key_u64(j, "batches_total", s->batches_total);
  key_double(j, "flops_total", s->flops_total);
  key_u64(j, "input_bytes_total", s->input_bytes_total);
  key_u64(j, "output_bytes_total", s->output_bytes_total);
  key_u64(j, "graph_replays_total", s->graph_replays_total);
  key_u64(j, "graph_captures_total", s->graph_captures_total);
  codes(j, s);
}

static void now(gemmd_json_t *j, const gemmd_server_stats_t *s) {
  key_u64(j, "queue_depth", s->queue_depth);
  key_u64(j, "inflight_requests", s->inflight_requests);
  key_u64(j, "shm_clients", s->shm_clients);
  key_u64(j, "weights", s->weights);
  key_u64(j, "weight_bytes", s->weight_bytes);
  key_u64(j, "weight_budget_bytes", s->weight_budget_bytes);
  key_u64(j, "device_memory_used_bytes", s->device_memory_used_bytes);
  key_u64(j, "device_memory_total_bytes", s->device_memory_total_bytes);
}

int gemmd_server_stats_json(const gemmd_server_stats_t *s, char **json) {
  gemmd_json_t j;
  gemmd_json_init(&j);
  gemmd_json_begin_object(&j);
  identity(&j, s);
  counters(&j, s);
  latency(&j, "request_latency", &s->request_latency);
  latency(&j, "queue_latency", &s->queue_latency);
  latency(&j, "batch_latency", &s->batch_latency);
  key_double(&j, "mean_batch_requests", s->mean_batch_requests);
  now(&j, s);
  gemmd_json_end_object(&j);
  return gemmd_json_finish(&j, json) == 0 ? GEMMD_STATUS_OK : GEMMD_STATUS_RESOURCE_EXHAUSTED;
}
