/* The exposition: exact sample lines, cumulative buckets, label escaping, HELP and TYPE for
 * every family, process_* values, and (where installed) `promtool check metrics`. */
#include "daemon/metrics.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels/errors.h"
#include "daemon/test_check.h"


/* The whole line `line` appears in text. */
static int has_line(const char *text, const char *line) {
  const size_t n = strlen(line);
  for (const char *p = text; (p = strstr(p, line)) != NULL; p++) {
    if ((p == text || p[-1] == '\n') && p[n] == '\n') return 1;
  }
  return 0;
}

#define CHECK_LINE(text, line)                                                       \
  do {                                                                               \
    if (!has_line((text), (line))) {                                                 \
      fprintf(stderr, "%s:%d: missing line: %s\n", __FILE__, __LINE__, (line));      \
      check_failures++;                                                                    \
    }                                                                                \
  } while (0)

/* The value of the sample whose name-and-labels is exactly `series`; NAN if absent. */
static double sample_value(const char *text, const char *series) {
  const size_t n = strlen(series);
  for (const char *p = text; (p = strstr(p, series)) != NULL; p++) {
    if ((p == text || p[-1] == '\n') && p[n] == ' ') return strtod(p + n + 1, NULL);
  }
  return 0.0 / 0.0;
}

static int near(double a, double b) { return a - b < 1e-12 && b - a < 1e-12; }

static void test_names(void) {
  static const char *const want[17] = {
      "OK",        "CANCELLED",          "UNKNOWN",           "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND",  "ALREADY_EXISTS",    "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",       "UNAVAILABLE",       "DATA_LOSS",
      "UNAUTHENTICATED"};
  for (int i = 0; i < 17; i++) CHECK(strcmp(gemmd_code_name(i), want[i]) == 0);
  CHECK(strcmp(gemmd_code_name(-1), "UNKNOWN") == 0);
  CHECK(strcmp(gemmd_code_name(17), "UNKNOWN") == 0);
  CHECK(strcmp(gemmd_transport_name(GEMMD_TRANSPORT_GRPC), "grpc") == 0);
  CHECK(strcmp(gemmd_transport_name(GEMMD_TRANSPORT_SHM), "shm") == 0);
}

static void test_init(void) {
  gemmd_metrics_t m;
  memset(&m, 0xab, sizeof m);
  char longdev[300];
  memset(longdev, 'd', sizeof longdev - 1);
  longdev[sizeof longdev - 1] = '\0';
  gemmd_metrics_init(&m, "1.2.3", "cuda", longdev);
  CHECK(m.up == 1);
  CHECK(strcmp(m.version, "1.2.3") == 0);
  CHECK(strcmp(m.backend, "cuda") == 0);
  CHECK(strlen(m.device) == sizeof m.device - 1); /* truncated, terminated */
  CHECK(m.batches == 0 && m.requests[1][16] == 0 && m.flops == 0);
  CHECK(m.request_seconds[0].n_bounds == gemmd_latency_bounds_n);
  CHECK(m.request_seconds[1].n_bounds == gemmd_latency_bounds_n);
  CHECK(m.queue_seconds.n_bounds == gemmd_latency_bounds_n);
  CHECK(m.batch_seconds.n_bounds == gemmd_latency_bounds_n);
  CHECK(m.batch_requests.n_bounds == gemmd_batch_size_bounds_n);
  CHECK(m.queue_seconds.count == 0 && m.batch_requests.sum == 0);
}

/* Every sample belongs to a family with "# HELP" then "# TYPE" right before its samples,
 * each family is declared once, and the expected families have the expected types. */
