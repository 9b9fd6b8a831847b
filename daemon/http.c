#include "daemon/http.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/http_parse.h"
#include "kernels/errors.h"

#define HTTP_MAX_HEAD 16384      /* request heads longer than this get 431 */
#define HTTP_FIRST_BUF 1024      /* initial read buffer; doubles up to HTTP_MAX_HEAD */
#define HTTP_IDLE_MS 10000       /* default: a request head must be in this long after connecting */
#define HTTP_MAX_CONNS 256       /* default: connections at once; more are closed on accept */
#define HTTP_LINGER_MS 2000      /* after the response: how long to drain before closing */
#define HTTP_BACKLOG 128

typedef enum {
  CONN_READING, /* collecting the request head */
  CONN_WRITING, /* response queued; further input is discarded */
  CONN_LINGER,  /* response sent, write side shut down; draining input until EOF */
} conn_state_t;

typedef struct conn_s conn_t;

/* One accepted connection. Owns two handles (tcp, timer); freed when both have closed. */
struct conn_s {
  uv_tcp_t tcp;
  uv_timer_t timer;
  uv_write_t write_req;
  uv_shutdown_t shutdown_req;
  gemmd_http_t *http;
  conn_t *prev, *next;    /* in http->conns while not yet freed */
  conn_state_t state;
  int closing;            /* uv_close called on both handles */
  int open_handles;       /* handles not yet through their close callback */
  int peer_eof;           /* the client shut down its side */
  char *buf;              /* the request head so far (READING) or scratch (later) */
  size_t len, cap;
  char *out_head;         /* status line and headers */
  char *out_body;         /* the handler's body; not sent for HEAD */
};

struct gemmd_http_s {
  uv_loop_t *loop;
  uv_tcp_t server;
  gemmd_http_handler_fn handler;
  void *ctx;
  conn_t *conns;          /* every connection not yet freed */
  unsigned n_conns, max_conns;
  uint64_t head_timeout_ms;
  int stopping;
  int server_closed;      /* the listener's close callback has run */
};

/* ---- Teardown ------------------------------------------------------------------------ */

static void http_maybe_free(gemmd_http_t *http) {
  if (http->stopping && http->server_closed && http->conns == NULL) free(http);
}

static void conn_on_handle_closed(uv_handle_t *h) {
  conn_t *c = h->data;
  if (--c->open_handles > 0) return;
  gemmd_http_t *http = c->http;
  if (c->prev != NULL) {
    c->prev->next = c->next;
  } else {
    http->conns = c->next;
  }
  if (c->next != NULL) c->next->prev = c->prev;
  http->n_conns--;
  free(c->buf);
  free(c->out_head);
  free(c->out_body);
  free(c);
  http_maybe_free(http);
}

/* Idempotent; pending write and shutdown requests complete with UV_ECANCELED before the
 * close callbacks run, and the connection stays allocated until both handles close. */
static void conn_close(conn_t *c) {
  if (c->closing) return;
  c->closing = 1;
  uv_close((uv_handle_t *)&c->tcp, conn_on_handle_closed);
  uv_close((uv_handle_t *)&c->timer, conn_on_handle_closed);
}

static void conn_on_timeout(uv_timer_t *t) { conn_close(t->data); }

/* ---- Responses ----------------------------------------------------------------------- */

static const char *reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: break;
  }
  if (status >= 200 && status < 300) return "OK";
  if (status >= 300 && status < 400) return "Redirect";
  if (status >= 400 && status < 500) return "Client Error";
  return "Server Error";
}

static void conn_on_shutdown(uv_shutdown_t *req, int status) {
  conn_t *c = req->data;
  if (status < 0 && !c->closing) conn_close(c);
}

static void conn_on_write(uv_write_t *req, int status) {
  conn_t *c = req->data;
  if (c->closing) return; /* cancelled by a close */
  if (status < 0 || c->peer_eof) {
    conn_close(c);
    return;
  }
  /* Lingering close: send FIN, then read until the client closes too, so that input we
   * never read (an oversized head, a body) cannot turn our close into a reset that
   * destroys the response before the client reads it. */
  c->state = CONN_LINGER;
  c->shutdown_req.data = c;
  if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, conn_on_shutdown) != 0) {
    conn_close(c);
    return;
  }
  uv_timer_start(&c->timer, conn_on_timeout, HTTP_LINGER_MS, 0);
}

