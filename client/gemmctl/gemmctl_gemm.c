/* gemmctl gemm: one GEMM on random inputs, optionally checked against the FP64 reference. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "client/gemmctl/ctl_parse.h"
#include "client/gemmctl/ctl_random.h"
#include "client/gemmctl/gemmctl.h"
#include "client/lib/status.h"
#include "kernels/quantize.h"
#include "kernels/ref_gemm.h"

static const char kUsage[] =
    "usage: gemmctl [global flags] gemm --m M --k K (--weight NAME | --weight-id ID | --n N)\n"
    "         [--a-dtype DTYPE] [--a-layout LAYOUT] [--b-dtype DTYPE] [--b-layout LAYOUT]\n"
    "         [--out bf16|fp16|fp32] [--seed S] [--check] [--stream N | --session N]\n"
    "         [--in-region]\n"
    "\n"
    "Sends one D = A·Bᵀ with a random M×K A, against a registered weight (--weight,\n"
    "--weight-id) or a random N×K B sent inline (--n), and prints the result's shape, a\n"
    "checksum, the server's RequestStats and the client's round trip.\n"
    "  --a-dtype   e4m3 (default) | e5m2 | bf16 | fp16 | fp32\n"
    "  --a-layout  none | tensor | row | 1x128 (default for FP8; none otherwise)\n"
    "  --b-dtype   e4m3 (default) | e5m2 | bf16 | fp16 | fp32 (with --n)\n"
    "  --b-layout  none | tensor | row | 128x128 (default for FP8; none otherwise)\n"
    "  --out       output dtype (default bf16)\n"
    "  --seed      random seed (default 1)\n"
    "  --check     with --n: compare D with the FP64 product of the operands as the server\n"
    "              takes them (BF16/FP16/FP32 ones quantized to e4m3 first, docs/api.md §1); fail\n"
    "              above a relative Frobenius error of 1e-2 (bf16, fp16 out) or 1e-4 (fp32)\n"
    "  --stream N  send the GEMM N times on one GemmStream (request ids 1..N; over shared\n"
    "              memory, N async calls); fail unless each id is answered once, OK, with\n"
    "              the same D\n"
    "  --session N send the GEMM N times one after another in a GEMM session (one\n"
    "              GemmStream, each answer awaited before the next request; over shared\n"
    "              memory, N calls); fail unless each is answered OK with the same D\n"
    "  --in-region over shared memory, with --n: A, its scales and D in a region (a memfd,\n"
    "              docs/shm-protocol.md §7) that gemmd reads and writes in place, not the\n"
    "              arena; gemmd's CPU backend takes such regions\n";

typedef struct gemm_opts_s {
  uint32_t m, n, k;
  const char *weight;
  uint64_t weight_id;
  gemmd_dtype_t a_dtype, b_dtype, out;
  gemmd_scale_layout_t a_layout, b_layout;
  uint64_t seed;
  int check, in_region;
  uint32_t stream;  /* 0: one unary call */
  uint32_t session; /* 0: no session */
} gemm_opts_t;

typedef struct gemm_flags_s {
  const char *m, *k, *n, *weight, *weight_id, *a_dtype, *a_layout, *b_dtype, *b_layout, *out, *seed,
      *check, *stream, *session, *in_region;
} gemm_flags_t;

static int bad(const char *fmt, const char *value) {
  char msg[256];
  snprintf(msg, sizeof msg, fmt, value != NULL ? value : "");
  return ctl_failf(CTL_EXIT_USAGE, GEMMD_STATUS_INVALID_ARGUMENT, "gemm: %s", msg);
}

static gemmd_scale_layout_t default_layout(gemmd_dtype_t dtype, gemmd_scale_layout_t fp8) {
  return gemmd_dtype_is_fp8(dtype) ? fp8 : GEMMD_SCALE_NONE;
}

