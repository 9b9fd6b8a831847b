#include "daemon/metrics.h"

#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kernels/errors.h"

static const char *const transport_names[GEMMD_N_TRANSPORTS] = {"grpc", "shm"};

static const char *const code_names[GEMMD_N_CODES] = {
    "OK",                 /* 0 */
    "CANCELLED",          /* 1 */
    "UNKNOWN",            /* 2 */
    "INVALID_ARGUMENT",   /* 3 */
    "DEADLINE_EXCEEDED",  /* 4 */
    "NOT_FOUND",          /* 5 */
    "ALREADY_EXISTS",     /* 6 */
    "PERMISSION_DENIED",  /* 7 */
    "RESOURCE_EXHAUSTED", /* 8 */
    "FAILED_PRECONDITION", /* 9 */
    "ABORTED",            /* 10 */
    "OUT_OF_RANGE",       /* 11 */
    "UNIMPLEMENTED",      /* 12 */
    "INTERNAL",           /* 13 */
    "UNAVAILABLE",        /* 14 */
    "DATA_LOSS",          /* 15 */
    "UNAUTHENTICATED",    /* 16 */
};

#define CODE_UNKNOWN 2

const char *gemmd_transport_name(gemmd_transport_t t) {
  return (unsigned)t < GEMMD_N_TRANSPORTS ? transport_names[t] : "unknown";
}

const char *gemmd_code_name(int code) {
  return code >= 0 && code < GEMMD_N_CODES ? code_names[code] : code_names[CODE_UNKNOWN];
}

void gemmd_metrics_init(gemmd_metrics_t *m, const char *version, const char *backend,
                        const char *device) {
  memset(m, 0, sizeof *m);
  /* The bucket tables are valid, so these cannot fail. */
  for (int t = 0; t < GEMMD_N_TRANSPORTS; t++)
    (void)gemmd_histogram_init(&m->request_seconds[t], gemmd_latency_bounds_s,
                               gemmd_latency_bounds_n);
  (void)gemmd_histogram_init(&m->queue_seconds, gemmd_latency_bounds_s, gemmd_latency_bounds_n);
  (void)gemmd_histogram_init(&m->batch_seconds, gemmd_latency_bounds_s, gemmd_latency_bounds_n);
  (void)gemmd_histogram_init(&m->batch_requests, gemmd_batch_size_bounds,
                             gemmd_batch_size_bounds_n);
  m->up = 1;
  m->gpu = (gemmd_gpu_sample_t){NAN, NAN, NAN, NAN, NAN, NAN, NAN};
  snprintf(m->version, sizeof m->version, "%s", version != NULL ? version : "");
  snprintf(m->backend, sizeof m->backend, "%s", backend != NULL ? backend : "");
  snprintf(m->device, sizeof m->device, "%s", device != NULL ? device : "");
}

void gemmd_metrics_request(gemmd_metrics_t *m, gemmd_transport_t t, int code, uint64_t total_ns,
                           int dispatched, uint64_t queue_ns) {
  if ((unsigned)t >= GEMMD_N_TRANSPORTS) return;
  if (code < 0 || code >= GEMMD_N_CODES) code = CODE_UNKNOWN;
  m->requests[t][code]++;
  gemmd_histogram_observe(&m->request_seconds[t], (double)total_ns * 1e-9);
  if (dispatched) gemmd_histogram_observe(&m->queue_seconds, (double)queue_ns * 1e-9);
}

void gemmd_metrics_batch(gemmd_metrics_t *m, uint32_t requests, uint64_t device_ns, double flops,
                         uint64_t input_bytes, uint64_t output_bytes) {
  m->batches++;
  gemmd_histogram_observe(&m->batch_seconds, (double)device_ns * 1e-9);
  gemmd_histogram_observe(&m->batch_requests, (double)requests);
  m->flops += flops;
  m->input_bytes += input_bytes;
  m->output_bytes += output_bytes;
}

static const char *const stage_names[GEMMD_N_BATCH_STAGES] = {
#define GEMMD_STAGE_NAME(id, name) name,
    GEMMD_BATCH_STAGES(GEMMD_STAGE_NAME)
#undef GEMMD_STAGE_NAME
};

/* b - a in seconds, 0 when a clock went backwards or a mark is missing. */
static double span(uint64_t a, uint64_t b) { return a != 0 && b > a ? (double)(b - a) * 1e-9 : 0.0; }