/* Queues the response (headers always, the body unless head_only) and takes ownership of
 * body. Reading goes on, discarding, so that the client's EOF or reset is noticed. */
static void conn_respond(conn_t *c, int status, const char *content_type, const char *extra,
                         char *body, size_t body_len, int head_only) {
  c->state = CONN_WRITING;
  c->out_body = body;
  if (content_type == NULL) content_type = "text/plain; charset=utf-8";
  if (extra == NULL) extra = "";
  const char *fmt =
      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n";
  const char *reason = reason_phrase(status);
  const int n = snprintf(NULL, 0, fmt, status, reason, content_type, body_len, extra);
  if (n < 0 || (c->out_head = malloc((size_t)n + 1)) == NULL) {
    conn_close(c);
    return;
  }
  snprintf(c->out_head, (size_t)n + 1, fmt, status, reason, content_type, body_len, extra);
  uv_buf_t bufs[2];
  unsigned nbufs = 1;
  bufs[0] = uv_buf_init(c->out_head, (unsigned)n);
  if (!head_only && body != NULL && body_len > 0) {
    bufs[1] = uv_buf_init(body, (unsigned)body_len);
    nbufs = 2;
  }
  c->write_req.data = c;
  if (uv_write(&c->write_req, (uv_stream_t *)&c->tcp, bufs, nbufs, conn_on_write) != 0) {
    conn_close(c);
    return;
  }
  /* A client that stops reading gets as long as an idle one to take the response. */
  uv_timer_start(&c->timer, conn_on_timeout, HTTP_IDLE_MS, 0);
}

/* An error response generated here; the body is a copy of a static string. */
static void conn_respond_text(conn_t *c, int status, const char *extra, const char *text,
                              int head_only) {
  const size_t n = strlen(text);
  char *body = malloc(n + 1);
  if (body == NULL) {
    conn_close(c);
    return;
  }
  memcpy(body, text, n + 1);
  conn_respond(c, status, NULL, extra, body, n, head_only);
}

/* ---- Request parsing ----------------------------------------------------------------- */

/* Answers the head c->buf[0 .. head_len) (it ends in "\r\n\r\n"). */
static void conn_handle_head(conn_t *c, size_t head_len) {
  gemmd_http_head_t head;
  const int rc = gemmd_http_parse_head(c->buf, head_len, &head);
  if (rc == 405) {
    conn_respond_text(c, 405, "Allow: GET, HEAD\r\n", "method not allowed\n", 0);
    return;
  }
  if (rc != 0) {
    conn_respond_text(c, 400, NULL, "bad request\n", 0);
    return;
  }
  const int is_head = head.is_head;
  gemmd_http_response_t resp = {0, NULL, NULL, 0};
  c->http->handler(c->http->ctx, head.target, &resp);
  if (c->closing) { /* the handler stopped the server */
    free(resp.body);
    return;
  }
  if (resp.status == 0) {
    free(resp.body);
    conn_respond_text(c, 404, NULL, "not found\n", is_head);
    return;
  }
  if (resp.body == NULL) resp.body_len = 0;
  conn_respond(c, resp.status, resp.content_type, NULL, resp.body, resp.body_len, is_head);
}

/* ---- Reading ------------------------------------------------------------------------- */

static void conn_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *out) {
  conn_t *c = h->data;
  if (c->state != CONN_READING) {
    /* Input after the head is discarded; reuse the buffer from its start. */
    *out = uv_buf_init(c->buf, (unsigned)c->cap);
    return;
  }
  if (c->len == c->cap && c->cap < HTTP_MAX_HEAD) {
    size_t cap = c->cap * 2;
    if (cap > HTTP_MAX_HEAD) cap = HTTP_MAX_HEAD;
    char *p = realloc(c->buf, cap);
    if (p != NULL) {
      c->buf = p;
      c->cap = cap;
    }
  }
  /* A zero-length buffer makes libuv report UV_ENOBUFS, which closes the connection. */
  *out = uv_buf_init(c->buf + c->len, (unsigned)(c->cap - c->len));
}

