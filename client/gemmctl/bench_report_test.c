/* Bench summaries: percentiles, rates and server means from known samples; empty windows;
 * the JSON row's exact text and the table's shape. */
#include "client/gemmctl/bench_report.h"

#include <string.h>

#include "client/testing/testing.h"

static ctl_bench_result_t labelled(void) {
  return (ctl_bench_result_t){.m = 1,
                              .n = 4096,
                              .k = 4096,
                              .concurrency = 8,
                              .transport = "grpc",
                              .inline_b = 0,
                              .a_dtype = GEMMD_DTYPE_FP8_E4M3,
                              .out_dtype = GEMMD_DTYPE_BF16};
}

static void check_summary(void) {
  /* 1000 round trips of 1..1000 us, shuffled; 2 s window. */
  uint64_t *v = malloc(1000 * sizeof *v);
  CHECK(v != NULL, "alloc");
  for (size_t i = 0; i < 1000; i++) v[i] = ((i * 7919) % 1000 + 1) * 1000;
  ctl_bench_samples_t s = {v, 1000, 5, 1000 * 20000, 1000 * 30000, 1000 * 4, 2.0};
  ctl_bench_result_t r = labelled();
  ctl_bench_summarize(&r, &s);
  CHECK(v[0] == 1000 && v[999] == 1000000, "sorted in place");
  CHECK(r.requests == 1000 && r.errors == 5 && r.seconds == 2.0, "counts");
  CHECK(r.req_per_s == 500.0, "req/s %g", r.req_per_s);
  CHECK(r.gflop_per_s == 500.0 * 2 * 4096 * 4096 / 1e9, "GFLOP/s %g", r.gflop_per_s);
  CHECK(r.p50_us == 500 && r.p90_us == 900 && r.p99_us == 990 && r.p999_us == 999,
        "p50 %g p90 %g p99 %g p99.9 %g", r.p50_us, r.p90_us, r.p99_us, r.p999_us);
  CHECK(r.max_us == 1000 && r.mean_us == 500.5, "max %g mean %g", r.max_us, r.mean_us);
  CHECK(r.server_queue_us == 20 && r.server_compute_us == 30 && r.batch_requests == 4,
        "server means %g %g %g", r.server_queue_us, r.server_compute_us, r.batch_requests);
  CHECK(r.m == 1 && r.concurrency == 8 && strcmp(r.transport, "grpc") == 0, "labels kept");
  free(v);

  ctl_bench_samples_t empty = {NULL, 0, 3, 0, 0, 0, 0.0};
  r = labelled();
  ctl_bench_summarize(&r, &empty);
  CHECK(r.requests == 0 && r.errors == 3 && r.req_per_s == 0 && r.p50_us == 0 && r.mean_us == 0 &&
            r.server_queue_us == 0,
        "empty window");
}

static void check_output(void) {
  ctl_bench_result_t r[2] = {labelled(), labelled()};
  r[0].seconds = 10;
  r[0].requests = 41234;
  r[0].req_per_s = 4123.4;
  r[0].p50_us = 61;
  r[1].m = 32;
  r[1].inline_b = 1;
  r[1].session = 1;
  r[1].out_dtype = GEMMD_DTYPE_FP32;
  char *json = NULL;
  CHECK(ctl_bench_json(r, 2, &json) == 0, "json");
  const char *want0 =
      "[{\"shape\":\"1x4096x4096\",\"m\":1,\"n\":4096,\"k\":4096,\"concurrency\":8,\"request_rate\":0,"
      "\"transport\":\"grpc\",\"inline_b\":false,\"session\":false,\"a_dtype\":\"e4m3\",\"out_dtype\":\"bf16\","
      "\"seconds\":10,\"requests\":41234,\"errors\":0,\"req_per_s\":4123.4,\"gflop_per_s\":0,"
      "\"mean_us\":0,\"p50_us\":61,\"p90_us\":0,\"p99_us\":0,\"p999_us\":0,\"max_us\":0,"
      "\"server_queue_us\":0,\"server_compute_us\":0,\"batch_requests\":0},"
      "{\"shape\":\"32x4096x4096\",";
  CHECK(strncmp(json, want0, strlen(want0)) == 0, "got %s", json);
  CHECK(strstr(json, "\"inline_b\":true,\"session\":true,\"a_dtype\":\"e4m3\",\"out_dtype\":\"fp32\"") != NULL,
        "second row: %s", json);
  CHECK(json[strlen(json) - 1] == ']', "array closed");
  free(json);
  CHECK(ctl_bench_json(r, 0, &json) == 0 && strcmp(json, "[]") == 0, "empty array");
  free(json);

  char buf[2048];
  FILE *f = fmemopen(buf, sizeof buf, "w");
  CHECK(f != NULL, "fmemopen");
  ctl_bench_print_table(f, r, 2);
  fclose(f);
  CHECK(strncmp(buf, "shape(MxNxK)", 12) == 0, "header first: %s", buf);
  CHECK(strstr(buf, "p99.9_us") != NULL && strstr(buf, "compute_us") != NULL, "columns");
  CHECK(strstr(buf, "\n1x4096x4096 ") != NULL && strstr(buf, "\n32x4096x4096 ") != NULL, "rows: %s",
        buf);
  size_t lines = 0;
  for (const char *p = buf; *p; p++) lines += *p == '\n';
  CHECK(lines == 3, "%zu lines", lines);
}

int main(void) {
  check_summary();
  check_output();
  printf("bench_report_test: ok\n");
  return 0;
}
