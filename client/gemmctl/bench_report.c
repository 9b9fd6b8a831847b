/* Bench summaries: percentiles, rates, the table and the JSON. */
#include "client/gemmctl/bench_report.h"

#include <inttypes.h>
#include <string.h>
#include <math.h>
#include <stdlib.h>

#include "client/gemmctl/ctl_parse.h"
#include "client/lib/json_writer.h"

static double us(uint64_t ns) { return (double)ns / 1000.0; }

void ctl_bench_summarize(ctl_bench_result_t *r, ctl_bench_samples_t *s) {
  const uint64_t *v = s->round_trip_ns;
  const size_t n = s->n;
  ctl_sort_u64(s->round_trip_ns, n);
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i++) sum += v[i];
  r->seconds = s->seconds;
  r->requests = n;
  r->errors = s->errors;
  r->req_per_s = s->seconds > 0 ? (double)n / s->seconds : 0;
  r->gflop_per_s = r->req_per_s * 2.0 * r->m * r->n * r->k / 1e9;
  r->mean_us = n > 0 ? us(sum) / (double)n : 0;
  r->p50_us = us(ctl_percentile(v, n, 50));
  r->p90_us = us(ctl_percentile(v, n, 90));
  r->p99_us = us(ctl_percentile(v, n, 99));
  r->p999_us = us(ctl_percentile(v, n, 99.9));
  r->max_us = us(ctl_percentile(v, n, 100));
  r->server_queue_us = n > 0 ? us(s->sum_queue_ns) / (double)n : 0;
  r->server_compute_us = n > 0 ? us(s->sum_compute_ns) / (double)n : 0;
  r->batch_requests = n > 0 ? (double)s->sum_batch_requests / (double)n : 0;
}

void ctl_bench_print_table(FILE *f, const ctl_bench_result_t *r, size_t n) {
  fprintf(f, "%-18s %5s %10s %7s %11s %10s %9s %9s %9s %9s %9s %10s %7s\n", "shape(MxNxK)", "conc",
          "requests", "errors", "req/s", "GFLOP/s", "p50_us", "p90_us", "p99_us", "p99.9_us",
          "queue_us", "compute_us", "batch");
  for (size_t i = 0; i < n; i++) {
    char shape[48];
    snprintf(shape, sizeof shape, "%ux%ux%u", r[i].m, r[i].n, r[i].k);
    fprintf(f,
            "%-18s %5u %10" PRIu64 " %7" PRIu64
            " %11.1f %10.2f %9.1f %9.1f %9.1f %9.1f %9.1f %10.1f %7.2f\n",
            shape, r[i].concurrency, r[i].requests, r[i].errors, r[i].req_per_s, r[i].gflop_per_s,
            r[i].p50_us, r[i].p90_us, r[i].p99_us, r[i].p999_us, r[i].server_queue_us,
            r[i].server_compute_us, r[i].batch_requests);
  }
}

static void key_double(gemmd_json_writer_t *j, const char *k, double v) {
  gemmd_json_key(j, k);
  gemmd_json_double(j, v);
}

static void key_u64(gemmd_json_writer_t *j, const char *k, uint64_t v) {
  gemmd_json_key(j, k);
  gemmd_json_u64(j, v);
}

static void key_string(gemmd_json_writer_t *j, const char *k, const char *v) {
  gemmd_json_key(j, k);
  gemmd_json_string(j, v);
}

static void one_result(gemmd_json_writer_t *j, const ctl_bench_result_t *r) {
  char shape[48];
  snprintf(shape, sizeof shape, "%ux%ux%u", r->m, r->n, r->k);
  gemmd_json_begin_object(j);
  key_string(j, "shape", shape);
  key_u64(j, "m", r->m);
  key_u64(j, "n", r->n);
  key_u64(j, "k", r->k);
  key_u64(j, "concurrency", r->concurrency);
  key_double(j, "request_rate", r->request_rate);
  key_string(j, "transport", r->transport);
  gemmd_json_key(j, "inline_b");
  gemmd_json_bool(j, r->inline_b);
  gemmd_json_key(j, "session");
  gemmd_json_bool(j, r->session);
  key_string(j, "a_dtype", ctl_dtype_short(r->a_dtype));
  key_string(j, "out_dtype", ctl_dtype_short(r->out_dtype));
  key_double(j, "seconds", r->seconds);
  key_u64(j, "requests", r->requests);
  key_u64(j, "errors", r->errors);
  key_double(j, "req_per_s", r->req_per_s);
  key_double(j, "gflop_per_s", r->gflop_per_s);
  key_double(j, "mean_us", r->mean_us);
  key_double(j, "p50_us", r->p50_us);
  key_double(j, "p90_us", r->p90_us);
  key_double(j, "p99_us", r->p99_us);
  key_double(j, "p999_us", r->p999_us);
  key_double(j, "max_us", r->max_us);
  key_double(j, "server_queue_us", r->server_queue_us);
  key_double(j, "server_compute_us", r->server_compute_us);
  key_double(j, "batch_requests", r->batch_requests);
  gemmd_json_end_object(j);
}

int ctl_bench_json(const ctl_bench_result_t *r, size_t n, char **out) {
  gemmd_json_writer_t j;
  gemmd_json_init(&j);
  gemmd_json_begin_array(&j);
  for (size_t i = 0; i < n; i++) one_result(&j, &r[i]);
  gemmd_json_end_array(&j);
  return gemmd_json_finish(&j, out);
}

static int cmp_u64(const void *a, const void *b) {
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

void ctl_sort_u64(uint64_t *v, size_t n) {
  if (n > 1) qsort(v, n, sizeof *v, cmp_u64);
}

size_t ctl_percentile_rank(size_t n, double p) {
  if (n == 0) return 0;
  if (!(p > 0)) return 1;
  if (p >= 100) return n;
  /* p/100·n is often a whole number that binary floating point misses by an ulp
   * (99.9/100·1000 = 999.0000000000001): shave a relative 1e-12 before rounding up. */
  const double r = ceil(p / 100.0 * (double)n * (1.0 - 1e-12));
  if (r < 1) return 1;
  return r > (double)n ? n : (size_t)r;
}

uint64_t ctl_percentile(const uint64_t *sorted, size_t n, double p) {
  const size_t rank = ctl_percentile_rank(n, p);
  return rank == 0 ? 0 : sorted[rank - 1];
}
