/* Request parsing for the HTTP endpoint. See http_parse.h. */
#include "daemon/http_parse.h"

#include <string.h>

size_t gemmd_http_head_end(const char *buf, size_t from, size_t len) {
  for (size_t i = from >= 3 ? from - 3 : 0; i + 4 <= len; i++) {
    if (memcmp(buf + i, "\r\n\r\n", 4) == 0) return i + 4;
  }
  return 0;
}

/* RFC 9110 token characters. */
static int is_tchar(unsigned char ch) {
  if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))
    return 1;
  return ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

/* A request-target character: visible ASCII. */
static int is_target_char(unsigned char ch) { return ch > 0x20 && ch < 0x7f; }

int gemmd_http_parse_head(char *head, size_t len, gemmd_http_head_t *out) {
  char *p = head;
  char *const end = head + len;

  /* Request line: method SP target SP HTTP/d.d CRLF */
  char *method = p;
  while (p < end && is_tchar((unsigned char)*p)) p++;
  const size_t method_len = (size_t)(p - method);
  if (method_len == 0 || p >= end || *p != ' ') return 400;
  *p++ = '\0';
  char *target = p;
  while (p < end && is_target_char((unsigned char)*p)) p++;
  if (p == target || p >= end || *p != ' ') return 400;
  *p++ = '\0';
  if (end - p < 10 || memcmp(p, "HTTP/", 5) != 0 || p[5] < '0' || p[5] > '9' || p[6] != '.' ||
      p[7] < '0' || p[7] > '9' || p[8] != '\r' || p[9] != '\n')
    return 400;
  p += 10;

  /* Header fields: name ":" value CRLF, up to the empty line. Only checked for form. */
  while (!(p[0] == '\r' && p[1] == '\n')) {
    char *name = p;
    while (p < end && is_tchar((unsigned char)*p)) p++;
    if (p == name || p >= end || *p != ':') return 400;
    while (p < end && *p != '\r' && *p != '\n') {
      const unsigned char ch = (unsigned char)*p;
      if (ch < 0x20 && ch != '\t') return 400;
      p++;
    }
    if (end - p < 2 || p[0] != '\r' || p[1] != '\n') return 400;
    p += 2;
    if (p >= end) return 400;
  }

  const int is_get = strcmp(method, "GET") == 0;
  const int is_head = strcmp(method, "HEAD") == 0;
  if (!is_get && !is_head) return 405;
  if (target[0] != '/') return 400; /* origin-form only */
  target[strcspn(target, "?#")] = '\0';
  out->is_head = is_head;
  out->target = target;
  return 0;
}