static void conn_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *unused) {
  conn_t *c = s->data;
  if (c->closing) return;
  if (nread == 0) return; /* EAGAIN */
  if (nread < 0) {
    if (nread == UV_EOF && c->state == CONN_WRITING) {
      /* Half-closed client: the response still goes out, then we close. */
      c->peer_eof = 1;
      uv_read_stop(s);
      return;
    }
    conn_close(c); /* EOF mid-request, reset, ENOBUFS, or the end of a lingering close */
    return;
  }
  if (c->state != CONN_READING) return; /* discarded */

  /* No timer restart here: the whole head must arrive within head_timeout_ms of the
   * connect, however slowly its bytes trickle in. */
  /* Search for the end of the head in the new bytes and the three before them. */
  const size_t from = c->len;
  c->len += (size_t)nread;
  const size_t head_len = gemmd_http_head_end(c->buf, from, c->len);
  if (head_len > 0) {
    conn_handle_head(c, head_len);
    return;
  }
  if (c->len >= HTTP_MAX_HEAD)
    conn_respond_text(c, 431, NULL, "request header fields too large\n", 0);
}

static void on_refused_closed(uv_handle_t *h) { free(h); }

static void http_on_connection(uv_stream_t *server, int status) {
  gemmd_http_t *http = server->data;
  if (status < 0 || http->stopping) return;
  if (http->n_conns >= http->max_conns) { /* accepted and closed: a backlog would hold it */
    uv_tcp_t *t = malloc(sizeof *t);
    if (t == NULL || uv_tcp_init(http->loop, t) != 0) {
      free(t);
      return;
    }
    if (uv_accept(server, (uv_stream_t *)t) != 0) { /* nothing to close but the handle */
    }
    uv_close((uv_handle_t *)t, on_refused_closed);
    return;
  }
  conn_t *c = calloc(1, sizeof *c);
  if (c == NULL) return; /* the pending connection stays in the backlog */
  c->http = http;
  c->buf = malloc(HTTP_FIRST_BUF);
  if (c->buf == NULL) {
    free(c);
    return;
  }
  c->cap = HTTP_FIRST_BUF;
  c->state = CONN_READING;
  c->tcp.data = c;
  c->timer.data = c;
  /* Neither init can fail for TCP on Unix with AF_UNSPEC; checked all the same. */
  if (uv_tcp_init(http->loop, &c->tcp) != 0) {
    free(c->buf);
    free(c);
    return;
  }
  c->open_handles = 1;
  http->n_conns++;
  c->next = http->conns;
  if (http->conns != NULL) http->conns->prev = c;
  http->conns = c;
  if (uv_timer_init(http->loop, &c->timer) != 0) {
    c->closing = 1;
    uv_close((uv_handle_t *)&c->tcp, conn_on_handle_closed);
    return;
  }
  c->open_handles = 2;
  if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
    conn_close(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  if (uv_read_start((uv_stream_t *)&c->tcp, conn_on_alloc, conn_on_read) != 0) {
    conn_close(c);
    return;
  }
  uv_timer_start(&c->timer, conn_on_timeout, http->head_timeout_ms, 0);
}

void gemmd_http_set_limits(gemmd_http_t *http, unsigned max_conns, uint64_t head_timeout_ms) {
  http->max_conns = max_conns;
  http->head_timeout_ms = head_timeout_ms;
}

/* ---- Lifecycle ----------------------------------------------------------------------- */

__attribute__((format(printf, 3, 4))) static void set_err(char *err, size_t errlen,
                                                          const char *fmt, ...) {
  if (err == NULL || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* "HOST:PORT", "[V6]:PORT"; an empty HOST is 0.0.0.0 and "localhost" 127.0.0.1. */
static int parse_listen(const char *listen, struct sockaddr_storage *addr) {
  char host[64];
  const char *colon;
  int v6 = 0;
  if (listen[0] == '[') {
    const char *rb = strchr(listen, ']');
    if (rb == NULL || rb[1] != ':') return -1;
    const size_t n = (size_t)(rb - listen - 1);
    if (n == 0 || n >= sizeof host) return -1;
    memcpy(host, listen + 1, n);
    host[n] = '\0';
    colon = rb + 1;
    v6 = 1;
  } else {
    colon = strrchr(listen, ':');
    if (colon == NULL) return -1;
    const size_t n = (size_t)(colon - listen);
    if (n >= sizeof host) return -1;
    memcpy(host, listen, n);
    host[n] = '\0';
    if (n == 0) snprintf(host, sizeof host, "0.0.0.0");
    if (strcmp(host, "localhost") == 0) snprintf(host, sizeof host, "127.0.0.1");
  }
  const char *ps = colon + 1;
  if (*ps == '\0' || strlen(ps) > 5) return -1;
  long port = 0;
  for (; *ps != '\0'; ps++) {
    if (*ps < '0' || *ps > '9') return -1;
    port = port * 10 + (*ps - '0');
  }
  if (port > 65535) return -1;
  memset(addr, 0, sizeof *addr);
  if (v6) return uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)addr) == 0 ? 0 : -1;
  return uv_ip4_addr(host, (int)port, (struct sockaddr_in *)addr) == 0 ? 0 : -1;
}

static void http_on_server_closed(uv_handle_t *h) {
  gemmd_http_t *http = h->data;
  http->server_closed = 1;
  http_maybe_free(http);
}

int gemmd_http_start(uv_loop_t *loop, const char *listen, gemmd_http_handler_fn handler,
                     void *ctx, gemmd_http_t **out, int *port, char *err, size_t errlen) {
  if (loop == NULL || listen == NULL || handler == NULL || out == NULL) {
    set_err(err, errlen, "http: missing argument");
    return GEMMD_EINVAL;
  }
  *out = NULL;
  struct sockaddr_storage addr;
  if (parse_listen(listen, &addr) != 0) {
    set_err(err, errlen, "http: bad listen address \"%s\" (want HOST:PORT or [V6]:PORT)",
            listen);
    return GEMMD_EINVAL;
  }
  gemmd_http_t *http = calloc(1, sizeof *http);
  if (http == NULL) {
    set_err(err, errlen, "http: out of memory");
    return GEMMD_ENOMEM;
  }
  http->loop = loop;
  http->handler = handler;
  http->max_conns = HTTP_MAX_CONNS;
  http->head_timeout_ms = HTTP_IDLE_MS;
  http->ctx = ctx;
  http->server.data = http;
  int rc = uv_tcp_init(loop, &http->server);
  if (rc != 0) {
    free(http);
    set_err(err, errlen, "http: tcp init: %s", uv_strerror(rc));
    return GEMMD_EIO;
  }
  const char *what = "bind";
  rc = uv_tcp_bind(&http->server, (const struct sockaddr *)&addr, 0);
  if (rc == 0) {
    what = "listen";
    rc = uv_listen((uv_stream_t *)&http->server, HTTP_BACKLOG, http_on_connection);
  }
  if (rc == 0) {
    what = "getsockname";
    struct sockaddr_storage bound;
    int namelen = (int)sizeof bound;
    rc = uv_tcp_getsockname(&http->server, (struct sockaddr *)&bound, &namelen);
    if (rc == 0 && port != NULL) {
      *port = bound.ss_family == AF_INET6
                  ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                  : ntohs(((struct sockaddr_in *)&bound)->sin_port);
    }
  }
  if (rc != 0) {
    set_err(err, errlen, "http: %s %s: %s", what, listen, uv_strerror(rc));
    /* The handle is registered with the loop: it is freed by the close callback, once
     * the loop runs. */
    http->stopping = 1;
    uv_close((uv_handle_t *)&http->server, http_on_server_closed);
    return GEMMD_EIO;
  }
  *out = http;
  return GEMMD_OK;
}

void gemmd_http_stop(gemmd_http_t *http) {
  if (http == NULL || http->stopping) return;
  http->stopping = 1;
  uv_close((uv_handle_t *)&http->server, http_on_server_closed);
  for (conn_t *c = http->conns; c != NULL; c = c->next) conn_close(c);
}
