/* The library without a server: every RPC to a closed port fails fast with UNAVAILABLE
 * and a message (sync, async, streaming), a silent server gives DEADLINE_EXCEEDED at the
 * deadline, and local mistakes are refused before any network traffic. */
#include <netinet/in.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client/lib/gemmclient.h"
#include "client/testing/testing.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static gemmd_client_t *open_ok(const char *addr, int64_t timeout_ms) {
  gemmd_client_options_t o = {timeout_ms, 0, NULL, NULL, NULL, NULL};
  gemmd_client_t *c = NULL;
  gemmd_status_t st;
  const int rc = gemmd_client_open(addr, &o, &c, &st);
  CHECK(rc == 0 && c != NULL, "open %s: %d %s", addr, rc, st.message);
  CHECK(strcmp(gemmd_client_transport(c), "grpc") == 0, "transport");
  return c;
}

static void expect_code(int rc, const gemmd_status_t *st, int want, const char *what) {
  CHECK(rc == want && st->code == want, "%s: rc %d (%s), status %d, want %s", what, rc,
        gemmd_status_name(rc), st->code, gemmd_status_name(want));
  CHECK(st->message[0] != '\0', "%s: empty message", what);
}

static uint8_t a_data[4 * 256];
static float a_scales[8] = {1, 1, 1, 1, 1, 1, 1, 1};

static gemmd_gemm_call_t small_call(void) {
  gemmd_gemm_call_t call;
  memset(&call, 0, sizeof call);
  call.weight_name = "w";
  call.a = (gemmd_operand_t){
      4, 256, 256, GEMMD_DTYPE_FP8_E4M3, a_data, GEMMD_SCALE_BLOCK_1X128, a_scales};
  return call;
}

typedef struct {
  atomic_int calls;
  atomic_int unavailable;
} async_count_t;

static void on_done(void *user, gemmd_gemm_result_t *r, const gemmd_status_t *st) {
  async_count_t *n = user;
  if (st->code == GEMMD_STATUS_UNAVAILABLE && st->message[0] != '\0' && r->data == NULL) {
    atomic_fetch_add(&n->unavailable, 1);
  }
  gemmd_gemm_result_free(r);
  free(r);
  atomic_fetch_add(&n->calls, 1);
}

static void check_closed_port(void) {
  gemmd_client_t *c = open_ok("127.0.0.1:1", 5000);
  gemmd_status_t st;
  const double t0 = now_s();

  gemmd_gemm_call_t call = small_call();
  gemmd_gemm_result_t r;
  expect_code(gemmd_client_gemm(c, &call, &r, &st), &st, GEMMD_STATUS_UNAVAILABLE, "gemm");
  CHECK(r.data == NULL && r.client_ns > 0, "result after failure");

  int serving = 7;
  expect_code(gemmd_client_health(c, "", &serving, &st), &st, GEMMD_STATUS_UNAVAILABLE, "health");
  CHECK(serving == 0, "serving %d", serving);
  gemmd_weight_info_t *infos = (gemmd_weight_info_t *)&st;
  size_t count = 9;
  expect_code(gemmd_client_list_weights(c, &infos, &count, &st), &st, GEMMD_STATUS_UNAVAILABLE,
              "list");
  CHECK(infos == NULL && count == 0, "list outputs cleared");
  char *json = (char *)&st;
  expect_code(gemmd_client_get_stats_json(c, &json, &st), &st, GEMMD_STATUS_UNAVAILABLE, "stats");
  CHECK(json == NULL, "json cleared");
  expect_code(gemmd_client_unregister_weight(c, 3, NULL, &st), &st, GEMMD_STATUS_UNAVAILABLE,
              "unregister");

  /* 3 MiB: several RegisterWeight messages. */
  const uint32_t n = 3 * 1024, k = 1024;
  uint8_t *w = calloc((size_t)n * k, 1);
  float *ws = calloc(24 * 8, sizeof(float));
  CHECK(w != NULL && ws != NULL, "alloc");
  const gemmd_operand_t wop = {n, k, k, GEMMD_DTYPE_FP8_E4M3, w, GEMMD_SCALE_BLOCK_128X128, ws};
  gemmd_weight_info_t info;
  expect_code(gemmd_client_register_weight(c, "w", &wop, &info, &st), &st, GEMMD_STATUS_UNAVAILABLE,
              "register");
  free(w);
  free(ws);

  async_count_t counts = {0, 0};
  for (int i = 0; i < 3; i++) {
    CHECK(gemmd_client_gemm_async(c, &call, on_done, &counts, &st) == 0, "async start: %s",
          st.message);
  }
  gemmd_client_drain(c);
  CHECK(atomic_load(&counts.calls) == 3, "drain returned with %d callbacks",
        atomic_load(&counts.calls));
  CHECK(atomic_load(&counts.unavailable) == 3, "%d callbacks saw UNAVAILABLE",
        atomic_load(&counts.unavailable));
  CHECK(now_s() - t0 < 4.0, "failing took %.1f s; it must not wait for the deadline", now_s() - t0);
  gemmd_client_close(c);
}

