/* The library end to end against the fake gemmd (fake_service.c, a real gRPC server in
 * this process): results decoded and equal to the FP64 reference for inline and
 * registered B; a weight streamed in several messages (strided, with scales) arrives
 * byte-exact; server errors arrive with their code and message; list, unregister, stats,
 * health; async calls all call back with their own results; with a dead endpoint before
 * it, every call still reaches the live one. */
#include "client/testing/fake_server.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "client/gemmctl/ctl_random.h"
#include "client/lib/gemmclient.h"
#include "client/testing/testing.h"
#include "kernels/ref_gemm.h"

static fake_server_t *srv;
static gemmd_client_t *c;

static void expect_ok(int rc, const gemmd_status_t *st, const char *what) {
  CHECK(rc == 0 && st->code == 0, "%s: %s: %s", what, gemmd_status_name(rc), st->message);
}

static void expect_code(int rc, const gemmd_status_t *st, int want, const char *text,
                        const char *what) {
  CHECK(rc == want && st->code == want, "%s: %s, want %s", what, gemmd_status_name(rc),
        gemmd_status_name(want));
  CHECK(strstr(st->message, text) != NULL, "%s: message '%s' lacks '%s'", what, st->message, text);
}

/* D (FP32 output) must be the reference rounded to FP32. */
static void check_product(const gemmd_operand_t *a, const gemmd_operand_t *b,
                          const gemmd_gemm_result_t *r, const char *what) {
  CHECK(r->rows == a->rows && r->cols == b->rows && r->dtype == GEMMD_DTYPE_FP32, "%s: shape",
        what);
  double *ref = malloc(sizeof(double) * a->rows * b->rows);
  CHECK(ref != NULL && gemmd_ref_gemm_f64(a, b, ref) == 0, "reference");
  const double err = gemmd_rel_frobenius_error(ref, r->data, r->dtype, (size_t)a->rows * b->rows);
  CHECK(err < 1e-6, "%s: relative error %g", what, err);
  free(ref);
}

static gemmd_gemm_call_t call_for(const ctl_matrix_t *a) {
  gemmd_gemm_call_t call;
  memset(&call, 0, sizeof call);
  call.a = a->op;
  call.out_dtype = GEMMD_DTYPE_FP32;
  return call;
}

static void check_inline(const ctl_matrix_t *a, const ctl_matrix_t *b) {
  gemmd_gemm_call_t call = call_for(a);
  gemmd_gemm_result_t r;
  gemmd_status_t st;
  call.request_id = 77;
  call.b = &b->op;
  expect_ok(gemmd_client_gemm(c, &call, &r, &st), &st, "inline gemm");
  CHECK(r.request_id == 77 && r.stats.compute_ns == 2000 && r.stats.batch_requests == 1,
        "echo and stats");
  CHECK(r.client_ns > 0 && r.data_bytes == (size_t)a->op.rows * b->op.rows * 4, "sizes");
  check_product(&a->op, &b->op, &r, "inline");
  gemmd_gemm_result_free(&r);
  call.out_dtype = GEMMD_DTYPE_UNSPECIFIED;
  expect_ok(gemmd_client_gemm(c, &call, &r, &st), &st, "default out dtype");
  CHECK(r.dtype == GEMMD_DTYPE_BF16 && r.data_bytes == (size_t)a->op.rows * b->op.rows * 2,
        "BF16 by default");
  gemmd_gemm_result_free(&r);
}