static int parse_types(const gemm_flags_t *f, gemm_opts_t *o) {
  o->a_dtype = o->b_dtype = GEMMD_DTYPE_FP8_E4M3;
  o->out = GEMMD_DTYPE_BF16;
  if (f->a_dtype && ctl_parse_dtype(f->a_dtype, &o->a_dtype))
    return bad("bad --a-dtype '%s'", f->a_dtype);
  if (f->b_dtype && ctl_parse_dtype(f->b_dtype, &o->b_dtype))
    return bad("bad --b-dtype '%s'", f->b_dtype);
  if (f->out && (ctl_parse_dtype(f->out, &o->out) || gemmd_dtype_is_fp8(o->out))) {
    return bad("--out must be bf16, fp16 or fp32, not '%s'", f->out);
  }
  o->a_layout = default_layout(o->a_dtype, GEMMD_SCALE_BLOCK_1X128);
  o->b_layout = default_layout(o->b_dtype, GEMMD_SCALE_BLOCK_128X128);
  if (f->a_layout && ctl_parse_layout(f->a_layout, &o->a_layout))
    return bad("bad --a-layout '%s'", f->a_layout);
  if (f->b_layout && ctl_parse_layout(f->b_layout, &o->b_layout))
    return bad("bad --b-layout '%s'", f->b_layout);
  return 0;
}

static int parse_shape(const gemm_flags_t *f, gemm_opts_t *o) {
  if (ctl_parse_dim(f->m, &o->m) != 0) return bad("--m must be a dimension >= 1, not '%s'", f->m);
  if (ctl_parse_dim(f->k, &o->k) != 0) return bad("--k must be a dimension >= 1, not '%s'", f->k);
  const int ways = (f->weight != NULL) + (f->weight_id != NULL) + (f->n != NULL);
  if (ways != 1) return bad("name B once: --weight NAME, --weight-id ID or --n N%s", "");
  o->weight = f->weight;
  if (f->weight_id && (ctl_parse_u64(f->weight_id, &o->weight_id) || o->weight_id == 0)) {
    return bad("bad --weight-id '%s'", f->weight_id);
  }
  if (f->n && ctl_parse_dim(f->n, &o->n) != 0)
    return bad("--n must be a dimension >= 1, not '%s'", f->n);
  o->seed = 1;
  if (f->seed && ctl_parse_u64(f->seed, &o->seed) != 0) return bad("bad --seed '%s'", f->seed);
  o->check = f->check != NULL;
  if (f->stream && (ctl_parse_dim(f->stream, &o->stream) != 0 || o->stream > 1000000)) {
    return bad("--stream must be a count from 1 to 1000000, not '%s'", f->stream);
  }
  if (f->session && (ctl_parse_dim(f->session, &o->session) != 0 || o->session > 1000000)) {
    return bad("--session must be a count from 1 to 1000000, not '%s'", f->session);
  }
  if (o->stream > 0 && o->session > 0) return bad("--stream or --session, not both%s", "");
  if (o->check && f->n == NULL) return bad("--check needs an inline B (--n N)%s", "");
  o->in_region = f->in_region != NULL;
  if (o->in_region && (f->n == NULL || o->stream > 0 || o->session > 0)) {
    return bad("--in-region needs an inline B (--n N), without --stream or --session%s", "");
  }
  return 0;
}

static int parse_opts(int argc, char **argv, gemm_opts_t *o, int *exit_code) {
  gemm_flags_t f;
  memset(&f, 0, sizeof f);
  const ctl_flag_t flags[] = {
      {"m", 1, &f.m},
      {"k", 1, &f.k},
      {"n", 1, &f.n},
      {"weight", 1, &f.weight},
      {"weight-id", 1, &f.weight_id},
      {"a-dtype", 1, &f.a_dtype},
      {"a-layout", 1, &f.a_layout},
      {"b-dtype", 1, &f.b_dtype},
      {"b-layout", 1, &f.b_layout},
      {"out", 1, &f.out},
      {"seed", 1, &f.seed},
      {"check", 0, &f.check},
      {"stream", 1, &f.stream},
      {"session", 1, &f.session},
      {"in-region", 0, &f.in_region},
  };
  ctl_args_t a = {.flags = flags, .n_flags = sizeof flags / sizeof flags[0]};
  memset(o, 0, sizeof *o);
  if (ctl_parse_command(&a, argc, argv, kUsage, exit_code) != 0) return -1;
  if ((*exit_code = parse_shape(&f, o)) != 0) return -1;
  if ((*exit_code = parse_types(&f, o)) != 0) return -1;
  return 0;
}

