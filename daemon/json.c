#include "daemon/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 64 };

typedef struct {
  const char *p, *end;
  char *err;
  size_t errlen;
  int failed;
} parser_t;

static void fail(parser_t *ps, const char *what) {
  if (!ps->failed) {
    snprintf(ps->err, ps->errlen, "%s at byte %zu", what, (size_t)(ps->end - ps->p));
    ps->failed = 1;
  }
}

static void skip_ws(parser_t *ps) {
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
    ps->p++;
}

static gemmd_json_value_t *new_value(gemmd_json_value_type_t t) {
  gemmd_json_value_t *v = calloc(1, sizeof *v);
  if (v) v->type = t;
  return v;
}

static int append(gemmd_json_value_t *v, char *key, gemmd_json_value_t *item, size_t *cap) {
  if (v->n == *cap) {
    const size_t c = *cap ? *cap * 2 : 8;
    gemmd_json_value_t **items = realloc(v->items, c * sizeof *items);
    if (items == NULL) return -1;
    v->items = items;
    if (v->type == GEMMD_JSON_OBJECT) {
      char **keys = realloc(v->keys, c * sizeof *keys);
      if (keys == NULL) return -1;
      v->keys = keys;
    }
    *cap = c;
  }
  if (v->type == GEMMD_JSON_OBJECT) v->keys[v->n] = key;
  v->items[v->n++] = item;
  return 0;
}