void gemmd_metrics_batch_stages(gemmd_metrics_t *m, const gemmd_batch_marks_t *k, uint64_t device_ns,
                                uint64_t gemm_ns) {
  const double device = (double)device_ns * 1e-9;
  double after_launch = span(k->launch, k->seen_done) - device;
  if (after_launch < 0) after_launch = 0;
  m->stage_seconds[GEMMD_STAGE_TO_ENGINE] += span(k->submit, k->engine_start);
  m->stage_seconds[GEMMD_STAGE_STAGING] += span(k->engine_start, k->launch);
  m->stage_seconds[GEMMD_STAGE_DEVICE] += device;
  m->stage_seconds[GEMMD_STAGE_NOTICE] += after_launch;
  m->stage_seconds[GEMMD_STAGE_TO_FINISHER] += span(k->seen_done, k->finishing);
  m->stage_seconds[GEMMD_STAGE_TO_LOOP] += span(k->finishing != 0 ? k->finishing : k->seen_done, k->done);
  m->stage_seconds[GEMMD_STAGE_ANSWER] += span(k->done, k->answered);
  m->gemm_seconds += (double)gemm_ns * 1e-9;
  m->staged_batches++;
}

/* ---- Output buffer ------------------------------------------------------------------- */

/* A growable string; after the first allocation failure every append is a no-op and
 * failed stays set, so callers check once at the end. */
typedef struct {
  char *p;
  size_t len, cap;
  int failed;
} buf_t;

static int buf_reserve(buf_t *b, size_t extra) {
  if (b->failed) return -1;
  if (b->len + extra + 1 <= b->cap) return 0;
  size_t cap = b->cap != 0 ? b->cap : 4096;
  while (cap < b->len + extra + 1) cap *= 2;
  char *p = realloc(b->p, cap);
  if (p == NULL) {
    b->failed = 1;
    return -1;
  }
  b->p = p;
  b->cap = cap;
  return 0;
}

