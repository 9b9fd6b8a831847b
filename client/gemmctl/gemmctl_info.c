/* gemmctl info and gemmctl stats. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "client/gemmctl/ctl_parse.h"
#include "client/gemmctl/bench_report.h"

#include "client/gemmctl/gemmctl.h"

static const char kInfoUsage[] =
    "usage: gemmctl [global flags] info\n"
    "\n"
    "Checks the server's health (grpc.health.v1, service \"\") and prints its version,\n"
    "backend, device, GEMM kernel, uptime, weights and queue depth. Exits 1 unless the\n"
    "server is SERVING.\n";

static const char kStatsUsage[] =
    "usage: gemmctl [global flags] stats [--json]\n"
    "\n"
    "Prints the server's ServerStats: counters, latency percentiles, batching, memory.\n"
    "  --json   one JSON object, field names as in gemm.proto\n";

int ctl_cmd_info(const ctl_global_t *g, int argc, char **argv) {
  ctl_args_t a = {.flags = NULL, .n_flags = 0};
  int exit_code;
  if (ctl_parse_command(&a, argc, argv, kInfoUsage, &exit_code) != 0) return exit_code;
  gemmd_client_t *c = ctl_open(g);
  if (c == NULL) return CTL_EXIT_FAIL;
  gemmd_status_t st;
  gemmd_server_stats_t s;
  int serving = 0;
  const char *transport = gemmd_client_transport(c); /* a static string */
  int rc = gemmd_client_health(c, "", &serving, &st);
  if (rc == 0) rc = gemmd_client_get_stats(c, &s, &st);
  gemmd_client_close(c);
  if (rc != 0) return ctl_fail(&st);
  char up[64], wb[32], budget[32];
  printf("address      %s (%s)\n", g->addr, transport);
  printf("health       %s%s\n", serving ? "SERVING" : "NOT_SERVING",
         s.draining ? " (draining)" : s.loading ? " (loading its weights)" : "");
  if (s.loading || s.startup_files > 0) {
    printf("startup      %s: %" PRIu64 " of %" PRIu64 " weight files, %" PRIu64 " weights\n",
           s.loading ? "loading" : "loaded", s.startup_files_loaded, s.startup_files, s.startup_weights_loaded);
  }
  printf("version      %s\n", s.version);
  printf("backend      %s\n", s.backend);
  printf("device       %s\n", s.device);
  printf("gemm_kernel  %s\n", s.gemm_kernel);
  printf("uptime       %s\n", ctl_format_duration_ns(s.uptime_ns, up, sizeof up));
  printf("weights      %u (%s of %s)\n", s.weights, ctl_format_bytes(s.weight_bytes, wb, sizeof wb),
         ctl_format_bytes(s.weight_budget_bytes, budget, sizeof budget));
  printf("queue_depth  %u (%u in flight)\n", s.queue_depth, s.inflight_requests);
  gemmd_server_stats_free(&s);
  if (!serving) {
    return ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_UNAVAILABLE, "the server is not SERVING");
  }
  return CTL_EXIT_OK;
}

static void print_latency(const char *name, const gemmd_latency_summary_t *l) {
  printf("  %-8s n=%-10" PRIu64
         " mean %9.1f  p50 %9.1f  p90 %9.1f  p99 %9.1f  p99.9 %9.1f"
         "  max %9.1f us\n",
         name, l->count, l->mean_us, l->p50_us, l->p90_us, l->p99_us, l->p999_us, l->max_us);
}

static void print_identity(const gemmd_server_stats_t *s) {
  char up[64];
  printf("server\n");
  printf("  version %s, backend %s, kernel %s\n", s->version, s->backend, s->gemm_kernel);
  printf("  device  %s\n", s->device);
  printf("  uptime  %s, ready %s, draining %s\n",
         ctl_format_duration_ns(s->uptime_ns, up, sizeof up), s->ready ? "yes" : "no",
         s->draining ? "yes" : "no");
}

static void print_counters(const gemmd_server_stats_t *s) {
  char in[32], out[32];
  printf("requests\n");
  printf("  total %" PRIu64 ", failed %" PRIu64 ", batches %" PRIu64 ", mean batch %.2f requests\n",
         s->requests_total, s->requests_failed, s->batches_total, s->mean_batch_requests);
  printf("  flops %.4g, input %s, output %s\n", s->flops_total,
         ctl_format_bytes(s->input_bytes_total, in, sizeof in),
         ctl_format_bytes(s->output_bytes_total, out, sizeof out));
  printf("  graph replays %" PRIu64 ", captures %" PRIu64 "\n", s->graph_replays_total,
         s->graph_captures_total);
  for (size_t i = 0; i < s->n_requests_by_code; i++) {
    printf("  %-5s %-20s %" PRIu64 "\n", s->requests_by_code[i].transport,
           s->requests_by_code[i].code, s->requests_by_code[i].count);
  }
}