static void put_utf8(char *out, size_t *n, unsigned cp) {
  if (cp < 0x80) {
    out[(*n)++] = (char)cp;
  } else if (cp < 0x800) {
    out[(*n)++] = (char)(0xC0 | (cp >> 6));
    out[(*n)++] = (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out[(*n)++] = (char)(0xE0 | (cp >> 12));
    out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[(*n)++] = (char)(0x80 | (cp & 0x3F));
  } else {
    out[(*n)++] = (char)(0xF0 | (cp >> 18));
    out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[(*n)++] = (char)(0x80 | (cp & 0x3F));
  }
}

static int hex4(parser_t *ps, unsigned *out) {
  if (ps->end - ps->p < 4) return -1;
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    const char c = *ps->p++;
    v <<= 4;
    if (c >= '0' && c <= '9') {
      v |= (unsigned)(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v |= (unsigned)(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      v |= (unsigned)(c - 'A' + 10);
    } else {
      return -1;
    }
  }
  *out = v;
  return 0;
}

/* After the opening quote. */
static char *parse_string(parser_t *ps) {
  const char *start = ps->p;
  size_t cap = 0;
  while (ps->p < ps->end && *ps->p != '"') {
    if (*ps->p == '\\') ps->p++;
    ps->p++;
    cap++;
  }
  if (ps->p >= ps->end) {
    fail(ps, "unterminated string");
    return NULL;
  }
  ps->p = start;
  char *out = malloc(cap * 4 + 1);
  if (out == NULL) {
    fail(ps, "out of memory");
    return NULL;
  }
  size_t n = 0;
  while (*ps->p != '"') {
    const char c = *ps->p++;
    if ((unsigned char)c < 0x20) {
      free(out);
      fail(ps, "control character in string");
      return NULL;
    }
    if (c != '\\') {
      out[n++] = c;
      continue;
    }
    const char e = *ps->p++;
    unsigned cp;
    switch (e) {
      case '"':
      case '\\':
      case '/':
        out[n++] = e;
        break;
      case 'b':
        out[n++] = '\b';
        break;
      case 'f':
        out[n++] = '\f';
        break;
      case 'n':
        out[n++] = '\n';
        break;
      case 'r':
        out[n++] = '\r';
        break;
      case 't':
        out[n++] = '\t';
        break;
      case 'u':
        if (hex4(ps, &cp) != 0) {
          free(out);
          fail(ps, "bad \\u escape");
          return NULL;
        }
        if (cp >= 0xD800 && cp < 0xDC00 && ps->end - ps->p >= 6 && ps->p[0] == '\\' &&
            ps->p[1] == 'u') {
          /* A low surrogate completes the pair; anything else is read again as an escape
           * of its own (hex4 may have passed the string's closing quote). */
          const char *next = ps->p;
          unsigned lo;
          ps->p += 2;
          if (hex4(ps, &lo) == 0 && lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else {
            ps->p = next;
          }
        }
        put_utf8(out, &n, cp);
        break;
      default:
        free(out);
        fail(ps, "bad escape");
        return NULL;
    }
  }
  ps->p++;
  out[n] = '\0';
  return out;
}

static gemmd_json_value_t *parse_value(parser_t *ps, int depth);

static gemmd_json_value_t *parse_container(parser_t *ps, int depth, int object) {
  gemmd_json_value_t *v = new_value(object ? GEMMD_JSON_OBJECT : GEMMD_JSON_ARRAY);
  if (v == NULL) {
    fail(ps, "out of memory");
    return NULL;
  }
  size_t cap = 0;
  const char close = object ? '}' : ']';
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == close) {
    ps->p++;
    return v;
  }
  for (;;) {
    char *key = NULL;
    if (object) {
      skip_ws(ps);
      if (ps->p >= ps->end || *ps->p != '"') {
        fail(ps, "expected a key");
        break;
      }
      ps->p++;
      key = parse_string(ps);
      if (key == NULL) break;
      skip_ws(ps);
      if (ps->p >= ps->end || *ps->p != ':') {
        free(key);
        fail(ps, "expected ':'");
        break;
      }
      ps->p++;
    }
    gemmd_json_value_t *item = parse_value(ps, depth + 1);
    if (item == NULL || append(v, key, item, &cap) != 0) {
      free(key);
      gemmd_json_free(item);
      fail(ps, "out of memory");
      break;
    }
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ',') {
      ps->p++;
      continue;
    }
    if (ps->p < ps->end && *ps->p == close) {
      ps->p++;
      return v;
    }
    fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
    break;
  }
  gemmd_json_free(v);
  return NULL;
}

static gemmd_json_value_t *parse_number(parser_t *ps) {
  char buf[64];
  size_t n = 0;
  while (ps->p < ps->end && n + 1 < sizeof buf && strchr("+-0123456789.eE", *ps->p) != NULL) {
    buf[n++] = *ps->p++;
  }
  buf[n] = '\0';
  char *end;
  const double d = strtod(buf, &end);
  if (n == 0 || *end != '\0') {
    fail(ps, "bad number");
    return NULL;
  }
  gemmd_json_value_t *v = new_value(GEMMD_JSON_NUMBER);
  if (v == NULL) return NULL;
  v->number = d;
  if (strpbrk(buf, ".eE") == NULL) {
    v->integer = strtoll(buf, NULL, 10);
    v->is_integer = 1;
  } else if (d == floor(d) && fabs(d) < 9.0e15) {
    v->integer = (int64_t)d;
    v->is_integer = 1;
  }
  return v;
}

static gemmd_json_value_t *parse_value(parser_t *ps, int depth) {
  if (depth > MAX_DEPTH) {
    fail(ps, "nested too deep");
    return NULL;
  }
  skip_ws(ps);
  if (ps->p >= ps->end) {
    fail(ps, "unexpected end");
    return NULL;
  }
  const char c = *ps->p;
  if (c == '{' || c == '[') {
    ps->p++;
    return parse_container(ps, depth, c == '{');
  }
  if (c == '"') {
    ps->p++;
    char *s = parse_string(ps);
    if (s == NULL) return NULL;
    gemmd_json_value_t *v = new_value(GEMMD_JSON_STRING);
    if (v == NULL) {
      free(s);
      return NULL;
    }
    v->string = s;
    return v;
  }
  static const struct {
    const char *word;
    gemmd_json_value_type_t type;
    int boolean;
  } words[] = {{"true", GEMMD_JSON_BOOL, 1}, {"false", GEMMD_JSON_BOOL, 0}, {"null", GEMMD_JSON_NULL, 0}};
  for (size_t i = 0; i < 3; i++) {
    const size_t wl = strlen(words[i].word);
    if ((size_t)(ps->end - ps->p) >= wl && memcmp(ps->p, words[i].word, wl) == 0) {
      ps->p += wl;
      gemmd_json_value_t *v = new_value(words[i].type);
      if (v) v->boolean = words[i].boolean;
      return v;
    }
  }
  if (c == '-' || (c >= '0' && c <= '9')) return parse_number(ps);
  fail(ps, "unexpected character");
  return NULL;
}

gemmd_json_value_t *gemmd_json_parse(const char *text, size_t len, char *err, size_t errlen) {
  parser_t ps = {text, text + len, err, errlen, 0};
  gemmd_json_value_t *v = parse_value(&ps, 0);
  if (v != NULL) {
    skip_ws(&ps);
    if (ps.p != ps.end) {
      /* safetensors pads headers with spaces; anything else is trailing garbage */
      fail(&ps, "trailing characters");
      gemmd_json_free(v);
      return NULL;
    }
  }
  return ps.failed ? (gemmd_json_free(v), NULL) : v;
}

void gemmd_json_free(gemmd_json_value_t *v) {
  if (v == NULL) return;
  for (size_t i = 0; i < v->n; i++) {
    if (v->keys) free(v->keys[i]);
    gemmd_json_free(v->items[i]);
  }
  free(v->keys);
  free(v->items);
  free(v->string);
  free(v);
}

const gemmd_json_value_t *gemmd_json_get(const gemmd_json_value_t *obj, const char *key) {
  if (obj == NULL || obj->type != GEMMD_JSON_OBJECT) return NULL;
  for (size_t i = 0; i < obj->n; i++) {
    if (strcmp(obj->keys[i], key) == 0) return obj->items[i];
  }
  return NULL;
}
