/* The request parsing of the HTTP endpoint (http.c), apart from its sockets, so that the
 * fuzzers (fuzz/) run it alone. Pure: it reads and writes only the buffer it is given. */
#ifndef GEMMD_DAEMON_HTTP_PARSE_H_
#define GEMMD_DAEMON_HTTP_PARSE_H_

#include <stddef.h>

/* Where the request head ends in buf[0 .. len), the bytes before `from` having been
 * searched already (it looks from three bytes before them): the length of the head up to
 * and including the first CRLF CRLF, or 0 when it has not come yet. */
size_t gemmd_http_head_end(const char *buf, size_t from, size_t len);

/* A parsed request head. */
typedef struct gemmd_http_head_s {
  int is_head;        /* HEAD, else GET */
  const char *target; /* in the head's buffer: origin-form, query and fragment cut off */
} gemmd_http_head_t;

/* Parses the head head[0 .. len) (it ends in CRLF CRLF) in place: a request line
 * (method SP target SP HTTP/d.d CRLF), then header fields, checked for form only. Returns
 * 0 for a GET or HEAD of an origin-form target (in *out, pointing into head), 405 for
 * another method, 400 for a malformed head. */
int gemmd_http_parse_head(char *head, size_t len, gemmd_http_head_t *out);

#endif /* GEMMD_DAEMON_HTTP_PARSE_H_ */