static void buf_append(buf_t *b, const char *s, size_t n) {
  if (buf_reserve(b, n) != 0) return;
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static void buf_puts(buf_t *b, const char *s) { buf_append(b, s, strlen(s)); }

__attribute__((format(printf, 2, 3))) static void buf_printf(buf_t *b, const char *fmt, ...) {
  if (b->failed) return;
  va_list ap;
  va_start(ap, fmt);
  char small[256];
  const int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = 1;
    return;
  }
  if ((size_t)n < sizeof small) {
    buf_append(b, small, (size_t)n);
    return;
  }
  if (buf_reserve(b, (size_t)n) != 0) return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

/* A label value with \, " and newline escaped, as the text format requires. */
static void buf_label_value(buf_t *b, const char *s) {
  for (; *s != '\0'; s++) {
    switch (*s) {
      case '\\':
        buf_puts(b, "\\\\");
        break;
      case '"':
        buf_puts(b, "\\\"");
        break;
      case '\n':
        buf_puts(b, "\\n");
        break;
      default:
        buf_append(b, s, 1);
    }
  }
}

/* The shortest %g form that reads back as the same double, so distinct bounds print
 * distinctly ("1e-05", "0.00025", "10"); Prometheus spellings for the non-finite. */
static void format_double(char *out, size_t n, double v) {
  if (isnan(v)) {
    snprintf(out, n, "NaN");
    return;
  }
  if (isinf(v)) {
    snprintf(out, n, v > 0 ? "+Inf" : "-Inf");
    return;
  }
  for (int prec = 6; prec <= 17; prec++) {
    snprintf(out, n, "%.*g", prec, v);
    if (strtod(out, NULL) == v) return;
  }
}

static void buf_double(buf_t *b, double v) {
  char s[40];
  format_double(s, sizeof s, v);
  buf_puts(b, s);
}

static void family(buf_t *b, const char *name, const char *type, const char *help) {
  buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample_u64(buf_t *b, const char *name, uint64_t v) {
  buf_printf(b, "%s %llu\n", name, (unsigned long long)v);
}

static void counter_u64(buf_t *b, const char *name, const char *help, uint64_t v) {
  family(b, name, "counter", help);
  sample_u64(b, name, v);
}

static void gauge_u64(buf_t *b, const char *name, const char *help, uint64_t v) {
  family(b, name, "gauge", help);
  sample_u64(b, name, v);
}

/* A gauge whose value may be unknown (NaN): then the family has no sample. */
static void gauge_known(buf_t *b, const char *name, const char *help, double v) {
  family(b, name, "gauge", help);
  if (isnan(v)) return;
  buf_printf(b, "%s ", name);
  buf_double(b, v);
  buf_puts(b, "\n");
}

static void gauge_double(buf_t *b, const char *name, const char *help, double v) {
  family(b, name, "gauge", help);
  buf_printf(b, "%s ", name);
  buf_double(b, v);
  buf_puts(b, "\n");
}

/* The samples of one histogram; labels is "" or `transport="grpc",` (with the comma) and
 * goes before le in _bucket and alone in _sum and _count. */
static void histogram_samples(buf_t *b, const char *name, const char *labels,
                              const gemmd_histogram_t *h) {
  uint64_t cum = 0;
  char le[40];
  for (int i = 0; i <= h->n_bounds; i++) {
    cum += h->counts[i];
    if (i < h->n_bounds) {
      format_double(le, sizeof le, h->bounds[i]);
    } else {
      snprintf(le, sizeof le, "+Inf");
    }
    buf_printf(b, "%s_bucket{%sle=\"%s\"} %llu\n", name, labels, le, (unsigned long long)cum);
  }
  const size_t ll = strlen(labels);
  /* Without the trailing comma for _sum and _count. */
  if (ll > 0) {
    buf_printf(b, "%s_sum{%.*s} ", name, (int)(ll - 1), labels);
  } else {
    buf_printf(b, "%s_sum ", name);
  }
  buf_double(b, h->sum);
  buf_puts(b, "\n");
  if (ll > 0) {
    buf_printf(b, "%s_count{%.*s} %llu\n", name, (int)(ll - 1), labels,
               (unsigned long long)h->count);
  } else {
    buf_printf(b, "%s_count %llu\n", name, (unsigned long long)h->count);
  }
}

static void histogram(buf_t *b, const char *name, const char *help, const gemmd_histogram_t *h) {
  family(b, name, "histogram", help);
  histogram_samples(b, name, "", h);
}

/* ---- process_* from /proc/self ------------------------------------------------------- */

/* Fields of /proc/self/stat that the process metrics need; 0 when unreadable. */
static int read_proc_stat(unsigned long long *utime, unsigned long long *stime,
                          unsigned long long *starttime, unsigned long long *vsize,
                          long long *rss_pages) {
  FILE *f = fopen("/proc/self/stat", "r");
  if (f == NULL) return -1;
  char line[1024];
  const int ok = fgets(line, sizeof line, f) != NULL;
  fclose(f);
  if (!ok) return -1;
  /* comm (field 2) is in parentheses and may hold spaces or ')': start after the last. */
  const char *p = strrchr(line, ')');
  if (p == NULL) return -1;
  /* Fields 3.. : state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
   * utime stime cutime cstime priority nice num_threads itrealvalue starttime vsize rss */
  const int n = sscanf(p + 1,
                       " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d"
                       " %*d %*d %llu %llu %lld",
                       utime, stime, starttime, vsize, rss_pages);
  return n == 5 ? 0 : -1;
}

static int read_btime(unsigned long long *btime) {
  FILE *f = fopen("/proc/stat", "r");
  if (f == NULL) return -1;
  char line[512];
  int found = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (sscanf(line, "btime %llu", btime) == 1) {
      found = 0;
      break;
    }
  }
  fclose(f);
  return found;
}

static long count_open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL) return -1;
  const int self = dirfd(d);
  long n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (atoi(e->d_name) == self) continue; /* the listing's own descriptor */
    n++;
  }
  closedir(d);
  return n;
}

static void process_metrics(buf_t *b) {
  const long tck = sysconf(_SC_CLK_TCK);
  unsigned long long utime, stime, starttime, vsize, btime;
  long long rss_pages;
  if (tck > 0 && read_proc_stat(&utime, &stime, &starttime, &vsize, &rss_pages) == 0) {
    const long page = sysconf(_SC_PAGESIZE);
    family(b, "process_cpu_seconds_total", "counter",
           "Total user and system CPU time spent in seconds.");
    buf_puts(b, "process_cpu_seconds_total ");
    buf_double(b, (double)(utime + stime) / (double)tck);
    buf_puts(b, "\n");
    gauge_double(b, "process_resident_memory_bytes", "Resident memory size in bytes.",
                 (double)rss_pages * (double)(page > 0 ? page : 4096));
    gauge_double(b, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
                 (double)vsize);
    if (read_btime(&btime) == 0) {
      gauge_double(b, "process_start_time_seconds",
                   "Start time of the process since unix epoch in seconds.",
                   (double)btime + (double)starttime / (double)tck);
    }
  }
  const long fds = count_open_fds();
  if (fds >= 0) gauge_u64(b, "process_open_fds", "Number of open file descriptors.",
                          (uint64_t)fds);
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    gauge_double(b, "process_max_fds", "Maximum number of open file descriptors.",
                 rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur);
  }
}

