/* gemmctl bench: shapes × concurrency -> throughput and latency, as a table and JSON. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/lib/address.h"
#include "client/gemmctl/bench_report.h"
#include "client/gemmctl/bench_run.h"
#include "client/gemmctl/ctl_parse.h"
#include "client/gemmctl/ctl_random.h"
#include "client/gemmctl/gemmctl.h"

#define MAX_SHAPES 64
#define MAX_CONCURRENCIES 16

static const char kUsage[] =
    "usage: gemmctl [global flags] bench [--concurrency C[,C...]] [--shape MxNxK[,MxNxK...]]\n"
    "         [--request-rate R] [--duration SECONDS] [--warmup SECONDS]\n"
    "         [--transport grpc|shm] [--inline] [--session]\n"
    "         [--a-dtype DTYPE] [--out DTYPE] [--json FILE|-] [--quiet]\n"
    "\n"
    "For each shape, registers a temporary E4M3 weight (N×K, 128x128 scales, named\n"
    "bench-<pid>-<i>; removed at the end or on Ctrl-C) unless --inline sends B in every\n"
    "request; then C threads send synchronous GEMMs back to back for the duration, after\n"
    "a warmup that is not counted (for each C given: a concurrency sweep). With\n"
    "--request-rate the load is open: R requests a second in all, each sent when it is due\n"
    "by the next free thread, its latency counted from when it was due. Prints a table\n"
    "(shape, concurrency, requests, errors,\n"
    "req/s, GFLOP/s, round-trip p50/p90/p99/p99.9, mean server queue and compute time,\n"
    "mean batch size) and, with --json, the same as a JSON array.\n"
    "  --concurrency C   threads (default 1); a list (1,8,32) runs each in turn\n"
    "  --request-rate R  open loop: R requests per second over the C threads (default:\n"
    "                    closed loop, each thread sends as soon as its last answer came)\n"
    "  --shape S         default 1x4096x4096\n"
    "  --duration S      measured seconds per shape (default 10)\n"
    "  --warmup S        seconds before measuring (default 2)\n"
    "  --transport T     grpc (default; a HOST:PORT --addr) or shm (a unix:// --addr)\n"
    "  --inline          B travels in every request instead of being registered\n"
    "  --session         each thread sends in a GEMM session (over gRPC one GemmStream\n"
    "                    per thread, open for the whole run) instead of a call per request\n"
    "  --a-dtype D       e4m3 (default, 1x128 scales) | e5m2 | bf16 | fp16 | fp32\n"
    "  --out D           bf16 (default) | fp16 | fp32\n"
    "  --json F          write the JSON to F; '-' for stdout (the table then goes to stderr)\n"
    "  --quiet           no progress lines\n";

typedef struct bench_opts_s {
  unsigned concurrency[MAX_CONCURRENCIES];
  size_t n_concurrency;
  double request_rate;
  ctl_shape_t shapes[MAX_SHAPES];
  size_t n_shapes;
  double duration_s, warmup_s;
  gemmd_transport_t transport;
  int inline_b, session, quiet;
  gemmd_dtype_t a_dtype, out;
  const char *json;
} bench_opts_t;

typedef struct bench_flags_s {
  const char *concurrency, *shape, *duration, *warmup, *transport, *inline_b, *a_dtype, *out, *json,
      *quiet, *request_rate, *session;
} bench_flags_t;

static volatile sig_atomic_t g_interrupted; /* set by SIGINT/SIGTERM during a bench */

static void on_signal(int sig) {
  (void)sig;
  g_interrupted = 1;
}

static int usage_error(const char *msg, const char *value) {
  return ctl_failf(CTL_EXIT_USAGE, GEMMD_STATUS_INVALID_ARGUMENT, "bench: %s%s%s%s", msg,
                   value ? " '" : "", value ? value : "", value ? "'" : "");
}