static void check_structure(const char *text) {
  char families[64][64];
  char types[64][16];
  int nf = 0;
  char current[64] = "";
  char current_type[16] = "";
  char last_help[64] = ""; /* the HELP line just read, "" after any other line */
  const char *line = text;
  while (*line != '\0') {
    const char *nl = strchr(line, '\n');
    CHECK(nl != NULL); /* every line ends in \n, the last included */
    if (nl == NULL) break;
    char l[512];
    size_t n = (size_t)(nl - line);
    if (n >= sizeof l) n = sizeof l - 1;
    memcpy(l, line, n);
    l[n] = '\0';
    line = nl + 1;
    const int was_help = strncmp(l, "# HELP ", 7) == 0;
    if (!was_help && strncmp(l, "# TYPE ", 7) != 0) last_help[0] = '\0';
    if (was_help) {
      char name[64];
      CHECK(sscanf(l + 7, "%63s", name) == 1);
      snprintf(last_help, sizeof last_help, "%s", name);
      /* The next line must be its TYPE. */
      char expect[128];
      snprintf(expect, sizeof expect, "# TYPE %s ", name);
      if (strncmp(line, expect, strlen(expect)) != 0) {
        fprintf(stderr, "HELP for %s not followed by its TYPE\n", name);
        check_failures++;
      }
      continue;
    }
    if (strncmp(l, "# TYPE ", 7) == 0) {
      char name[64], type[16];
      CHECK(sscanf(l + 7, "%63s %15s", name, type) == 2);
      for (int i = 0; i < nf; i++) {
        if (strcmp(families[i], name) == 0) {
          fprintf(stderr, "family %s declared twice\n", name);
          check_failures++;
        }
      }
      /* The HELP line must be right before. */
      if (strcmp(last_help, name) != 0) {
        fprintf(stderr, "TYPE for %s without its HELP right before\n", name);
        check_failures++;
      }
      if (nf < 64) {
        snprintf(families[nf], sizeof families[nf], "%s", name);
        snprintf(types[nf], sizeof types[nf], "%s", type);
        nf++;
      }
      snprintf(current, sizeof current, "%s", name);
      snprintf(current_type, sizeof current_type, "%s", type);
      last_help[0] = '\0';
      continue;
    }
    CHECK(l[0] != '#');
    /* A sample: its name must be the current family (or _bucket/_sum/_count of a
     * histogram family). */
    char name[128];
    CHECK(sscanf(l, "%127[^{ ]", name) == 1);
    int ok = strcmp(name, current) == 0;
    if (!ok && strcmp(current_type, "histogram") == 0) {
      static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
      for (int s = 0; s < 3; s++) {
        char full[128];
        snprintf(full, sizeof full, "%s%s", current, suffixes[s]);
        if (strcmp(name, full) == 0) ok = 1;
      }
    }
    if (!ok) {
      fprintf(stderr, "sample %s outside its family (current %s)\n", name, current);
      check_failures++;
    }
  }

  static const struct {
    const char *name, *type;
  } want[] = {
      {"gemmd_requests_total", "counter"},
      {"gemmd_request_duration_seconds", "histogram"},
      {"gemmd_queue_duration_seconds", "histogram"},
      {"gemmd_batch_duration_seconds", "histogram"},
      {"gemmd_batch_requests", "histogram"},
      {"gemmd_batches_total", "counter"},
      {"gemmd_batch_kernel_total", "counter"},
      {"gemmd_flops_total", "counter"},
      {"gemmd_input_bytes_total", "counter"},
      {"gemmd_output_bytes_total", "counter"},
      {"gemmd_graph_replays_total", "counter"},
      {"gemmd_graph_captures_total", "counter"},
      {"gemmd_queue_depth", "gauge"},
      {"gemmd_inflight_requests", "gauge"},
      {"gemmd_weights", "gauge"},
      {"gemmd_weight_bytes", "gauge"},
      {"gemmd_shm_clients", "gauge"},
      {"gemmd_shm_pinned_bytes", "gauge"},
      {"gemmd_device_memory_used_bytes", "gauge"},
      {"gemmd_weight_budget_bytes", "gauge"},
      {"gemmd_queue_capacity", "gauge"},
      {"gemmd_device_failed", "gauge"},
      {"gemmd_startup_loading", "gauge"},
      {"gemmd_startup_files", "gauge"},
      {"gemmd_startup_files_loaded", "gauge"},
      {"gemmd_startup_files_skipped", "gauge"},
      {"gemmd_startup_weights_loaded", "gauge"},
      {"gemmd_startup_weight_bytes_loaded", "gauge"},
      {"gemmd_gpu_power_watts", "gauge"},
      {"gemmd_gpu_power_limit_watts", "gauge"},
      {"gemmd_gpu_sm_clock_hertz", "gauge"},
      {"gemmd_gpu_utilization_ratio", "gauge"},
      {"gemmd_gpu_memory_used_bytes", "gauge"},
      {"gemmd_gpu_memory_total_bytes", "gauge"},
      {"gemmd_gpu_temperature_celsius", "gauge"},
      {"gemmd_up", "gauge"},
      {"gemmd_build_info", "gauge"},
      {"process_cpu_seconds_total", "counter"},
      {"process_resident_memory_bytes", "gauge"},
      {"process_virtual_memory_bytes", "gauge"},
      {"process_open_fds", "gauge"},
      {"process_max_fds", "gauge"},
      {"process_start_time_seconds", "gauge"},
  };
  for (size_t w = 0; w < sizeof want / sizeof want[0]; w++) {
    int found = 0;
    for (int i = 0; i < nf; i++) {
      if (strcmp(families[i], want[w].name) == 0) {
        found = 1;
        if (strcmp(types[i], want[w].type) != 0) {
          fprintf(stderr, "%s has TYPE %s, want %s\n", want[w].name, types[i], want[w].type);
          check_failures++;
        }
      }
    }
    if (!found) {
      fprintf(stderr, "family %s missing\n", want[w].name);
      check_failures++;
    }
  }
  CHECK(nf == (int)(sizeof want / sizeof want[0]));
}