/* FNV-1a over the bytes and the sum of the values: enough to compare two runs. */
static void print_result(const gemmd_gemm_result_t *r) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < r->data_bytes; i++)
    h = (h ^ ((const uint8_t *)r->data)[i]) * 0x100000001b3ull;
  double sum = 0;
  const size_t n = (size_t)r->rows * r->cols;
  float row[256];
  for (size_t i = 0; i < n; i += 256) {
    const size_t len = n - i < 256 ? n - i : 256;
    gemmd_decode_row(r->dtype, (const uint8_t *)r->data + i * gemmd_dtype_size(r->dtype), len, row);
    for (size_t j = 0; j < len; j++) sum += row[j];
  }
  printf("d          %ux%u %s (%zu bytes)\n", r->rows, r->cols, gemmd_dtype_name(r->dtype),
         r->data_bytes);
  printf("checksum   sum %.9g, fnv1a64 %016" PRIx64 "\n", sum, h);
  printf("server     queue %.1f us, compute %.1f us, total %.1f us; batch #%" PRIu64
         ": %u requests, %u groups\n",
         (double)r->stats.queue_ns / 1e3, (double)r->stats.compute_ns / 1e3,
         (double)r->stats.total_ns / 1e3, r->stats.batch_id, r->stats.batch_requests,
         r->stats.batch_groups);
  printf("client     round trip %.1f us\n", (double)r->client_ns / 1e3);
}

/* The operand the server multiplies (docs/api.md §1): FP8 as sent; BF16/FP16/FP32 quantized to
 * E4M3 with `layout` (1x128 for A, 128x128 for B). *q owns the quantized copy. */
static int as_served(const gemmd_operand_t *op, gemmd_scale_layout_t layout, ctl_matrix_t *q,
                     const gemmd_operand_t **out) {
  memset(q, 0, sizeof *q);
  *out = op;
  if (gemmd_dtype_is_fp8(op->dtype)) return 0;
  q->data = malloc((size_t)op->rows * op->cols + 1);
  q->scales = malloc(sizeof(float) * (gemmd_scale_count(layout, op->rows, op->cols) + 1));
  if (q->data == NULL || q->scales == NULL ||
      gemmd_quantize(op, GEMMD_DTYPE_FP8_E4M3, layout, q->data, q->scales) != 0) {
    return -1;
  }
  q->op = (gemmd_operand_t){op->rows, op->cols, op->cols, GEMMD_DTYPE_FP8_E4M3,
                            q->data,  layout,   q->scales};
  *out = &q->op;
  return 0;
}

/* The relative Frobenius error of D against the FP64 product of what the server
 * multiplies; a negative value when memory ran out. */
static double error_of(const gemmd_operand_t *a, const gemmd_operand_t *b,
                       const gemmd_gemm_result_t *r) {
  ctl_matrix_t qa, qb;
  const gemmd_operand_t *sa, *sb;
  double err = -1;
  memset(&qa, 0, sizeof qa);
  memset(&qb, 0, sizeof qb);
  double *ref = malloc(sizeof(double) * (size_t)a->rows * b->rows);
  if (ref != NULL && as_served(a, GEMMD_SCALE_BLOCK_1X128, &qa, &sa) == 0 &&
      as_served(b, GEMMD_SCALE_BLOCK_128X128, &qb, &sb) == 0 &&
      gemmd_ref_gemm_f64(sa, sb, ref) == 0) {
    err = gemmd_rel_frobenius_error(ref, r->data, r->dtype, (size_t)a->rows * b->rows);
  }
  ctl_matrix_free(&qa);
  ctl_matrix_free(&qb);
  free(ref);
  return err;
}