static int parse_numbers(const bench_flags_t *f, bench_opts_t *o) {
  const char *list = f->concurrency ? f->concurrency : "1";
  for (const char *p = list;;) {
    char item[32];
    const size_t len = strcspn(p, ",");
    uint64_t c = 0;
    if (len == 0 || len >= sizeof item || o->n_concurrency == MAX_CONCURRENCIES) {
      return usage_error("--concurrency must be 1..4096 or a list of at most 16 of them, not", list);
    }
    memcpy(item, p, len);
    item[len] = '\0';
    if (ctl_parse_u64(item, &c) || c == 0 || c > 4096) {
      return usage_error("--concurrency must be 1..4096 or a list of at most 16 of them, not", list);
    }
    o->concurrency[o->n_concurrency++] = (unsigned)c;
    if (p[len] == '\0') break;
    p += len + 1;
  }
  if (f->request_rate != NULL) {
    char *end = NULL;
    o->request_rate = strtod(f->request_rate, &end);
    if (end == f->request_rate || *end != '\0' || !(o->request_rate > 0) || o->request_rate > 1e8) {
      return usage_error("--request-rate must be requests per second, > 0, not", f->request_rate);
    }
  }
  if (ctl_parse_shape_list(f->shape ? f->shape : "1x4096x4096", o->shapes, MAX_SHAPES,
                           &o->n_shapes) != 0) {
    return usage_error("--shape must be MxNxK[,MxNxK...], not", f->shape);
  }
  o->duration_s = 10;
  o->warmup_s = 2;
  if (f->duration && (ctl_parse_seconds(f->duration, &o->duration_s) || o->duration_s <= 0)) {
    return usage_error("--duration must be a number of seconds > 0, not", f->duration);
  }
  if (f->warmup && ctl_parse_seconds(f->warmup, &o->warmup_s)) {
    return usage_error("--warmup must be a number of seconds, not", f->warmup);
  }
  return 0;
}

static int parse_kinds(const bench_flags_t *f, bench_opts_t *o) {
  o->a_dtype = GEMMD_DTYPE_FP8_E4M3;
  o->out = GEMMD_DTYPE_BF16;
  if (f->a_dtype && ctl_parse_dtype(f->a_dtype, &o->a_dtype)) {
    return usage_error("--a-dtype must be e4m3, e5m2, bf16, fp16 or fp32, not", f->a_dtype);
  }
  if (f->out && (ctl_parse_dtype(f->out, &o->out) || gemmd_dtype_is_fp8(o->out))) {
    return usage_error("--out must be bf16, fp16 or fp32, not", f->out);
  }
  if (f->transport && strcmp(f->transport, "grpc") != 0 && strcmp(f->transport, "shm") != 0) {
    return usage_error("--transport must be grpc or shm, not", f->transport);
  }
  o->transport =
      f->transport && strcmp(f->transport, "shm") == 0 ? GEMMD_TRANSPORT_SHM : GEMMD_TRANSPORT_GRPC;
  o->inline_b = f->inline_b != NULL;
  o->session = f->session != NULL;
  o->quiet = f->quiet != NULL;
  o->json = f->json;
  return 0;
}

static int parse_opts(int argc, char **argv, bench_opts_t *o, int *exit_code) {
  bench_flags_t f;
  memset(&f, 0, sizeof f);
  const ctl_flag_t flags[] = {
      {"concurrency", 1, &f.concurrency},
      {"request-rate", 1, &f.request_rate},
      {"shape", 1, &f.shape},
      {"duration", 1, &f.duration},
      {"warmup", 1, &f.warmup},
      {"transport", 1, &f.transport},
      {"inline", 0, &f.inline_b},
      {"session", 0, &f.session},
      {"a-dtype", 1, &f.a_dtype},
      {"out", 1, &f.out},
      {"json", 1, &f.json},
      {"quiet", 0, &f.quiet},
  };
  ctl_args_t a = {.flags = flags, .n_flags = sizeof flags / sizeof flags[0]};
  memset(o, 0, sizeof *o);
  if (ctl_parse_command(&a, argc, argv, kUsage, exit_code) != 0) return -1;
  if ((*exit_code = parse_numbers(&f, o)) != 0) return -1;
  if ((*exit_code = parse_kinds(&f, o)) != 0) return -1;
  return 0;
}

/* --transport must agree with what --addr names. */
static int check_transport(const ctl_global_t *g, const bench_opts_t *o) {
  gemmd_address_t addr;
  gemmd_status_t st;
  if (gemmd_address_parse(g->addr, &addr, &st) != 0) return ctl_fail(&st);
  if (addr.transport == o->transport) return 0;
  return o->transport == GEMMD_TRANSPORT_SHM
             ? usage_error("--transport shm needs a unix:///PATH --addr, not", g->addr)
             : usage_error("--transport grpc needs a HOST:PORT --addr, not", g->addr);
}