static void print_now(const gemmd_server_stats_t *s) {
  char wb[32], budget[32], used[32], total[32];
  printf("now\n");
  printf("  queue %u, in flight %u, shm clients %u\n", s->queue_depth, s->inflight_requests,
         s->shm_clients);
  printf("  weights %u, %s of %s\n", s->weights, ctl_format_bytes(s->weight_bytes, wb, sizeof wb),
         ctl_format_bytes(s->weight_budget_bytes, budget, sizeof budget));
  printf("  device memory %s of %s\n",
         ctl_format_bytes(s->device_memory_used_bytes, used, sizeof used),
         ctl_format_bytes(s->device_memory_total_bytes, total, sizeof total));
}

static int print_json(gemmd_client_t *c) {
  char *json = NULL;
  gemmd_status_t st;
  if (gemmd_client_get_stats_json(c, &json, &st) != 0) return ctl_fail(&st);
  printf("%s\n", json);
  free(json);
  return CTL_EXIT_OK;
}

static int print_listing(gemmd_client_t *c) {
  gemmd_server_stats_t s;
  gemmd_status_t st;
  if (gemmd_client_get_stats(c, &s, &st) != 0) return ctl_fail(&st);
  print_identity(&s);
  print_counters(&s);
  printf("latency\n");
  print_latency("request", &s.request_latency);
  print_latency("queue", &s.queue_latency);
  print_latency("batch", &s.batch_latency);
  print_now(&s);
  gemmd_server_stats_free(&s);
  return CTL_EXIT_OK;
}

int ctl_cmd_stats(const ctl_global_t *g, int argc, char **argv) {
  const char *json = NULL;
  const ctl_flag_t flags[] = {{"json", 0, &json}};
  ctl_args_t a = {.flags = flags, .n_flags = 1};
  int exit_code;
  if (ctl_parse_command(&a, argc, argv, kStatsUsage, &exit_code) != 0) return exit_code;
  gemmd_client_t *c = ctl_open(g);
  if (c == NULL) return CTL_EXIT_FAIL;
  exit_code = json != NULL ? print_json(c) : print_listing(c);
  gemmd_client_close(c);
  return exit_code;
}

static const char kPingUsage[] =
    "usage: gemmctl [global flags] ping [--count N]\n"
    "\n"
    "Sends N health checks (grpc.health.v1 Check, service \"\") one after another and\n"
    "prints the round-trip p50/p90/p99 in microseconds: the transport's own latency, the\n"
    "floor under any GEMM round trip.\n"
    "  --count N   health checks to send (default 2000; the first 10%% warm up)\n";

static int cmp_u64(const void *x, const void *y) {
  const uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return (a > b) - (a < b);
}

int ctl_cmd_ping(const ctl_global_t *g, int argc, char **argv) {
  const char *count_s = "2000";
  const ctl_flag_t flags[] = {{"count", 1, &count_s}};
  ctl_args_t a = {.flags = flags, .n_flags = 1};
  int exit_code;
  if (ctl_parse_command(&a, argc, argv, kPingUsage, &exit_code) != 0) return exit_code;
  uint64_t count;
  if (ctl_parse_u64(count_s, &count) != 0 || count == 0 || count > 10000000) {
    return ctl_failf(CTL_EXIT_USAGE, GEMMD_STATUS_INVALID_ARGUMENT,
                     "--count: '%s' is not a count from 1 to 10000000", count_s);
  }
  gemmd_client_t *c = ctl_open(g);
  if (c == NULL) return CTL_EXIT_FAIL;
  const size_t warm = (size_t)(count / 10), n = (size_t)count;
  uint64_t *ns = malloc(sizeof *ns * n);
  gemmd_status_t st;
  int rc = ns ? 0 : GEMMD_STATUS_RESOURCE_EXHAUSTED;
  for (size_t i = 0; i < warm + n && rc == 0; i++) {
    struct timespec t0, t1;
    int serving;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = gemmd_client_health(c, "", &serving, &st);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (i >= warm) {
      ns[i - warm] = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull +
                     (uint64_t)(t1.tv_nsec - t0.tv_nsec);
    }
  }
  gemmd_client_close(c);
  if (rc != 0) {
    free(ns);
    return ns ? ctl_fail(&st) : ctl_failf(CTL_EXIT_FAIL, rc, "out of memory");
  }
  qsort(ns, n, sizeof *ns, cmp_u64);
  printf("ping %s: %zu health checks, round trip p50 %.1f us, p90 %.1f us, p99 %.1f us\n",
         g->addr, n, (double)ctl_percentile(ns, n, 50) * 1e-3, (double)ctl_percentile(ns, n, 90) * 1e-3,
         (double)ctl_percentile(ns, n, 99) * 1e-3);
  free(ns);
  return CTL_EXIT_OK;
}