static int check_result(const gemmd_operand_t *a, const gemmd_operand_t *b,
                        const gemmd_gemm_result_t *r, gemmd_dtype_t out) {
  if (r->rows != a->rows || r->cols != b->rows || r->dtype != out) {
    return ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_INTERNAL,
                     "check: got %ux%u %s, asked for %ux%u %s", r->rows, r->cols,
                     gemmd_dtype_name(r->dtype), a->rows, b->rows, gemmd_dtype_name(out));
  }
  const double err = error_of(a, b, r);
  if (err < 0) {
    return ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_RESOURCE_EXHAUSTED,
                     "check: no memory for the reference");
  }
  const double limit = out == GEMMD_DTYPE_FP32 ? 1e-4 : 1e-2;
  printf("check      relative Frobenius error %.3g (limit %.0e): %s\n", err, limit,
         err <= limit ? "ok" : "FAILED");
  if (!(err <= limit)) {
    fprintf(stderr, "gemmctl: check failed: relative error %.3g > %.0e\n", err, limit);
    return CTL_EXIT_FAIL;
  }
  return CTL_EXIT_OK;
}

static uint64_t ctl_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* What came back on a stream, gathered by its `done` callback. */
typedef struct {
  pthread_mutex_t mu;
  uint32_t n, answered, failed, unknown_id, mismatch;
  uint8_t *seen; /* by request id - 1 */
  gemmd_gemm_result_t first; /* the first OK answer, kept */
  int have_first;
  gemmd_status_t first_error;
} stream_tally_t;

static void on_answer(void *user, gemmd_gemm_result_t *r, const gemmd_status_t *st) {
  stream_tally_t *t = user;
  pthread_mutex_lock(&t->mu);
  t->answered++;
  if (r != NULL && r->request_id >= 1 && r->request_id <= t->n && !t->seen[r->request_id - 1]) {
    t->seen[r->request_id - 1] = 1;
  } else {
    t->unknown_id++;
  }
  if (st->code != GEMMD_STATUS_OK) {
    if (t->failed++ == 0) t->first_error = *st;
  } else if (!t->have_first) {
    t->first = *r; /* its data stays, owned here */
    t->have_first = 1;
    r->data = NULL;
  } else if (r->data_bytes != t->first.data_bytes || memcmp(r->data, t->first.data, r->data_bytes) != 0) {
    t->mismatch++;
  }
  pthread_mutex_unlock(&t->mu);
  if (r != NULL) {
    gemmd_gemm_result_free(r);
    free(r);
  }
}

static int run_stream(gemmd_client_t *c, const gemm_opts_t *o, gemmd_gemm_call_t *call,
                      const ctl_matrix_t *a, const ctl_matrix_t *b) {
  stream_tally_t t;
  memset(&t, 0, sizeof t);
  pthread_mutex_init(&t.mu, NULL);
  t.n = o->stream;
  t.seen = calloc(o->stream, 1);
  gemmd_status_t st, send_st;
  gemmd_gemm_stream_t *s = NULL;
  if (t.seen == NULL) return ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  if (gemmd_client_gemm_stream_open(c, on_answer, &t, &s, &st) != 0) {
    free(t.seen);
    return ctl_fail(&st);
  }
  const uint64_t t0 = ctl_now_ns();
  uint32_t sent = 0;
  int send_rc = 0;
  for (uint32_t i = 1; i <= o->stream && send_rc == 0; i++) {
    call->request_id = i;
    send_rc = gemmd_gemm_stream_send(s, call, &send_st);
    if (send_rc == 0) sent++;
  }
  const int close_rc = gemmd_gemm_stream_close(s, &st);
  const double ms = (double)(ctl_now_ns() - t0) / 1e6;
  int exit_code = CTL_EXIT_OK;
  if (t.have_first) print_result(&t.first);
  printf("stream     %u requests sent, %u answered (%u failed) in %.1f ms: %.0f req/s\n", sent, t.answered,
         t.failed, ms, ms > 0 ? t.answered / ms * 1e3 : 0.0);
  if (send_rc != 0) {
    exit_code = ctl_fail(&send_st);
  } else if (close_rc != 0) {
    exit_code = ctl_fail(&st);
  } else if (t.failed > 0) {
    exit_code = ctl_failf(CTL_EXIT_FAIL, t.first_error.code, "%u of %u requests failed, the first: %s",
                          t.failed, t.n, t.first_error.message);
  } else if (t.answered != t.n || t.unknown_id > 0 || t.mismatch > 0) {
    exit_code = ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_INTERNAL,
                          "stream: %u answers for %u requests, %u with an unknown or repeated id, %u "
                          "with another D", t.answered, t.n, t.unknown_id, t.mismatch);
  } else if (o->check) {
    exit_code = check_result(&a->op, &b->op, &t.first, o->out);
  }
  gemmd_gemm_result_free(&t.first);
  free(t.seen);
  pthread_mutex_destroy(&t.mu);
  return exit_code;
}