/* B for one shape: registered under a temporary name, or kept for inline use. */
typedef struct bench_b_s {
  ctl_matrix_t m;
  uint64_t weight_id; /* 0 when inline */
} bench_b_t;

static int prepare_b(gemmd_client_t *c, const bench_opts_t *o, size_t i, bench_b_t *b) {
  ctl_rng_t rng = {1000 + i};
  memset(b, 0, sizeof *b);
  if (ctl_matrix_random(&b->m, &rng, o->shapes[i].n, o->shapes[i].k, GEMMD_DTYPE_FP8_E4M3,
                        GEMMD_SCALE_BLOCK_128X128) != 0) {
    return ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_RESOURCE_EXHAUSTED, "bench: no memory for B");
  }
  if (o->inline_b) return 0;
  char name[64];
  gemmd_weight_info_t info;
  gemmd_status_t st;
  snprintf(name, sizeof name, "bench-%d-%zu", (int)getpid(), i);
  if (gemmd_client_register_weight(c, name, &b->m.op, &info, &st) != 0) {
    ctl_matrix_free(&b->m);
    return ctl_fail(&st);
  }
  b->weight_id = info.weight_id;
  return 0;
}

static void release_b(gemmd_client_t *c, bench_b_t *b) {
  gemmd_status_t st;
  if (b->weight_id != 0 && gemmd_client_unregister_weight(c, b->weight_id, NULL, &st) != 0) {
    fprintf(stderr, "gemmctl: bench: could not remove weight %llu: %s: %s\n",
            (unsigned long long)b->weight_id, gemmd_status_name(st.code), st.message);
  }
  ctl_matrix_free(&b->m);
}

/* Runs one shape; *r gets its row when *has_row is set (even when the exit code says
 * that no request succeeded). */
/* One shape: its weight registered once, then a run for each concurrency, a row each. */
static int bench_shape(gemmd_client_t *c, const bench_opts_t *o, size_t i, ctl_bench_result_t *rows,
                       size_t *n_rows) {
  const ctl_shape_t *s = &o->shapes[i];
  bench_b_t b;
  ctl_matrix_t a;
  ctl_rng_t rng = {i + 1};
  *n_rows = 0;
  int exit_code = prepare_b(c, o, i, &b);
  if (exit_code != 0) return exit_code;
  if (ctl_matrix_random(
          &a, &rng, s->m, s->k, o->a_dtype,
          gemmd_dtype_is_fp8(o->a_dtype) ? GEMMD_SCALE_BLOCK_1X128 : GEMMD_SCALE_NONE) != 0) {
    release_b(c, &b);
    return ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_RESOURCE_EXHAUSTED, "bench: no memory for A");
  }
  gemmd_gemm_call_t call;
  memset(&call, 0, sizeof call);
  call.weight_id = b.weight_id;
  call.b = b.weight_id ? NULL : &b.m.op;
  call.a = a.op;
  call.out_dtype = o->out;
  for (size_t ci = 0; ci < o->n_concurrency && exit_code == 0 && !g_interrupted; ci++) {
    const unsigned conc = o->concurrency[ci];
    char label[96];
    if (o->request_rate > 0) {
      snprintf(label, sizeof label, "%ux%ux%u c=%u rate=%g/s", s->m, s->n, s->k, conc, o->request_rate);
    } else {
      snprintf(label, sizeof label, "%ux%ux%u c=%u", s->m, s->n, s->k, conc);
    }
    const ctl_bench_run_t run = {.client = c,
                                 .call = &call,
                                 .concurrency = conc,
                                 .request_rate = o->request_rate,
                                 .session = o->session,
                                 .warmup_s = o->warmup_s,
                                 .duration_s = o->duration_s,
                                 .label = label,
                                 .quiet = o->quiet,
                                 .interrupted = &g_interrupted};
    ctl_bench_samples_t samples;
    gemmd_status_t first_error;
    memset(&first_error, 0, sizeof first_error);
    if (ctl_bench_run(&run, &samples, &first_error) != 0) {
      exit_code = ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_RESOURCE_EXHAUSTED,
                            "bench: out of threads or memory");
      break;
    }
    ctl_bench_result_t *r = &rows[(*n_rows)++];
    *r = (ctl_bench_result_t){.m = s->m,
                              .n = s->n,
                              .k = s->k,
                              .concurrency = conc,
                              .request_rate = o->request_rate,
                              .transport = gemmd_client_transport(c),
                              .inline_b = o->inline_b,
                              .session = o->session,
                              .a_dtype = o->a_dtype,
                              .out_dtype = o->out};
    ctl_bench_summarize(r, &samples);
    free(samples.round_trip_ns);
    if (r->errors > 0) {
      fprintf(stderr, "gemmctl: bench %s: %llu requests failed; first: %s: %s\n", label,
              (unsigned long long)r->errors, gemmd_status_name(first_error.code),
              first_error.message);
    }
    if (o->request_rate > 0 && r->req_per_s < 0.9 * o->request_rate && !g_interrupted) {
      fprintf(stderr, "gemmctl: bench %s: answered %.0f req/s of the %g offered: more threads "
              "(--concurrency) or a lower rate\n", label, r->req_per_s, o->request_rate);
    }
    if (r->requests == 0 && !g_interrupted) exit_code = CTL_EXIT_FAIL;
  }
  ctl_matrix_free(&a);
  release_b(c, &b);
  return exit_code;
}