/* A TCP listener that never speaks HTTP/2: calls wait until their deadline. */
static int silent_listener(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "bind");
  CHECK(listen(fd, 16) == 0 && getsockname(fd, (struct sockaddr *)&sa, &len) == 0, "listen");
  *port = ntohs(sa.sin_port);
  return fd;
}

static void check_deadline(void) {
  int port;
  const int fd = silent_listener(&port);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  gemmd_client_t *c = open_ok(addr, 1000);
  gemmd_status_t st;
  gemmd_gemm_call_t call = small_call();
  gemmd_gemm_result_t r;
  double t0 = now_s();
  expect_code(gemmd_client_gemm(c, &call, &r, &st), &st, GEMMD_STATUS_DEADLINE_EXCEEDED,
              "client deadline");
  double took = now_s() - t0;
  CHECK(took >= 0.95 && took < 5.0, "client deadline took %.2f s", took);
  call.timeout_ms = 50; /* the call's own deadline wins */
  t0 = now_s();
  expect_code(gemmd_client_gemm(c, &call, &r, &st), &st, GEMMD_STATUS_DEADLINE_EXCEEDED,
              "call deadline");
  took = now_s() - t0;
  CHECK(took >= 0.045 && took < 0.8, "call deadline took %.2f s", took);
  gemmd_client_close(c);
  close(fd);
}

static void check_open_errors(void) {
  gemmd_client_t *c = (gemmd_client_t *)&c;
  gemmd_status_t st;
  expect_code(gemmd_client_open("", NULL, &c, &st), &st, GEMMD_STATUS_INVALID_ARGUMENT, "empty");
  CHECK(c == NULL, "no client on failure");
  expect_code(gemmd_client_open("unix:///nonexistent/gemmd.sock", NULL, &c, &st), &st,
              GEMMD_STATUS_UNAVAILABLE, "unix");
  CHECK(strstr(st.message, "cannot connect to /nonexistent/gemmd.sock") != NULL, "%s", st.message);
  gemmd_client_options_t o = {0, 0, "/nonexistent/ca.pem", NULL, NULL, NULL};
  expect_code(gemmd_client_open("localhost:50051", &o, &c, &st), &st, GEMMD_STATUS_NOT_FOUND,
              "missing CA file");
  CHECK(strstr(st.message, "/nonexistent/ca.pem") != NULL, "%s", st.message);
  char not_pem[] = "/tmp/gemmclient_test_pem_XXXXXX";
  const int fd = mkstemp(not_pem);
  CHECK(fd >= 0 && write(fd, "hello\n", 6) == 6, "temp file");
  close(fd);
  o = (gemmd_client_options_t){0, 0, not_pem, NULL, NULL, NULL};
  expect_code(gemmd_client_open("localhost:50051", &o, &c, &st), &st, GEMMD_STATUS_INVALID_ARGUMENT,
              "not a PEM file");
  CHECK(strstr(st.message, "no PEM certificate") != NULL, "%s", st.message);
  /* Mutual TLS: a certificate without its key, or without TLS, or a key file with no key. */
  o = (gemmd_client_options_t){0, 0, not_pem, NULL, not_pem, NULL};
  expect_code(gemmd_client_open("localhost:50051", &o, &c, &st), &st, GEMMD_STATUS_INVALID_ARGUMENT,
              "certificate without key");
  CHECK(strstr(st.message, "go together") != NULL, "%s", st.message);
  o = (gemmd_client_options_t){0, 0, NULL, NULL, not_pem, not_pem};
  expect_code(gemmd_client_open("localhost:50051", &o, &c, &st), &st, GEMMD_STATUS_INVALID_ARGUMENT,
              "client certificate without TLS");
  CHECK(strstr(st.message, "needs TLS") != NULL, "%s", st.message);
  unlink(not_pem);
  o = (gemmd_client_options_t){-1, 0, NULL, NULL, NULL, NULL};
  expect_code(gemmd_client_open("localhost:50051", &o, &c, &st), &st, GEMMD_STATUS_INVALID_ARGUMENT,
              "negative timeout");
  gemmd_client_close(NULL);
}