/* ---- Exposition ---------------------------------------------------------------------- */

int gemmd_metrics_render(const gemmd_metrics_t *m, char **out, size_t *len) {
  buf_t b = {NULL, 0, 0, 0};
  char labels[64];

  family(&b, "gemmd_requests_total", "counter",
         "Answered requests by transport and gRPC status code.");
  for (int t = 0; t < GEMMD_N_TRANSPORTS; t++) {
    for (int c = 0; c < GEMMD_N_CODES; c++) {
      if (c != 0 && m->requests[t][c] == 0) continue;
      buf_printf(&b, "gemmd_requests_total{transport=\"%s\",code=\"%s\"} %llu\n",
                 transport_names[t], code_names[c], (unsigned long long)m->requests[t][c]);
    }
  }

  family(&b, "gemmd_request_duration_seconds", "histogram",
         "Time from a request's arrival to its answer, by transport.");
  for (int t = 0; t < GEMMD_N_TRANSPORTS; t++) {
    snprintf(labels, sizeof labels, "transport=\"%s\",", transport_names[t]);
    histogram_samples(&b, "gemmd_request_duration_seconds", labels, &m->request_seconds[t]);
  }
  histogram(&b, "gemmd_queue_duration_seconds",
            "Time requests waited in the batcher before their batch was dispatched.",
            &m->queue_seconds);
  histogram(&b, "gemmd_batch_duration_seconds", "Device time per batch.", &m->batch_seconds);
  histogram(&b, "gemmd_batch_requests", "Requests per batch.", &m->batch_requests);

  counter_u64(&b, "gemmd_batches_total", "Batches executed.", m->batches);
  family(&b, "gemmd_batch_kernel_total", "counter",
         "Batches by the GEMM implementation that ran them (--gemm-kernel measured picks per batch).");
  buf_printf(&b, "gemmd_batch_kernel_total{kernel=\"gemmd\"} %llu\n",
             (unsigned long long)(m->batches - m->batches_cublaslt));
  buf_printf(&b, "gemmd_batch_kernel_total{kernel=\"cublaslt\"} %llu\n", (unsigned long long)m->batches_cublaslt);
  family(&b, "gemmd_flops_total", "counter", "Floating-point operations executed (2*M*N*K).");
  buf_puts(&b, "gemmd_flops_total ");
  buf_double(&b, m->flops);
  buf_puts(&b, "\n");
  counter_u64(&b, "gemmd_input_bytes_total", "Bytes of request operands received.",
              m->input_bytes);
  counter_u64(&b, "gemmd_output_bytes_total", "Bytes of results sent.", m->output_bytes);
  counter_u64(&b, "gemmd_graph_replays_total", "CUDA graph replays.", m->graph_replays);
  counter_u64(&b, "gemmd_graph_captures_total", "CUDA graph captures.", m->graph_captures);
  if (m->staged_batches > 0) {
    family(&b, "gemmd_batch_stage_seconds_total", "counter",
           "Time batches spent in each hand-off between the loop and the GPU (divide by "
           "gemmd_batch_stage_batches_total for the mean).");
    for (int i = 0; i < GEMMD_N_BATCH_STAGES; i++) {
      buf_printf(&b, "gemmd_batch_stage_seconds_total{stage=\"%s\"} ", stage_names[i]);
      buf_double(&b, m->stage_seconds[i]);
      buf_puts(&b, "\n");
    }
    counter_u64(&b, "gemmd_batch_stage_batches_total", "Batches counted in gemmd_batch_stage_seconds_total.",
                m->staged_batches);
    family(&b, "gemmd_batch_gemm_seconds_total", "counter",
           "Of the device stage, the time of the GEMM kernels alone (0 where the engine does not "
           "time them).");
    buf_puts(&b, "gemmd_batch_gemm_seconds_total ");
    buf_double(&b, m->gemm_seconds);
    buf_puts(&b, "\n");
  }

  gauge_u64(&b, "gemmd_queue_depth", "Requests waiting in the batcher.", m->queue_depth);
  gauge_u64(&b, "gemmd_inflight_requests", "Requests received and not yet answered.",
            m->inflight);
  gauge_u64(&b, "gemmd_weights", "Registered weights.", m->weights);
  gauge_u64(&b, "gemmd_weight_bytes", "Bytes held by registered weights.", m->weight_bytes);
  gauge_u64(&b, "gemmd_shm_clients", "Connected shared-memory clients.", m->shm_clients);
  gauge_u64(&b, "gemmd_shm_pinned_bytes", "Bytes of shared-memory arenas registered with the engine for DMA.",
            m->shm_pinned_bytes);
  gauge_u64(&b, "gemmd_device_memory_used_bytes", "Device memory in use by gemmd.",
            m->device_memory_used);
  gauge_u64(&b, "gemmd_weight_budget_bytes", "The budget of registered weights (--weight-memory-bytes).",
            m->weight_budget_bytes);
  gauge_u64(&b, "gemmd_queue_capacity", "Requests that may wait for a batch (--queue-depth).", m->queue_capacity);
  gauge_u64(&b, "gemmd_device_failed", "1 once the GPU failed: gemmd answers what it can and exits with 3.",
            (uint64_t)(m->device_failed != 0));
  gauge_u64(&b, "gemmd_startup_loading", "1 while the weights of --weight-dir and --preload load at start.",
            (uint64_t)(m->startup_loading != 0));
  gauge_u64(&b, "gemmd_startup_files", "Weight files to load at start (--weight-dir and --preload).",
            m->startup_files);
  gauge_u64(&b, "gemmd_startup_files_loaded", "Of them, the files read so far.", m->startup_files_done);
  gauge_u64(&b, "gemmd_startup_files_skipped",
            "Weight files skipped at start: damaged, truncated or inconsistent (see the log).",
            m->startup_files_skipped);
  gauge_u64(&b, "gemmd_startup_weights_loaded", "Weights loaded at start so far.", m->startup_weights);
  gauge_u64(&b, "gemmd_startup_weight_bytes_loaded", "Bytes of the weights loaded at start so far.",
            m->startup_weight_bytes);
  /* The GPU as NVML reports it (nvml.h); no samples without a GPU or a driver. */
  const gemmd_gpu_sample_t *g = &m->gpu;
  gauge_known(&b, "gemmd_gpu_power_watts", "The GPU's power draw (NVML).", g->power_watts);
  gauge_known(&b, "gemmd_gpu_power_limit_watts", "The power limit the GPU enforces (NVML).", g->power_limit_watts);
  gauge_known(&b, "gemmd_gpu_sm_clock_hertz", "The GPU's SM clock (NVML).", g->sm_clock_hz);
  gauge_known(&b, "gemmd_gpu_utilization_ratio",
              "Share of the driver's last sample period in which a kernel ran on the GPU (NVML).",
              g->utilization_ratio);
  gauge_known(&b, "gemmd_gpu_memory_used_bytes", "GPU memory in use, by every process (NVML).",
              g->memory_used_bytes);
  gauge_known(&b, "gemmd_gpu_memory_total_bytes", "The GPU's memory (NVML).", g->memory_total_bytes);
  gauge_known(&b, "gemmd_gpu_temperature_celsius", "The GPU's temperature (NVML).", g->temperature_celsius);
  gauge_u64(&b, "gemmd_up", "1 while the daemon serves.", (uint64_t)(m->up != 0));

  family(&b, "gemmd_build_info", "gauge", "Build and device information; always 1.");
  buf_puts(&b, "gemmd_build_info{version=\"");
  buf_label_value(&b, m->version);
  buf_puts(&b, "\",backend=\"");
  buf_label_value(&b, m->backend);
  buf_puts(&b, "\",device=\"");
  buf_label_value(&b, m->device);
  buf_puts(&b, "\"} 1\n");

  process_metrics(&b);

  if (b.failed || b.p == NULL) {
    free(b.p);
    *out = NULL;
    if (len != NULL) *len = 0;
    return GEMMD_ENOMEM;
  }
  *out = b.p;
  if (len != NULL) *len = b.len;
  return GEMMD_OK;
}