/* Registers b through a strided view (ld = k + 5), so the upload copies row pieces. */
static uint64_t check_register(const ctl_matrix_t *b) {
  const uint32_t n = b->op.rows, k = b->op.cols;
  uint8_t *strided = malloc((size_t)n * (k + 5));
  CHECK(strided != NULL, "alloc");
  for (uint32_t r = 0; r < n; r++) {
    memcpy(strided + (size_t)r * (k + 5), (const uint8_t *)b->data + (size_t)r * k, k);
    memset(strided + (size_t)r * (k + 5) + k, 0xEE, 5);
  }
  gemmd_operand_t w = b->op;
  w.ld = k + 5;
  w.data = strided;
  fake_service_t *svc = fake_server_service(srv);
  const size_t before = fake_service_register_messages(svc);
  gemmd_weight_info_t info;
  gemmd_status_t st;
  expect_ok(gemmd_client_register_weight(c, "big", &w, &info, &st), &st, "register");
  const size_t messages = fake_service_register_messages(svc) - before;
  const size_t full = ((size_t)n * k + (1u << 20) - 1) >> 20;
  CHECK(messages == full || messages == full + 1, "%zu messages for %u bytes", messages, n * k);
  CHECK(messages > 1, "a multi-message upload");
  CHECK(info.weight_id != 0 && strcmp(info.name, "big") == 0 && info.n == n && info.k == k, "info");
  CHECK(info.dtype == GEMMD_DTYPE_FP8_E4M3 && info.scale_layout == GEMMD_SCALE_BLOCK_128X128 &&
            info.bytes == (uint64_t)n * k,
        "info kinds");
  const uint64_t id = info.weight_id;
  expect_code(gemmd_client_register_weight(c, "big", &w, &info, &st), &st,
              GEMMD_STATUS_ALREADY_EXISTS, "'big'", "duplicate name");
  CHECK(info.weight_id == 0, "info cleared on failure");
  free(strided);
  return id;
}

static void check_registered(const ctl_matrix_t *a, const ctl_matrix_t *b, uint64_t id) {
  gemmd_gemm_call_t call = call_for(a);
  gemmd_gemm_result_t r;
  gemmd_status_t st;
  call.weight_id = id;
  expect_ok(gemmd_client_gemm(c, &call, &r, &st), &st, "gemm by id");
  check_product(&a->op, &b->op, &r, "by id"); /* so the upload was byte-exact */
  gemmd_gemm_result_free(&r);
  call.weight_id = 0;
  call.weight_name = "big";
  expect_ok(gemmd_client_gemm(c, &call, &r, &st), &st, "gemm by name");
  check_product(&a->op, &b->op, &r, "by name");
  gemmd_gemm_result_free(&r);
  call.weight_name = "x";
  expect_code(gemmd_client_gemm(c, &call, &r, &st), &st, GEMMD_STATUS_NOT_FOUND,
              "no weight named 'x'", "unknown weight");
  CHECK(r.data == NULL, "no data on failure");
}

static void check_admin(uint64_t id) {
  gemmd_weight_info_t *w = NULL;
  size_t n = 0;
  gemmd_status_t st;
  expect_ok(gemmd_client_list_weights(c, &w, &n, &st), &st, "list");
  CHECK(n == 1 && w[0].weight_id == id && strcmp(w[0].name, "big") == 0, "listed");
  free(w);
  int serving = 0;
  expect_ok(gemmd_client_health(c, "", &serving, &st), &st, "health");
  CHECK(serving == 1, "SERVING");
  expect_ok(gemmd_client_health(c, "gemmd.v1.GemmService", &serving, &st), &st, "health svc");
  expect_code(gemmd_client_health(c, "other", &serving, &st), &st, GEMMD_STATUS_NOT_FOUND, "other",
              "unknown service");
  char *json = NULL;
  expect_ok(gemmd_client_get_stats_json(c, &json, &st), &st, "stats");
  CHECK(strstr(json,
               "{\"version\":\"fake\",\"backend\":\"cpu\",\"device\":\"fake \\\"device\\\"\"") ==
            json,
        "stats json: %s", json);
  CHECK(strstr(json, "\"weights\":1,") != NULL, "weights in stats: %s", json);
  free(json);
  expect_ok(gemmd_client_unregister_weight(c, 0, "big", &st), &st, "unregister by name");
  expect_code(gemmd_client_unregister_weight(c, id, NULL, &st), &st, GEMMD_STATUS_NOT_FOUND,
              "no such", "unregister twice");
  expect_ok(gemmd_client_list_weights(c, &w, &n, &st), &st, "list empty");
  CHECK(n == 0 && w == NULL, "nothing listed");
}