static void check_promtool(const char *text, size_t len) {
  if (access("/usr/bin/promtool", X_OK) != 0) {
    printf("note: /usr/bin/promtool not installed; skipping `promtool check metrics`\n");
    return;
  }
  FILE *p = popen("/usr/bin/promtool check metrics", "w");
  CHECK(p != NULL);
  if (p == NULL) return;
  CHECK(fwrite(text, 1, len, p) == len);
  const int st = pclose(p);
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
    fprintf(stderr, "promtool check metrics failed (status %d) on:\n%s", st, text);
    check_failures++;
  } else {
    printf("promtool check metrics: ok\n");
  }
}

static void test_render(void) {
  gemmd_metrics_t m;
  gemmd_metrics_init(&m, "1.0\"x", "cpu\\b", "H200\nSXM");

  /* grpc: 3 OK at 2 ms (queued 0.5 ms), 1 INVALID_ARGUMENT at 20 µs never queued,
   * 1 with an out-of-range code (counted as UNKNOWN) at 20 s. shm: 2 UNAVAILABLE at 1 ms. */
  for (int i = 0; i < 3; i++)
    gemmd_metrics_request(&m, GEMMD_TRANSPORT_GRPC, 0, 2000000, 1, 500000);
  gemmd_metrics_request(&m, GEMMD_TRANSPORT_GRPC, 3, 20000, 0, 0);
  gemmd_metrics_request(&m, GEMMD_TRANSPORT_GRPC, 99, 20000000000ull, 0, 0);
  gemmd_metrics_request(&m, GEMMD_TRANSPORT_SHM, 14, 1500000, 1, 30000);
  gemmd_metrics_request(&m, GEMMD_TRANSPORT_SHM, 14, 1500000, 1, 30000);
  gemmd_metrics_batch(&m, 3, 1200000, 2e9, 100, 200);
  gemmd_metrics_batch(&m, 5, 300000, 2e9, 100, 200);
  m.graph_replays = 11;
  m.graph_captures = 2;
  m.queue_depth = 7;
  m.inflight = 8;
  m.weights = 3;
  m.weight_bytes = 123456789012ull;
  m.shm_clients = 4;
  m.shm_pinned_bytes = 6291456;
  m.weight_budget_bytes = 1ull << 35;
  m.queue_capacity = 4096;
  m.gpu.power_watts = 512.5;
  m.gpu.power_limit_watts = 700;
  m.gpu.sm_clock_hz = 1.98e9;
  m.startup_files = 12;
  m.startup_files_done = 5;
  m.startup_weights = 40;
  m.startup_weight_bytes = 1ull << 33;
  m.device_memory_used = 5;

  CHECK(m.requests[0][0] == 3 && m.requests[0][3] == 1 && m.requests[0][2] == 1);
  CHECK(m.requests[1][14] == 2);
  CHECK(m.queue_seconds.count == 5); /* only dispatched requests */
  CHECK(m.batch_requests.count == 2 && m.batch_requests.sum == 8);

  char *text = NULL;
  size_t len = 0;
  CHECK(gemmd_metrics_render(&m, &text, &len) == GEMMD_OK);
  if (text == NULL) return;
  CHECK(strlen(text) == len);

  CHECK_LINE(text, "# TYPE gemmd_requests_total counter");
  CHECK_LINE(text, "gemmd_requests_total{transport=\"grpc\",code=\"OK\"} 3");
  CHECK_LINE(text, "gemmd_requests_total{transport=\"grpc\",code=\"UNKNOWN\"} 1");
  CHECK_LINE(text, "gemmd_requests_total{transport=\"grpc\",code=\"INVALID_ARGUMENT\"} 1");
  CHECK_LINE(text, "gemmd_requests_total{transport=\"shm\",code=\"OK\"} 0");
  CHECK_LINE(text, "gemmd_requests_total{transport=\"shm\",code=\"UNAVAILABLE\"} 2");
  CHECK(strstr(text, "code=\"CANCELLED\"") == NULL); /* zero: left out */
  CHECK(strstr(text, "transport=\"shm\",code=\"INVALID_ARGUMENT\"") == NULL);

  /* Cumulative buckets with the exact le spellings. */
  static const char *const le[] = {"1e-05", "2.5e-05", "5e-05", "0.0001", "0.00025",
                                   "0.0005", "0.001", "0.0025", "0.005", "0.01",
                                   "0.025", "0.05", "0.1", "0.25", "0.5", "1",
                                   "2.5", "5", "10", "+Inf"};
  /* grpc: 20 µs in (1e-05, 2.5e-05], 3 × 2 ms in (0.001, 0.0025], 20 s in +Inf. */
  static const int grpc_cum[] = {0, 1, 1, 1, 1, 1, 1, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5};
  /* shm: 2 × 1.5 ms. */
  static const int shm_cum[] = {0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
  /* queue: 3 × 0.5 ms (exactly on 0.0005? 500000 * 1e-9 may round either way; both
   * neighbours are checked below), 2 × 30 µs in (2.5e-05, 5e-05]. */
  char line[256];
  for (int i = 0; i < 20; i++) {
    snprintf(line, sizeof line,
             "gemmd_request_duration_seconds_bucket{transport=\"grpc\",le=\"%s\"} %d", le[i],
             grpc_cum[i]);
    CHECK_LINE(text, line);
    snprintf(line, sizeof line,
             "gemmd_request_duration_seconds_bucket{transport=\"shm\",le=\"%s\"} %d", le[i],
             shm_cum[i]);
    CHECK_LINE(text, line);
  }
  CHECK_LINE(text, "gemmd_request_duration_seconds_count{transport=\"grpc\"} 5");
  CHECK_LINE(text, "gemmd_request_duration_seconds_count{transport=\"shm\"} 2");
  const double grpc_sum = sample_value(text, "gemmd_request_duration_seconds_sum{transport=\"grpc\"}");
  CHECK(grpc_sum > 20.00601 && grpc_sum < 20.00603);
  CHECK(near(sample_value(text, "gemmd_request_duration_seconds_sum{transport=\"shm\"}"), 0.003));

  CHECK_LINE(text, "gemmd_queue_duration_seconds_bucket{le=\"2.5e-05\"} 0");
  CHECK_LINE(text, "gemmd_queue_duration_seconds_bucket{le=\"5e-05\"} 2");
  CHECK_LINE(text, "gemmd_queue_duration_seconds_bucket{le=\"0.001\"} 5");
  CHECK_LINE(text, "gemmd_queue_duration_seconds_bucket{le=\"+Inf\"} 5");
  CHECK_LINE(text, "gemmd_queue_duration_seconds_count 5");

  CHECK_LINE(text, "gemmd_batch_duration_seconds_bucket{le=\"0.00025\"} 0");
  CHECK_LINE(text, "gemmd_batch_duration_seconds_bucket{le=\"0.0005\"} 1");
  CHECK_LINE(text, "gemmd_batch_duration_seconds_bucket{le=\"0.001\"} 1");
  CHECK_LINE(text, "gemmd_batch_duration_seconds_bucket{le=\"0.0025\"} 2");
  CHECK_LINE(text, "gemmd_batch_duration_seconds_count 2");
  CHECK(near(sample_value(text, "gemmd_batch_duration_seconds_sum"), 0.0015));

  CHECK_LINE(text, "gemmd_batch_requests_bucket{le=\"1\"} 0");
  CHECK_LINE(text, "gemmd_batch_requests_bucket{le=\"2\"} 0");
  CHECK_LINE(text, "gemmd_batch_requests_bucket{le=\"4\"} 1");
  CHECK_LINE(text, "gemmd_batch_requests_bucket{le=\"8\"} 2");
  CHECK_LINE(text, "gemmd_batch_requests_bucket{le=\"4096\"} 2");
  CHECK_LINE(text, "gemmd_batch_requests_bucket{le=\"+Inf\"} 2");
  CHECK_LINE(text, "gemmd_batch_requests_sum 8");
  CHECK_LINE(text, "gemmd_batch_requests_count 2");

  CHECK_LINE(text, "gemmd_batches_total 2");
  CHECK_LINE(text, "gemmd_flops_total 4e+09");
  CHECK_LINE(text, "gemmd_input_bytes_total 200");
  CHECK_LINE(text, "gemmd_output_bytes_total 400");
  CHECK_LINE(text, "gemmd_graph_replays_total 11");
  CHECK_LINE(text, "gemmd_graph_captures_total 2");
  CHECK_LINE(text, "gemmd_queue_depth 7");
  CHECK_LINE(text, "gemmd_inflight_requests 8");
  CHECK_LINE(text, "gemmd_weights 3");
  CHECK_LINE(text, "gemmd_weight_bytes 123456789012");
  CHECK_LINE(text, "gemmd_shm_clients 4");
  CHECK_LINE(text, "gemmd_shm_pinned_bytes 6291456");
  CHECK_LINE(text, "gemmd_device_memory_used_bytes 5");
  CHECK_LINE(text, "gemmd_weight_budget_bytes 34359738368");
  CHECK_LINE(text, "gemmd_queue_capacity 4096");
  CHECK_LINE(text, "gemmd_device_failed 0");
  CHECK_LINE(text, "gemmd_startup_loading 0");
  CHECK_LINE(text, "gemmd_startup_files 12");
  CHECK_LINE(text, "gemmd_startup_files_loaded 5");
  CHECK_LINE(text, "gemmd_startup_weights_loaded 40");
  CHECK_LINE(text, "gemmd_startup_weight_bytes_loaded 8589934592");
  CHECK_LINE(text, "gemmd_gpu_power_watts 512.5");
  CHECK_LINE(text, "gemmd_gpu_power_limit_watts 700");
  CHECK(strstr(text, "\ngemmd_gpu_temperature_celsius ") == NULL); /* unknown: no sample */
  CHECK(strstr(text, "# TYPE gemmd_gpu_temperature_celsius gauge") != NULL);
  CHECK_LINE(text, "gemmd_up 1");
  CHECK_LINE(text, "# TYPE gemmd_build_info gauge");
  CHECK_LINE(text, "gemmd_build_info{version=\"1.0\\\"x\",backend=\"cpu\\\\b\","
                   "device=\"H200\\nSXM\"} 1");

  /* process_* */
  struct rlimit rl;
  CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
  if (rl.rlim_cur != RLIM_INFINITY)
    CHECK(sample_value(text, "process_max_fds") == (double)rl.rlim_cur);
  const double fds = sample_value(text, "process_open_fds");
  CHECK(fds >= 3);
  const double start = sample_value(text, "process_start_time_seconds");
  const double now = (double)time(NULL);
  CHECK(start > now - 600 && start < now + 2);
  CHECK(sample_value(text, "process_resident_memory_bytes") > 1e5);
  CHECK(sample_value(text, "process_virtual_memory_bytes") >=
        sample_value(text, "process_resident_memory_bytes"));
  CHECK(sample_value(text, "process_cpu_seconds_total") >= 0);

  check_structure(text);
  check_promtool(text, len);

  /* Three more descriptors show up in process_open_fds. */
  int extra[3];
  for (int i = 0; i < 3; i++) extra[i] = open("/dev/null", O_RDONLY);
  char *text2 = NULL;
  CHECK(gemmd_metrics_render(&m, &text2, NULL) == GEMMD_OK);
  if (text2 != NULL) CHECK(sample_value(text2, "process_open_fds") == fds + 3);
  for (int i = 0; i < 3; i++) close(extra[i]);
  free(text2);
  free(text);
}

/* A fresh daemon's exposition (every counter zero) is valid too. */
static void test_render_empty(void) {
  gemmd_metrics_t m;
  gemmd_metrics_init(&m, "", "", "");
  m.up = 0;
  char *text = NULL;
  size_t len = 0;
  CHECK(gemmd_metrics_render(&m, &text, &len) == GEMMD_OK);
  if (text == NULL) return;
  CHECK_LINE(text, "gemmd_requests_total{transport=\"grpc\",code=\"OK\"} 0");
  CHECK_LINE(text, "gemmd_requests_total{transport=\"shm\",code=\"OK\"} 0");
  CHECK_LINE(text, "gemmd_request_duration_seconds_bucket{transport=\"shm\",le=\"+Inf\"} 0");
  CHECK_LINE(text, "gemmd_request_duration_seconds_sum{transport=\"shm\"} 0");
  CHECK_LINE(text, "gemmd_batch_requests_count 0");
  CHECK_LINE(text, "gemmd_up 0");
  CHECK_LINE(text, "gemmd_build_info{version=\"\",backend=\"\",device=\"\"} 1");
  check_structure(text);
  check_promtool(text, len);
  free(text);
}

/* Each stage is the span between two marks; to_loop starts where a finishing thread took
 * the batch, or where it was seen done when the engine has no such thread. */
static void test_batch_stages(void) {
  gemmd_metrics_t m;
  gemmd_metrics_init(&m, "", "", "");
  const gemmd_batch_marks_t handed = {1000, 2000, 4000, 20000, 26000, 33000, 34000};
  gemmd_metrics_batch_stages(&m, &handed, 10000, 7000);
  CHECK(near(m.stage_seconds[GEMMD_STAGE_TO_ENGINE], 1000e-9));
  CHECK(near(m.stage_seconds[GEMMD_STAGE_STAGING], 2000e-9));
  CHECK(near(m.stage_seconds[GEMMD_STAGE_DEVICE], 10000e-9));
  CHECK(near(m.stage_seconds[GEMMD_STAGE_NOTICE], 6000e-9)); /* 16000 after launch, 10000 of it device */
  CHECK(near(m.stage_seconds[GEMMD_STAGE_TO_FINISHER], 6000e-9));
  CHECK(near(m.stage_seconds[GEMMD_STAGE_TO_LOOP], 7000e-9));
  CHECK(near(m.stage_seconds[GEMMD_STAGE_ANSWER], 1000e-9));
  CHECK(near(m.gemm_seconds, 7000e-9));
  const gemmd_batch_marks_t inline_done = {1000, 2000, 4000, 20000, 0, 33000, 34000};
  gemmd_metrics_batch_stages(&m, &inline_done, 10000, 7000);
  CHECK(near(m.stage_seconds[GEMMD_STAGE_TO_FINISHER], 6000e-9));
  CHECK(near(m.stage_seconds[GEMMD_STAGE_TO_LOOP], 7000e-9 + 13000e-9));
  CHECK(m.staged_batches == 2);
  char *text = NULL;
  CHECK(gemmd_metrics_render(&m, &text, NULL) == GEMMD_OK);
  if (text != NULL) CHECK(!isnan(sample_value(text, "gemmd_batch_stage_seconds_total{stage=\"to_finisher\"}")));
  free(text);
}

int main(void) {
  test_names();
  test_batch_stages();
  test_init();
  test_render();
  test_render_empty();
  if (check_failures != 0) {
    fprintf(stderr, "metrics_test: %d failure(s)\n", check_failures);
    return 1;
  }
  printf("metrics_test: ok\n");
  return 0;
}