static int report(const bench_opts_t *o, FILE *json_file, const ctl_bench_result_t *r, size_t n) {
  ctl_bench_print_table(json_file == stdout ? stderr : stdout, r, n);
  if (json_file == NULL) return CTL_EXIT_OK;
  char *json;
  if (ctl_bench_json(r, n, &json) != 0) {
    return ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_RESOURCE_EXHAUSTED, "bench: out of memory");
  }
  const int ok = fprintf(json_file, "%s\n", json) >= 0 && fflush(json_file) == 0;
  free(json);
  if (!ok) {
    return ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_UNKNOWN, "bench: writing %s: %s", o->json,
                     strerror(errno));
  }
  return CTL_EXIT_OK;
}

/* Every shape in turn; stops at one that could not run (its error is printed). */
static int run_all(gemmd_client_t *c, const bench_opts_t *o, FILE *json_file) {
  ctl_bench_result_t *results = calloc(o->n_shapes * o->n_concurrency, sizeof *results);
  if (results == NULL) {
    return ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_RESOURCE_EXHAUSTED, "bench: out of memory");
  }
  size_t done = 0;
  int exit_code = CTL_EXIT_OK;
  for (size_t i = 0; i < o->n_shapes && !g_interrupted; i++) {
    size_t rows;
    const int rc = bench_shape(c, o, i, results + done, &rows);
    done += rows;
    if (rc != CTL_EXIT_OK) exit_code = rc;
    if (rows == 0) break;
  }
  if (done > 0) {
    const int rc = report(o, json_file, results, done);
    if (exit_code == CTL_EXIT_OK) exit_code = rc;
  }
  if (g_interrupted) {
    fprintf(stderr, "gemmctl: CANCELLED: bench interrupted\n");
    exit_code = CTL_EXIT_FAIL;
  }
  free(results);
  return exit_code;
}

static FILE *open_json(const char *path) {
  if (path == NULL) return NULL;
  if (strcmp(path, "-") == 0) return stdout;
  return fopen(path, "w");
}

int ctl_cmd_bench(const ctl_global_t *g, int argc, char **argv) {
  bench_opts_t o;
  int exit_code = 0;
  if (parse_opts(argc, argv, &o, &exit_code) != 0) return exit_code;
  if ((exit_code = check_transport(g, &o)) != 0) return exit_code;
  FILE *json_file = open_json(o.json);
  if (o.json != NULL && json_file == NULL) {
    return ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_INVALID_ARGUMENT, "bench: --json %s: %s", o.json,
                     strerror(errno));
  }
  gemmd_client_t *c = ctl_open(g);
  if (c != NULL) {
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    exit_code = run_all(c, &o, json_file);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    gemmd_client_close(c);
  } else {
    exit_code = CTL_EXIT_FAIL;
  }
  if (json_file != NULL && json_file != stdout) fclose(json_file);
  return exit_code;
}
