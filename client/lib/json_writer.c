/* Compact JSON writer. */
#include "client/lib/json_writer.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gemmd_json_init(gemmd_json_writer_t *j) { memset(j, 0, sizeof *j); }

static void append(gemmd_json_writer_t *j, const char *s, size_t n) {
  if (j->failed) return;
  if (j->len + n + 1 > j->cap) {
    size_t cap = j->cap ? j->cap : 256;
    while (cap < j->len + n + 1) cap *= 2;
    char *b = realloc(j->buf, cap);
    if (b == NULL) {
      j->failed = 1;
      return;
    }
    j->buf = b;
    j->cap = cap;
  }
  memcpy(j->buf + j->len, s, n);
  j->len += n;
  j->buf[j->len] = '\0';
}

static void append_str(gemmd_json_writer_t *j, const char *s) { append(j, s, strlen(s)); }

/* The separator before a value (or a key) at the current level. */
static void before_value(gemmd_json_writer_t *j) {
  if (j->after_key) {
    j->after_key = 0;
    return;
  }
  if (j->depth > 0 && j->count[j->depth - 1]++ > 0) append(j, ",", 1);
}

static void open_level(gemmd_json_writer_t *j, const char *bracket) {
  before_value(j);
  append_str(j, bracket);
  if (j->depth >= GEMMD_JSON_MAX_DEPTH) {
    j->failed = 1;
    return;
  }
  j->count[j->depth++] = 0;
}

static void close_level(gemmd_json_writer_t *j, const char *bracket) {
  if (j->depth == 0) {
    j->failed = 1;
    return;
  }
  j->depth--;
  append_str(j, bracket);
}

void gemmd_json_begin_object(gemmd_json_writer_t *j) { open_level(j, "{"); }
void gemmd_json_end_object(gemmd_json_writer_t *j) { close_level(j, "}"); }
void gemmd_json_begin_array(gemmd_json_writer_t *j) { open_level(j, "["); }
void gemmd_json_end_array(gemmd_json_writer_t *j) { close_level(j, "]"); }

static void quoted(gemmd_json_writer_t *j, const char *s) {
  append(j, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char esc[8];
    switch (*p) {
      case '"':
        append_str(j, "\\\"");
        break;
      case '\\':
        append_str(j, "\\\\");
        break;
      case '\n':
        append_str(j, "\\n");
        break;
      case '\r':
        append_str(j, "\\r");
        break;
      case '\t':
        append_str(j, "\\t");
        break;
      default:
        if (*p < 0x20) {
          snprintf(esc, sizeof esc, "\\u%04x", *p);
          append_str(j, esc);
        } else {
          append(j, (const char *)p, 1);
        }
    }
  }
  append(j, "\"", 1);
}

void gemmd_json_key(gemmd_json_writer_t *j, const char *key) {
  before_value(j);
  quoted(j, key);
  append(j, ":", 1);
  j->after_key = 1;
}

void gemmd_json_string(gemmd_json_writer_t *j, const char *s) {
  before_value(j);
  quoted(j, s != NULL ? s : "");
}

void gemmd_json_u64(gemmd_json_writer_t *j, uint64_t v) {
  char b[32];
  snprintf(b, sizeof b, "%" PRIu64, v);
  before_value(j);
  append_str(j, b);
}

void gemmd_json_i64(gemmd_json_writer_t *j, int64_t v) {
  char b[32];
  snprintf(b, sizeof b, "%" PRId64, v);
  before_value(j);
  append_str(j, b);
}

void gemmd_json_double(gemmd_json_writer_t *j, double v) {
  if (isnan(v)) {
    gemmd_json_string(j, "NaN");
    return;
  }
  if (isinf(v)) {
    gemmd_json_string(j, v > 0 ? "Infinity" : "-Infinity");
    return;
  }
  char b[40];
  if (v == trunc(v) && fabs(v) < 1e15) {
    snprintf(b, sizeof b, "%.0f", v); /* whole numbers as integers: 150, not 1.5e+02 */
    before_value(j);
    append_str(j, b);
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(b, sizeof b, "%.*g", prec, v);
    if (strtod(b, NULL) == v) break;
  }
  before_value(j);
  append_str(j, b);
}

void gemmd_json_bool(gemmd_json_writer_t *j, int v) {
  before_value(j);
  append_str(j, v ? "true" : "false");
}

void gemmd_json_discard(gemmd_json_writer_t *j) {
  free(j->buf);
  memset(j, 0, sizeof *j);
}

int gemmd_json_finish(gemmd_json_writer_t *j, char **out) {
  if (j->len == 0) append(j, "", 0); /* an empty document still gets a buffer */
  if (j->failed || j->depth != 0 || j->after_key || j->buf == NULL) {
    gemmd_json_discard(j);
    *out = NULL;
    return -1;
  }
  *out = j->buf;
  memset(j, 0, sizeof *j);
  return 0;
}