static void check_local_refusals(void) {
  gemmd_client_t *c = open_ok("127.0.0.1:1", 5000);
  gemmd_status_t st;
  gemmd_gemm_call_t call = small_call();
  call.weight_id = 4; /* and a name: two ways of naming B */
  gemmd_gemm_result_t r;
  expect_code(gemmd_client_gemm(c, &call, &r, &st), &st, GEMMD_STATUS_INVALID_ARGUMENT, "2 rhs");
  expect_code(gemmd_client_gemm_async(c, &call, on_done, NULL, &st), &st,
              GEMMD_STATUS_INVALID_ARGUMENT, "async 2 rhs");
  expect_code(gemmd_client_unregister_weight(c, 0, NULL, &st), &st, GEMMD_STATUS_INVALID_ARGUMENT,
              "unregister nothing");

  char data_path[] = "/tmp/gemmclient_test_XXXXXX";
  const int fd = mkstemp(data_path);
  CHECK(fd >= 0 && write(fd, "abcdef", 6) == 6, "temp file");
  close(fd);
  gemmd_weight_info_t info;
  expect_code(gemmd_client_register_weight_file(c, "w", 2, 4, GEMMD_DTYPE_FP8_E4M3, data_path,
                                                GEMMD_SCALE_NONE, NULL, &info, &st),
              &st, GEMMD_STATUS_INVALID_ARGUMENT, "file size");
  CHECK(strstr(st.message, "6 bytes") != NULL && strstr(st.message, "8") != NULL, "%s", st.message);
  expect_code(gemmd_client_register_weight_file(c, "w", 2, 3, GEMMD_DTYPE_FP8_E4M3, data_path,
                                                GEMMD_SCALE_ROW, NULL, &info, &st),
              &st, GEMMD_STATUS_INVALID_ARGUMENT, "scales file needed");
  expect_code(gemmd_client_register_weight_file(c, "w", 2, 3, GEMMD_DTYPE_FP8_E4M3, data_path,
                                                GEMMD_SCALE_ROW, "/nonexistent/s", &info, &st),
              &st, GEMMD_STATUS_NOT_FOUND, "missing scales file");
  expect_code(
      gemmd_client_register_weight_file(c, "w", 2, 3, GEMMD_DTYPE_FP8_E4M3, "/nonexistent/w",
                                        GEMMD_SCALE_NONE, NULL, &info, &st),
      &st, GEMMD_STATUS_NOT_FOUND, "missing data file");
  /* Right size: it gets as far as the (absent) server. */
  expect_code(gemmd_client_register_weight_file(c, "w", 2, 3, GEMMD_DTYPE_FP8_E4M3, data_path,
                                                GEMMD_SCALE_NONE, NULL, &info, &st),
              &st, GEMMD_STATUS_UNAVAILABLE, "file upload");
  unlink(data_path);
  gemmd_client_close(c);
}

int main(void) {
  check_open_errors();
  check_closed_port();
  check_deadline();
  check_local_refusals();
  printf("client_test: ok\n");
  return 0;
}
