/* The HTTP server over real sockets: a uv loop on a background thread serves, the main
 * thread is the client (plain POSIX sockets). Checks exact responses (200, 404, 405, 400,
 * 431 at the 16 KiB boundary, HEAD), query stripping, byte-by-byte requests, many
 * concurrent clients, clients that vanish, the idle timeout, listen-address errors, and
 * that stop() closes every connection and frees everything: uv_loop_close returns 0 and
 * no block that http.c allocated is left (malloc/free are wrapped at link time, see BUILD;
 * libuv itself is a shared library and not counted). */
#include "daemon/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "kernels/errors.h"

/* ---- Allocation counting (-Wl,--wrap=malloc,...) -------------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);

static atomic_long live_blocks;

void *__wrap_malloc(size_t n) {
  void *p = __real_malloc(n);
  if (p != NULL) atomic_fetch_add(&live_blocks, 1);
  return p;
}
void *__wrap_calloc(size_t n, size_t m) {
  void *p = __real_calloc(n, m);
  if (p != NULL) atomic_fetch_add(&live_blocks, 1);
  return p;
}
void *__wrap_realloc(void *p, size_t n) {
  void *q = __real_realloc(p, n);
  if (p == NULL && q != NULL) atomic_fetch_add(&live_blocks, 1);
  return q;
}
void __wrap_free(void *p) {
  if (p != NULL) atomic_fetch_sub(&live_blocks, 1);
  __real_free(p);
}

/* ---- Checks --------------------------------------------------------------------------- */

static atomic_int failures;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      atomic_fetch_add(&failures, 1);                                          \
    }                                                                          \
  } while (0)

