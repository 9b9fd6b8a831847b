/* A small HTTP/1.1 server on libuv for /metrics, /healthz, /readyz and /stats.
 *
 * GET and HEAD only (others: 405); one request per connection (the response says
 * "Connection: close"); request heads over 16 KiB get 431; clients that send nothing
 * for 10 s are closed. Runs entirely on the loop thread that starts it. */
#ifndef GEMMD_DAEMON_HTTP_H_
#define GEMMD_DAEMON_HTTP_H_

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct gemmd_http_s gemmd_http_t;

typedef struct gemmd_http_response_s {
  int status;               /* 200, 404, 503, ... */
  const char *content_type; /* static string */
  char *body;               /* malloc'd, freed by the server; may be NULL */
  size_t body_len;
} gemmd_http_response_t;

/* Called on the loop thread for each GET/HEAD with the path (query string removed).
 * Fill resp; returning without setting status gives 404. */
typedef void (*gemmd_http_handler_fn)(void *ctx, const char *path, gemmd_http_response_t *resp);

/* Listens on "HOST:PORT" (IPv4 or [IPv6]; port 0 picks one). On success *out is the
 * server and *port the bound port. Returns 0 or GEMMD_EINVAL / GEMMD_EIO with err set. */
int gemmd_http_start(uv_loop_t *loop, const char *listen, gemmd_http_handler_fn handler,
                     void *ctx, gemmd_http_t **out, int *port, char *err, size_t errlen);

/* Bounds: connections at once (more are accepted and closed at once), and how long a
 * connection may take to send its whole request head (its bytes may not trickle in for
 * ever). Defaults 256 and 10 s. */
void gemmd_http_set_limits(gemmd_http_t *http, unsigned max_conns, uint64_t head_timeout_ms);

/* Stops listening, closes every connection, and frees the server once libuv is done
 * with its handles (the loop must run on for that). */
void gemmd_http_stop(gemmd_http_t *http);

#endif /* GEMMD_DAEMON_HTTP_H_ */