/* --session: the GEMM N times in a session, one at a time; a failed request is counted
 * and the next one sent, as a serving worker would. */
static int run_session(gemmd_client_t *c, const gemm_opts_t *o, gemmd_gemm_call_t *call,
                       const ctl_matrix_t *a, const ctl_matrix_t *b) {
  gemmd_status_t st, first_error;
  gemmd_gemm_session_t *s = NULL;
  if (gemmd_client_gemm_session_open(c, &s, &st) != 0) return ctl_fail(&st);
  gemmd_gemm_result_t first, r;
  memset(&first, 0, sizeof first);
  int have_first = 0;
  uint32_t failed = 0, mismatch = 0;
  const uint64_t t0 = ctl_now_ns();
  for (uint32_t i = 1; i <= o->session; i++) {
    call->request_id = i;
    if (gemmd_gemm_session_call(s, call, &r, &st) != 0) {
      if (failed++ == 0) first_error = st;
      gemmd_gemm_result_free(&r);
      continue;
    }
    if (!have_first) {
      first = r;
      have_first = 1;
      mismatch += r.request_id != i;
      continue;
    }
    mismatch += r.request_id != i || r.data_bytes != first.data_bytes ||
                memcmp(r.data, first.data, r.data_bytes) != 0;
    gemmd_gemm_result_free(&r);
  }
  const double ms = (double)(ctl_now_ns() - t0) / 1e6;
  gemmd_status_t close_st;
  const int close_rc = gemmd_gemm_session_close(s, &close_st);
  if (have_first) print_result(&first);
  printf("session    %u requests, %u answered OK, %u failed, in %.1f ms: %.0f req/s\n", o->session,
         o->session - failed, failed, ms, ms > 0 ? o->session / ms * 1e3 : 0.0);
  int exit_code = CTL_EXIT_OK;
  if (failed > 0) {
    exit_code = ctl_failf(CTL_EXIT_FAIL, first_error.code, "%u of %u requests failed, the first: %s", failed,
                          o->session, first_error.message);
  } else if (close_rc != 0) {
    exit_code = ctl_fail(&close_st);
  } else if (mismatch > 0) {
    exit_code = ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_INTERNAL,
                          "session: %u of %u answers with another request id or another D", mismatch, o->session);
  } else if (o->check) {
    exit_code = check_result(&a->op, &b->op, &first, o->out);
  }
  if (have_first) gemmd_gemm_result_free(&first);
  return exit_code;
}

static uint64_t round256(uint64_t x) { return (x + 255) & ~(uint64_t)255; }