#define CHECK_STREQ(got, want)                                                           \
  do {                                                                                   \
    const char *g_ = (got), *w_ = (want);                                                \
    if (strcmp(g_, w_) != 0) {                                                           \
      fprintf(stderr, "%s:%d: got\n---\n%s\n---\nwant\n---\n%s\n---\n", __FILE__, __LINE__, \
              g_, w_);                                                                   \
      atomic_fetch_add(&failures, 1);                                                    \
    }                                                                                    \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- The handler (runs on the loop thread) -------------------------------------------- */

#define BIG_LEN (8u << 20)

static char *dup_body(const char *s, size_t *len) {
  *len = strlen(s);
  char *p = malloc(*len + 1);
  memcpy(p, s, *len + 1);
  return p;
}

static void handler(void *ctx, const char *path, gemmd_http_response_t *resp) {
  atomic_fetch_add((atomic_int *)ctx, 1);
  if (strcmp(path, "/hello") == 0) {
    resp->status = 200;
    resp->content_type = "text/plain; charset=utf-8";
    resp->body = dup_body("hello world\n", &resp->body_len);
  } else if (strncmp(path, "/echo", 5) == 0) {
    char text[256];
    snprintf(text, sizeof text, "path=%s", path);
    resp->status = 200;
    resp->content_type = "text/plain";
    resp->body = dup_body(text, &resp->body_len);
  } else if (strcmp(path, "/json") == 0) {
    resp->status = 503;
    resp->content_type = "application/json";
    resp->body = dup_body("{\"ready\":false}", &resp->body_len);
  } else if (strcmp(path, "/empty") == 0) {
    resp->status = 204;
    resp->content_type = "text/plain";
  } else if (strcmp(path, "/big") == 0) {
    resp->status = 200;
    resp->content_type = "application/octet-stream";
    resp->body = malloc(BIG_LEN);
    memset(resp->body, 'x', BIG_LEN);
    resp->body_len = BIG_LEN;
  } else if (strcmp(path, "/leftbody") == 0) {
    /* Status left 0 with a body: the server must free it and answer 404. */
    resp->body = dup_body("ignored", &resp->body_len);
  }
}

/* ---- Client side ---------------------------------------------------------------------- */

static int connect_to(int family, int port) {
  const int fd = socket(family, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct timeval tv = {20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int rc;
  if (family == AF_INET6) {
    struct sockaddr_in6 a;
    memset(&a, 0, sizeof a);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons((uint16_t)port);
    a.sin6_addr = in6addr_loopback;
    rc = connect(fd, (struct sockaddr *)&a, sizeof a);
  } else {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = connect(fd, (struct sockaddr *)&a, sizeof a);
  }
  if (rc != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int send_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Reads until EOF into buf (NUL-terminated); the length, or -1 on error or timeout. */
static long read_all(int fd, char *buf, size_t cap) {
  size_t len = 0;
  for (;;) {
    if (len + 1 >= cap) return -1;
    const ssize_t r = recv(fd, buf + len, cap - 1 - len, 0);
    if (r == 0) break;
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    len += (size_t)r;
  }
  buf[len] = '\0';
  return (long)len;
}

static char resp_buf[BIG_LEN + 4096];

/* One request on a fresh connection; the whole response in resp_buf ("" on failure). */
static const char *request(int port, const char *raw, size_t n) {
  resp_buf[0] = '\0';
  const int fd = connect_to(AF_INET, port);
  CHECK(fd >= 0);
  if (fd < 0) return resp_buf;
  CHECK(send_all(fd, raw, n) == 0);
  const long len = read_all(fd, resp_buf, sizeof resp_buf);
  CHECK(len >= 0);
  if (len < 0) resp_buf[0] = '\0';
  close(fd);
  return resp_buf;
}

static const char *get(int port, const char *raw) { return request(port, raw, strlen(raw)); }

#define OK_HELLO_HEAD                               \
  "HTTP/1.1 200 OK\r\n"                             \
  "Content-Type: text/plain; charset=utf-8\r\n"     \
  "Content-Length: 12\r\n"                          \
  "Connection: close\r\n\r\n"
#define NOT_FOUND_HEAD                              \
  "HTTP/1.1 404 Not Found\r\n"                      \
  "Content-Type: text/plain; charset=utf-8\r\n"     \
  "Content-Length: 10\r\n"                          \
  "Connection: close\r\n\r\n"

/* A request head of exactly `total` bytes for /hello, padded with one header. */
static char *padded_head(size_t total) {
  static const char prefix[] = "GET /hello HTTP/1.1\r\nX-Pad: ";
  static const char suffix[] = "\r\n\r\n";
  const size_t fixed = strlen(prefix) + strlen(suffix);
  char *p = malloc(total + 1);
  memcpy(p, prefix, strlen(prefix));
  memset(p + strlen(prefix), 'a', total - fixed);
  memcpy(p + total - strlen(suffix), suffix, strlen(suffix) + 1);
  return p;
}

static void test_responses(int port) {
  CHECK_STREQ(get(port, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"), OK_HELLO_HEAD "hello world\n");
  CHECK_STREQ(get(port, "GET /hello HTTP/1.0\r\n\r\n"), OK_HELLO_HEAD "hello world\n");
  CHECK_STREQ(get(port, "HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\n"), OK_HELLO_HEAD);
  CHECK_STREQ(get(port, "GET /nothing HTTP/1.1\r\n\r\n"), NOT_FOUND_HEAD "not found\n");
  CHECK_STREQ(get(port, "HEAD /nothing HTTP/1.1\r\n\r\n"), NOT_FOUND_HEAD);
  CHECK_STREQ(get(port, "GET /leftbody HTTP/1.1\r\n\r\n"), NOT_FOUND_HEAD "not found\n");
  CHECK_STREQ(get(port, "POST /hello HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"),
              "HTTP/1.1 405 Method Not Allowed\r\n"
              "Content-Type: text/plain; charset=utf-8\r\n"
              "Content-Length: 19\r\n"
              "Allow: GET, HEAD\r\n"
              "Connection: close\r\n\r\n"
              "method not allowed\n");
  CHECK(strncmp(get(port, "DELETE /x HTTP/1.1\r\n\r\n"), "HTTP/1.1 405 ", 13) == 0);
  CHECK_STREQ(get(port, "GET /echo?a=b&c=d HTTP/1.1\r\n\r\n"),
              "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n"
              "Connection: close\r\n\r\npath=/echo");
  CHECK_STREQ(get(port, "GET /echo/x?#frag HTTP/1.1\r\n\r\n"),
              "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n"
              "Connection: close\r\n\r\npath=/echo/x");
  CHECK_STREQ(get(port, "GET /json HTTP/1.1\r\n\r\n"),
              "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
              "Content-Length: 15\r\nConnection: close\r\n\r\n{\"ready\":false}");
  CHECK_STREQ(get(port, "GET /empty HTTP/1.1\r\n\r\n"),
              "HTTP/1.1 204 No Content\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n"
              "Connection: close\r\n\r\n");

  /* Garbage: 400 with the same shape. */
  static const char bad_400[] =
      "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
      "Content-Length: 12\r\nConnection: close\r\n\r\nbad request\n";
  CHECK_STREQ(get(port, "hello\r\n\r\n"), bad_400);
  CHECK_STREQ(get(port, "GET /x\r\n\r\n"), bad_400);                   /* no version */
  CHECK_STREQ(get(port, "GET /x FTP/1.0\r\n\r\n"), bad_400);
  CHECK_STREQ(get(port, "GET  /x HTTP/1.1\r\n\r\n"), bad_400);         /* two spaces */
  CHECK_STREQ(get(port, "GET x HTTP/1.1\r\n\r\n"), bad_400);           /* not origin-form */
  CHECK_STREQ(get(port, "GET /x HTTP/1.1\r\nno colon\r\n\r\n"), bad_400);
  CHECK_STREQ(get(port, "GET /x HTTP/1.1\r\n: empty name\r\n\r\n"), bad_400);
  CHECK_STREQ(get(port, "GET /x HTTP/1.1\r\nA: b\nC: d\r\n\r\n"), bad_400); /* bare LF */
  CHECK_STREQ(get(port, "\r\n\r\n"), bad_400);

  /* 16 KiB is the limit for the head, terminator included. */
  char *at_limit = padded_head(16384);
  CHECK_STREQ(get(port, at_limit), OK_HELLO_HEAD "hello world\n");
  free(at_limit);
  static const char too_large[] =
      "HTTP/1.1 431 Request Header Fields Too Large\r\n"
      "Content-Type: text/plain; charset=utf-8\r\nContent-Length: 32\r\n"
      "Connection: close\r\n\r\nrequest header fields too large\n";
  char *over = padded_head(16385);
  CHECK_STREQ(get(port, over), too_large);
  free(over);
  char *huge = padded_head(200000); /* far over: the server drains the rest */
  CHECK_STREQ(get(port, huge), too_large);
  free(huge);
  /* Never terminated at all. */
  char *unterminated = padded_head(20000);
  memcpy(unterminated + 20000 - 4, "aaaa", 4);
  CHECK_STREQ(get(port, unterminated), too_large);
  free(unterminated);

  /* A large body arrives whole. */
  const char *big = get(port, "GET /big HTTP/1.1\r\n\r\n");
  const char *body = strstr(big, "\r\n\r\n");
  CHECK(strstr(big, "Content-Length: 8388608\r\n") != NULL);
  CHECK(body != NULL && strlen(body + 4) == BIG_LEN);
}

/* The request arrives one byte at a time. */
static void test_partial(int port) {
  static const char req[] = "GET /echo?slow HTTP/1.1\r\nHost: slow\r\n\r\n";
  const int fd = connect_to(AF_INET, port);
  CHECK(fd >= 0);
  if (fd < 0) return;
  for (size_t i = 0; i < strlen(req); i++) {
    CHECK(send_all(fd, req + i, 1) == 0);
    sleep_ms(2);
  }
  static char buf[4096];
  CHECK(read_all(fd, buf, sizeof buf) > 0);
  CHECK_STREQ(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n"
                   "Connection: close\r\n\r\npath=/echo");
  close(fd);
}

/* Clients that leave early: never send, half a request, reset during a large response,
 * half-close after the request (the response still comes). */
static void test_vanishing_clients(int port) {
  int fd = connect_to(AF_INET, port);
  CHECK(fd >= 0);
  close(fd);

  fd = connect_to(AF_INET, port);
  CHECK(fd >= 0);
  CHECK(send_all(fd, "GET /hel", 8) == 0);
  close(fd);

  for (int i = 0; i < 5; i++) {
    fd = connect_to(AF_INET, port);
    CHECK(fd >= 0);
    CHECK(send_all(fd, "GET /big HTTP/1.1\r\n\r\n", 21) == 0);
    if (i > 0) sleep_ms(5 * i); /* some resets land mid-write */
    struct linger lg = {1, 0};  /* close with RST */
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
  }

  fd = connect_to(AF_INET, port);
  CHECK(fd >= 0);
  CHECK(send_all(fd, "GET /hello HTTP/1.1\r\n\r\n", 23) == 0);
  shutdown(fd, SHUT_WR);
  static char buf[4096];
  CHECK(read_all(fd, buf, sizeof buf) > 0);
  CHECK_STREQ(buf, OK_HELLO_HEAD "hello world\n");
  close(fd);

  /* Still serving. */
  CHECK_STREQ(get(port, "GET /hello HTTP/1.1\r\n\r\n"), OK_HELLO_HEAD "hello world\n");
}

/* Many connections open at once, answered in reverse order of sending. */
static void test_concurrent(int port) {
  enum { N = 200 };
  static int fds[N];
  for (int i = 0; i < N; i++) {
    fds[i] = connect_to(AF_INET, port);
    CHECK(fds[i] >= 0);
  }
  for (int i = 0; i < N; i++) {
    char req[64];
    snprintf(req, sizeof req, "GET /echo/%d HTTP/1.1\r\n\r\n", i);
    if (fds[i] >= 0) CHECK(send_all(fds[i], req, strlen(req)) == 0);
  }
  for (int i = N - 1; i >= 0; i--) {
    if (fds[i] < 0) continue;
    static char buf[4096];
    char want[64];
    snprintf(want, sizeof want, "\r\n\r\npath=/echo/%d", i);
    CHECK(read_all(fds[i], buf, sizeof buf) > 0);
    const char *body = strstr(buf, "\r\n\r\n");
    CHECK(body != NULL && strcmp(body, want) == 0);
    close(fds[i]);
  }
}

/* ---- The loop thread ------------------------------------------------------------------ */

#define MAX_SERVERS 2

typedef struct {
  uv_loop_t loop;
  uv_async_t stop;
  gemmd_http_t *servers[MAX_SERVERS];
  int n_servers;
} world_t;

static void on_async_closed(uv_handle_t *h) { (void)h; }

static void on_stop(uv_async_t *a) {
  world_t *w = a->data;
  for (int i = 0; i < w->n_servers; i++) gemmd_http_stop(w->servers[i]);
  uv_close((uv_handle_t *)a, on_async_closed);
}

static void *loop_main(void *arg) {
  world_t *w = arg;
  uv_run(&w->loop, UV_RUN_DEFAULT);
  return NULL;
}

static void test_bad_listen(void) {
  uv_loop_t loop;
  CHECK(uv_loop_init(&loop) == 0);
  static const char *const bad[] = {"nonsense",       "127.0.0.1",   "127.0.0.1:",
                                    "127.0.0.1:99999", "127.0.0.1:8x", "1.2.3.4.5:80",
                                    "[::1",           "[::1]80",      "[nothing]:80",
                                    "host.example:80", "[]:80",       "127.0.0.1:-1"};
  atomic_int calls = 0;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    gemmd_http_t *h = (gemmd_http_t *)&calls; /* must be overwritten */
    char err[256] = "";
    int port = -1;
    const int rc = gemmd_http_start(&loop, bad[i], handler, &calls, &h, &port, err, sizeof err);
    if (rc != GEMMD_EINVAL) fprintf(stderr, "listen \"%s\": rc %d\n", bad[i], rc);
    CHECK(rc == GEMMD_EINVAL);
    CHECK(h == NULL);
    CHECK(err[0] != '\0');
  }
  CHECK(uv_run(&loop, UV_RUN_DEFAULT) == 0);
  CHECK(uv_loop_close(&loop) == 0);
}

int main(void) {
  /* As the daemon's main does: a peer that resets must not kill the process. */
  signal(SIGPIPE, SIG_IGN);
  const long baseline = atomic_load(&live_blocks);

  test_bad_listen();
  CHECK(atomic_load(&live_blocks) == baseline);

  world_t w;
  memset(&w, 0, sizeof w);
  CHECK(uv_loop_init(&w.loop) == 0);
  CHECK(uv_async_init(&w.loop, &w.stop, on_stop) == 0);
  w.stop.data = &w;
  atomic_int calls = 0;
  char err[256] = "";
  int port = 0;
  CHECK(gemmd_http_start(&w.loop, "127.0.0.1:0", handler, &calls, &w.servers[0], &port, err,
                         sizeof err) == GEMMD_OK);
  CHECK(port > 0 && port < 65536);
  if (w.servers[0] == NULL) {
    fprintf(stderr, "start failed: %s\n", err);
    return 1;
  }
  w.n_servers = 1;

  /* The same port again: EIO with a message (the failed handle is freed by the loop). */
  gemmd_http_t *dup = NULL;
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  err[0] = '\0';
  CHECK(gemmd_http_start(&w.loop, addr, handler, &calls, &dup, NULL, err, sizeof err) ==
        GEMMD_EIO);
  CHECK(dup == NULL && strstr(err, "address already in use") != NULL);

  int port6 = 0;
  gemmd_http_t *h6 = NULL;
  if (gemmd_http_start(&w.loop, "[::1]:0", handler, &calls, &h6, &port6, err, sizeof err) ==
      GEMMD_OK) {
    w.servers[w.n_servers++] = h6;
  } else {
    printf("note: no IPv6 loopback here (%s); skipping the IPv6 checks\n", err);
  }

  pthread_t thread;
  CHECK(pthread_create(&thread, NULL, loop_main, &w) == 0);

  /* Opened first, never sends: closed by the server after 10 s of silence. */
  const int idle_fd = connect_to(AF_INET, port);
  const double idle_t0 = now_s();
  CHECK(idle_fd >= 0);

  test_responses(port);
  test_partial(port);
  test_vanishing_clients(port);
  test_concurrent(port);

  if (h6 != NULL) {
    const int fd = connect_to(AF_INET6, port6);
    CHECK(fd >= 0);
    if (fd >= 0) {
      static char buf[4096];
      CHECK(send_all(fd, "GET /hello HTTP/1.1\r\n\r\n", 23) == 0);
      CHECK(read_all(fd, buf, sizeof buf) > 0);
      CHECK_STREQ(buf, OK_HELLO_HEAD "hello world\n");
      close(fd);
    }
  }

  /* Idle timeout. */
  if (idle_fd >= 0) {
    char c;
    const ssize_t r = recv(idle_fd, &c, 1, 0);
    const double waited = now_s() - idle_t0;
    CHECK(r == 0); /* EOF, not our 20 s receive timeout */
    if (!(waited > 9.0 && waited < 15.0)) fprintf(stderr, "idle close after %.2f s\n", waited);
    CHECK(waited > 9.0 && waited < 15.0);
    close(idle_fd);
  }

  /* Stop with connections open: each sees EOF, then the loop runs dry. */
  const int open1 = connect_to(AF_INET, port);
  const int open2 = connect_to(AF_INET, port);
  CHECK(open1 >= 0 && open2 >= 0);
  CHECK(send_all(open2, "GET /hel", 8) == 0);
  sleep_ms(200); /* let the loop accept both */
  const int handled_before = atomic_load(&calls);
  CHECK(uv_async_send(&w.stop) == 0);
  char c;
  CHECK(recv(open1, &c, 1, 0) == 0);
  CHECK(recv(open2, &c, 1, 0) == 0);
  close(open1);
  close(open2);
  CHECK(pthread_join(thread, NULL) == 0);
  CHECK(atomic_load(&calls) == handled_before);
  CHECK(uv_loop_close(&w.loop) == 0);
  const long leaked = atomic_load(&live_blocks) - baseline;
  if (leaked != 0) fprintf(stderr, "%ld block(s) not freed\n", leaked);
  CHECK(leaked == 0);
  CHECK(connect_to(AF_INET, port) < 0); /* nobody listens any more */

  const int f = atomic_load(&failures);
  if (f != 0) {
    fprintf(stderr, "http_test: %d failure(s)\n", f);
    return 1;
  }
  printf("http_test: ok\n");
  return 0;
}