typedef struct {
  const ctl_matrix_t *a, *b;
  atomic_int ok, done;
} async_state_t;

static void on_done(void *user, gemmd_gemm_result_t *r, const gemmd_status_t *st) {
  async_state_t *s = user;
  if (st->code == 0 && r->request_id >= 100 && r->request_id < 108 && r->rows == s->a->op.rows &&
      r->cols == s->b->op.rows) {
    atomic_fetch_add(&s->ok, 1);
  }
  gemmd_gemm_result_free(r);
  free(r);
  atomic_fetch_add(&s->done, 1);
}

static void check_async(const ctl_matrix_t *a, const ctl_matrix_t *b) {
  async_state_t s = {a, b, 0, 0};
  gemmd_gemm_call_t call = call_for(a);
  gemmd_status_t st;
  call.b = &b->op;
  for (uint64_t i = 0; i < 8; i++) {
    call.request_id = 100 + i;
    expect_ok(gemmd_client_gemm_async(c, &call, on_done, &s, &st), &st, "async start");
  }
  gemmd_client_drain(c);
  CHECK(atomic_load(&s.done) == 8 && atomic_load(&s.ok) == 8, "%d done, %d ok",
        atomic_load(&s.done), atomic_load(&s.ok));
}

/* Two endpoints, the first with nothing listening: every GEMM that goes to it first is
 * answered UNAVAILABLE there and sent on to the second, sync and async alike. */
static void check_failover(const char *live, const ctl_matrix_t *a, const ctl_matrix_t *b) {
  char both[128];
  snprintf(both, sizeof both, "127.0.0.1:1,%s", live);
  gemmd_client_t *saved = c;
  gemmd_status_t st;
  const gemmd_client_options_t o = {20000, 0, NULL, NULL, NULL, NULL};
  expect_ok(gemmd_client_open(both, &o, &c, &st), &st, "open two endpoints");
  gemmd_gemm_call_t call = call_for(a);
  call.b = &b->op;
  for (int i = 0; i < 4; i++) {
    gemmd_gemm_result_t r;
    expect_ok(gemmd_client_gemm(c, &call, &r, &st), &st, "sync gemm past a dead endpoint");
    if (st.code == 0) check_product(&a->op, &b->op, &r, "failover");
    gemmd_gemm_result_free(&r);
  }
  check_async(a, b);
  gemmd_client_close(c);
  c = saved;
}

int main(void) {
  int port;
  char addr[64];
  srv = fake_server_start(0, &port);
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  gemmd_status_t st;
  const gemmd_client_options_t o = {20000, 0, NULL, NULL, NULL, NULL};
  expect_ok(gemmd_client_open(addr, &o, &c, &st), &st, "open");

  ctl_rng_t rng = {2024};
  ctl_matrix_t a, b;
  CHECK(ctl_matrix_random(&a, &rng, 3, 1100, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_1X128) == 0,
        "a");
  /* 2300×1100 E4M3 = 2.4 MiB: three messages, the last with the 18×9 block scales. */
  CHECK(
      ctl_matrix_random(&b, &rng, 2300, 1100, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_128X128) == 0,
      "b");
  check_inline(&a, &b);
  const uint64_t id = check_register(&b);
  check_registered(&a, &b, id);
  check_admin(id);
  check_async(&a, &b);
  check_failover(addr, &a, &b);

  ctl_matrix_free(&a);
  ctl_matrix_free(&b);
  gemmd_client_close(c);
  fake_server_stop(srv);
  printf("fake_server_test: ok\n");
  return 0;
}
