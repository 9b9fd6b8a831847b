/* ServerStats: the protobuf-c message -> gemmd_server_stats_t, and that struct -> JSON
 * (field names and order as in gemm.proto). */
#include "client/lib/server_stats.h"

#include <stdlib.h>
#include <string.h>

#include "client/lib/status.h"
#include "client/lib/gemmclient.h"
#include "client/lib/json_writer.h"

/* strdup that maps NULL to "" and counts failures in *failed. */
static char *dup_str(const char *s, int *failed) {
  char *d = strdup(s != NULL ? s : "");
  if (d == NULL) *failed = 1;
  return d;
}

static void copy_latency(const Gemmd__V1__LatencySummary *s, gemmd_latency_summary_t *out) {
  memset(out, 0, sizeof *out);
  if (s == NULL) return;
  out->count = s->count;
  out->mean_us = s->mean_us;
  out->p50_us = s->p50_us;
  out->p90_us = s->p90_us;
  out->p99_us = s->p99_us;
  out->p999_us = s->p999_us;
  out->max_us = s->max_us;
}

static int copy_codes(const Gemmd__V1__ServerStats *pb, gemmd_server_stats_t *out) {
  int failed = 0;
  if (pb->n_requests_by_code == 0) return 0;
  out->requests_by_code = calloc(pb->n_requests_by_code, sizeof *out->requests_by_code);
  if (out->requests_by_code == NULL) return 1;
  out->n_requests_by_code = pb->n_requests_by_code;
  for (size_t i = 0; i < pb->n_requests_by_code; i++) {
    const Gemmd__V1__CodeCount *cc = pb->requests_by_code[i];
    out->requests_by_code[i].transport = dup_str(cc->transport, &failed);
    out->requests_by_code[i].code = dup_str(cc->code, &failed);
    out->requests_by_code[i].count = cc->count;
  }
  return failed;
}

static void copy_counters(const Gemmd__V1__ServerStats *pb, gemmd_server_stats_t *out) {
  out->uptime_ns = pb->uptime_ns;
  out->ready = pb->ready != 0;
  out->draining = pb->draining != 0;
  out->requests_total = pb->requests_total;
  out->requests_failed = pb->requests_failed;
  out->batches_total = pb->batches_total;
  out->flops_total = pb->flops_total;
  out->input_bytes_total = pb->input_bytes_total;
  out->output_bytes_total = pb->output_bytes_total;
  out->graph_replays_total = pb->graph_replays_total;
  out->graph_captures_total = pb->graph_captures_total;
  copy_latency(pb->request_latency, &out->request_latency);
  copy_latency(pb->queue_latency, &out->queue_latency);
  copy_latency(pb->batch_latency, &out->batch_latency);
  out->mean_batch_requests = pb->mean_batch_requests;
  out->queue_depth = pb->queue_depth;
  out->inflight_requests = pb->inflight_requests;
  out->shm_clients = pb->shm_clients;
  out->weights = pb->weights;
  out->weight_bytes = pb->weight_bytes;
  out->weight_budget_bytes = pb->weight_budget_bytes;
  out->device_memory_used_bytes = pb->device_memory_used_bytes;
  out->device_memory_total_bytes = pb->device_memory_total_bytes;
  out->loading = pb->loading != 0;
  out->startup_files = pb->startup_files;
  out->startup_files_loaded = pb->startup_files_loaded;
  out->startup_weights_loaded = pb->startup_weights_loaded;
}

int gemmd_server_stats_from_pb(const Gemmd__V1__ServerStats *pb, gemmd_server_stats_t *out,
                               gemmd_status_t *status) {
  int failed = 0;
  memset(out, 0, sizeof *out);
  out->version = dup_str(pb->version, &failed);
  out->backend = dup_str(pb->backend, &failed);
  out->device = dup_str(pb->device, &failed);
  out->gemm_kernel = dup_str(pb->gemm_kernel, &failed);
  failed |= copy_codes(pb, out);
  copy_counters(pb, out);
  if (failed) {
    gemmd_server_stats_free(out);
    return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED,
                            "out of memory copying ServerStats");
  }
  return GEMMD_STATUS_OK;
}

void gemmd_server_stats_free(gemmd_server_stats_t *s) {
  if (s == NULL) return;
  free(s->version);
  free(s->backend);
  free(s->device);
  free(s->gemm_kernel);
  for (size_t i = 0; i < s->n_requests_by_code; i++) {
    free(s->requests_by_code[i].transport);
    free(s->requests_by_code[i].code);
  }
  free(s->requests_by_code);
  memset(s, 0, sizeof *s);
}

static void key_u64(gemmd_json_writer_t *j, const char *k, uint64_t v) {
  gemmd_json_key(j, k);
  gemmd_json_u64(j, v);
}

static void key_double(gemmd_json_writer_t *j, const char *k, double v) {
  gemmd_json_key(j, k);
  gemmd_json_double(j, v);
}

static void key_string(gemmd_json_writer_t *j, const char *k, const char *v) {
  gemmd_json_key(j, k);
  gemmd_json_string(j, v);
}

static void key_bool(gemmd_json_writer_t *j, const char *k, int v) {
  gemmd_json_key(j, k);
  gemmd_json_bool(j, v);
}

static void latency(gemmd_json_writer_t *j, const char *k, const gemmd_latency_summary_t *l) {
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

static void codes(gemmd_json_writer_t *j, const gemmd_server_stats_t *s) {
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

static void identity(gemmd_json_writer_t *j, const gemmd_server_stats_t *s) {
  key_string(j, "version", s->version);
  key_string(j, "backend", s->backend);
  key_string(j, "device", s->device);
  key_string(j, "gemm_kernel", s->gemm_kernel);
  key_u64(j, "uptime_ns", s->uptime_ns);
  key_bool(j, "ready", s->ready);
  key_bool(j, "draining", s->draining);
}

static void counters(gemmd_json_writer_t *j, const gemmd_server_stats_t *s) {
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

static void now(gemmd_json_writer_t *j, const gemmd_server_stats_t *s) {
  key_u64(j, "queue_depth", s->queue_depth);
  key_u64(j, "inflight_requests", s->inflight_requests);
  key_u64(j, "shm_clients", s->shm_clients);
  key_u64(j, "weights", s->weights);
  key_u64(j, "weight_bytes", s->weight_bytes);
  key_u64(j, "weight_budget_bytes", s->weight_budget_bytes);
  key_u64(j, "device_memory_used_bytes", s->device_memory_used_bytes);
  key_u64(j, "device_memory_total_bytes", s->device_memory_total_bytes);
  key_bool(j, "loading", s->loading);
  key_u64(j, "startup_files", s->startup_files);
  key_u64(j, "startup_files_loaded", s->startup_files_loaded);
  key_u64(j, "startup_weights_loaded", s->startup_weights_loaded);
}

int gemmd_server_stats_json(const gemmd_server_stats_t *s, char **json) {
  gemmd_json_writer_t j;
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