/* The call with A, its scales and D in one memfd region: r owns a copy of D. */
static int gemm_in_region(gemmd_client_t *c, gemmd_gemm_call_t *call, gemmd_gemm_result_t *r,
                          gemmd_status_t *st) {
  const gemmd_operand_t *a = &call->a;
  const uint64_t a_bytes = (uint64_t)a->rows * a->cols * gemmd_dtype_size(a->dtype);
  const uint64_t s_bytes = 4 * (uint64_t)gemmd_scale_count(a->scale_layout, a->rows, a->cols);
  const uint64_t d_bytes = (uint64_t)a->rows * call->b->rows * gemmd_dtype_size(call->out_dtype);
  const uint64_t s_off = round256(a_bytes), d_off = s_off + round256(s_bytes);
  const uint64_t bytes = d_off + round256(d_bytes);
  const int fd = memfd_create("gemmctl-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  uint8_t *p = MAP_FAILED;
  if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0 ||
      (p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
    if (fd >= 0) close(fd);
    return gemmd_status_set(st, GEMMD_STATUS_RESOURCE_EXHAUSTED, "memfd region: %s", strerror(errno));
  }
  memcpy(p, a->data, a_bytes); /* ctl_matrix_random's A is dense */
  if (s_bytes) memcpy(p + s_off, a->scales, s_bytes);
  uint32_t id = 0;
  int rc = gemmd_client_region_open_fd(c, fd, bytes, &id, st);
  close(fd);
  if (rc == 0) {
    call->a_region = (gemmd_region_ref_t){id, 0};
    call->a_scales_region = (gemmd_region_ref_t){s_bytes ? id : 0, s_off};
    call->d_region = (gemmd_region_ref_t){id, d_off};
    rc = gemmd_client_gemm(c, call, r, st);
    if (rc == 0) {
      r->data = malloc(d_bytes ? d_bytes : 1);
      r->data_borrowed = 0;
      if (r->data == NULL) {
        rc = gemmd_status_set(st, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
      } else {
        memcpy(r->data, p + d_off, d_bytes);
      }
    }
    gemmd_status_t close_st;
    if (gemmd_client_region_close(c, id, &close_st) != 0 && rc == 0) {
      gemmd_gemm_result_free(r);
      *st = close_st;
      rc = close_st.code;
    }
  }
  munmap(p, bytes);
  return rc;
}

static int run(const ctl_global_t *g, const gemm_opts_t *o, const ctl_matrix_t *a,
               const ctl_matrix_t *b) {
  gemmd_gemm_call_t call;
  memset(&call, 0, sizeof call);
  call.request_id = o->seed;
  call.weight_id = o->weight_id;
  call.weight_name = o->weight;
  call.b = o->n ? &b->op : NULL;
  call.a = a->op;
  call.out_dtype = o->out;
  gemmd_client_t *c = ctl_open(g);
  if (c == NULL) return CTL_EXIT_FAIL;
  if (o->stream > 0 || o->session > 0) {
    const int exit_code = o->stream > 0 ? run_stream(c, o, &call, a, b) : run_session(c, o, &call, a, b);
    gemmd_client_close(c);
    return exit_code;
  }
  gemmd_gemm_result_t r;
  gemmd_status_t st;
  const int rc = o->in_region ? gemm_in_region(c, &call, &r, &st) : gemmd_client_gemm(c, &call, &r, &st);
  gemmd_client_close(c);
  if (rc != 0) return ctl_fail(&st);
  print_result(&r);
  const int exit_code = o->check ? check_result(&a->op, &b->op, &r, o->out) : CTL_EXIT_OK;
  gemmd_gemm_result_free(&r);
  return exit_code;
}

int ctl_cmd_gemm(const ctl_global_t *g, int argc, char **argv) {
  gemm_opts_t o;
  int exit_code = 0;
  if (parse_opts(argc, argv, &o, &exit_code) != 0) return exit_code;
  ctl_rng_t rng = {o.seed};
  ctl_matrix_t a, b;
  memset(&b, 0, sizeof b);
  if (ctl_matrix_random(&a, &rng, o.m, o.k, o.a_dtype, o.a_layout) != 0 ||
      (o.n && ctl_matrix_random(&b, &rng, o.n, o.k, o.b_dtype, o.b_layout) != 0)) {
    ctl_matrix_free(&a);
    return ctl_failf(CTL_EXIT_FAIL, GEMMD_STATUS_RESOURCE_EXHAUSTED,
                     "gemm: no memory for the inputs");
  }
  exit_code = run(g, &o, &a, &b);
  ctl_matrix_free(&a);
  ctl_matrix_free(&b);
  return exit_code;
}
