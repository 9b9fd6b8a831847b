#include "daemon/pbjson.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char *p;
  size_t len, cap;
  int oom;
} buf_t;

static void put(buf_t *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 1024;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static void puts_(buf_t *b, const char *s) { put(b, s, strlen(s)); }

static void printf_(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void printf_(buf_t *b, const char *fmt, ...) {
  char tmp[64];
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void put_string(buf_t *b, const char *s) {
  puts_(b, "\"");
  for (; s && *s; s++) {
    const unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      const char esc[2] = {'\\', (char)c};
      put(b, esc, 2);
    } else if (c < 0x20) {
      printf_(b, "\\u%04x", c);
    } else {
      put(b, (const char *)&c, 1);
    }
  }
  puts_(b, "\"");
}

static void put_double(buf_t *b, double v) {
  if (isnan(v)) {
    puts_(b, "\"NaN\"");
  } else if (isinf(v)) {
    puts_(b, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  } else {
    printf_(b, "%.17g", v);
  }
}

static void put_bytes(buf_t *b, const ProtobufCBinaryData *d) {
  static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  puts_(b, "\"");
  for (size_t i = 0; i < d->len; i += 3) {
    const uint32_t v = (uint32_t)d->data[i] << 16 | (i + 1 < d->len ? (uint32_t)d->data[i + 1] << 8 : 0) |
                       (i + 2 < d->len ? d->data[i + 2] : 0);
    char out[4] = {tbl[v >> 18], tbl[(v >> 12) & 63], i + 1 < d->len ? tbl[(v >> 6) & 63] : '=',
                   i + 2 < d->len ? tbl[v & 63] : '='};
    put(b, out, 4);
  }
  puts_(b, "\"");
}

static void put_message(buf_t *b, const ProtobufCMessage *msg);

/* One value of field f stored at p. */
static void put_value(buf_t *b, const ProtobufCFieldDescriptor *f, const void *p) {
  switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
      printf_(b, "%" PRId32, *(const int32_t *)p);
      break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
      printf_(b, "%" PRIu32, *(const uint32_t *)p);
      break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
      printf_(b, "%" PRId64, *(const int64_t *)p);
      break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
      printf_(b, "%" PRIu64, *(const uint64_t *)p);
      break;
    case PROTOBUF_C_TYPE_FLOAT:
      put_double(b, *(const float *)p);
      break;
    case PROTOBUF_C_TYPE_DOUBLE:
      put_double(b, *(const double *)p);
      break;
    case PROTOBUF_C_TYPE_BOOL:
      puts_(b, *(const protobuf_c_boolean *)p ? "true" : "false");
      break;
    case PROTOBUF_C_TYPE_ENUM: {
      const int v = *(const int *)p;
      const ProtobufCEnumValue *ev =
          protobuf_c_enum_descriptor_get_value((const ProtobufCEnumDescriptor *)f->descriptor, v);
      if (ev != NULL) {
        put_string(b, ev->name);
      } else {
        printf_(b, "%d", v);
      }
      break;
    }
    case PROTOBUF_C_TYPE_STRING:
      put_string(b, *(char *const *)p);
      break;
    case PROTOBUF_C_TYPE_BYTES:
      put_bytes(b, (const ProtobufCBinaryData *)p);
      break;
    case PROTOBUF_C_TYPE_MESSAGE: {
      const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
      if (sub == NULL) {
        puts_(b, "null");
      } else {
        put_message(b, sub);
      }
      break;
    }
  }
}

static size_t value_size(const ProtobufCFieldDescriptor *f) {
  switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_ENUM:
      return 4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
      return 8;
    case PROTOBUF_C_TYPE_BOOL:
      return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
      return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
      return sizeof(ProtobufCBinaryData);
  }
  return 0;
}

static void put_message(buf_t *b, const ProtobufCMessage *msg) {
  const ProtobufCMessageDescriptor *d = msg->descriptor;
  const char *base = (const char *)msg;
  int first = 1;
  puts_(b, "{");
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
      const uint32_t which = *(const uint32_t *)(base + f->quantifier_offset);
      if (which != f->id) continue;
    }
    if (!first) puts_(b, ",");
    first = 0;
    put_string(b, f->name);
    puts_(b, ":");
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      const size_t n = *(const size_t *)(base + f->quantifier_offset);
      const char *arr = *(const char *const *)(base + f->offset);
      puts_(b, "[");
      for (size_t j = 0; j < n; j++) {
        if (j) puts_(b, ",");
        put_value(b, f, arr + j * value_size(f));
      }
      puts_(b, "]");
    } else {
      put_value(b, f, base + f->offset);
    }
  }
  puts_(b, "}");
}

char *gemmd_pbjson(const ProtobufCMessage *msg) {
  buf_t b = {0};
  put_message(&b, msg);
  puts_(&b, "\n");
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  return b.p;
}
