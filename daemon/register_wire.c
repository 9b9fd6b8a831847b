/* Splitting a RegisterWeightRequest's weight.data from the rest of it. See register_wire.h.
 *
 * The message (proto/gemmd/v1/gemm.proto): 1 name, 2 weight (a Matrix: 1 rows, 2 cols,
 * 3 dtype, 4 data, 5 scale_layout, 6 scales). Every field but weight.data is re-encoded
 * into the rest as it came; each weight sub-message is re-encoded without its data, under
 * a length prefix of its new size. */
#include "daemon/register_wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
  WT_VARINT = 0,
  WT_FIXED64 = 1,
  WT_LEN = 2,
  WT_FIXED32 = 5,
  KEY_WEIGHT = 2 << 3 | WT_LEN, /* RegisterWeightRequest.weight */
  KEY_DATA = 4 << 3 | WT_LEN,   /* Matrix.data */
  MAX_FIELD = (1 << 29) - 1,
};

/* A read position in the pieces, bounded by `end` (an offset into the whole sequence). */
typedef struct {
  const gemmd_piece_t *pieces;
  size_t n, idx, off; /* the current piece, and the offset inside it */
  size_t pos, end;
} cursor_t;

/* Moves `len` bytes on, copying them to out unless it is NULL. 0, or -1 past the end. */
static int advance(cursor_t *c, size_t len, uint8_t *out) {
  if (len > c->end - c->pos) return -1;
  while (len > 0) {
    while (c->idx < c->n && c->off == c->pieces[c->idx].n) {
      c->idx++;
      c->off = 0;
    }
    if (c->idx == c->n) return -1;
    const size_t room = c->pieces[c->idx].n - c->off, take = room < len ? room : len;
    if (out != NULL) {
      memcpy(out, c->pieces[c->idx].p + c->off, take);
      out += take;
    }
    c->off += take;
    c->pos += take;
    len -= take;
  }
  return 0;
}

static int read_varint(cursor_t *c, uint64_t *v) {
  *v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    uint8_t b;
    if (advance(c, 1, &b)) return -1;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return 0;
  }
  return -1; /* more than 10 bytes */
}

/* A field's key: its number must be 1 to 2^29 - 1. */
static int read_key(cursor_t *c, uint64_t *key) {
  if (read_varint(c, key)) return -1;
  const uint64_t field = *key >> 3;
  return field == 0 || field > MAX_FIELD ? -1 : 0;
}

/* A length-delimited field's length, which must fit in what is left of its message. */
static int read_len(cursor_t *c, uint64_t *len) {
  if (read_varint(c, len)) return -1;
  return *len > c->end - c->pos ? -1 : 0;
}

/* What is written: a buffer that grows. */
typedef struct {
  uint8_t *p;
  size_t len, cap;
} out_t;

/* Room for n more bytes at o->p + o->len, which the caller fills; NULL out of memory. */
static uint8_t *reserve(out_t *o, size_t n) {
  if (n > o->cap - o->len) {
    size_t cap = o->cap ? o->cap : 256;
    while (cap - o->len < n) cap *= 2;
    uint8_t *p = realloc(o->p, cap);
    if (p == NULL) return NULL;
    o->p = p;
    o->cap = cap;
  }
  uint8_t *at = o->p + o->len;
  o->len += n;
  return at;
}

static int put_varint(out_t *o, uint64_t v) {
  uint8_t b[10];
  size_t n = 0;
  do {
    b[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v != 0);
  uint8_t *at = reserve(o, n);
  if (at == NULL) return -2;
  memcpy(at, b, n);
  return 0;
}

/* Copies the value of a field whose key was read, the key first. 0, -1 bad wire format,
 * -2 out of memory. */
static int copy_field(cursor_t *c, uint64_t key, out_t *o) {
  if (put_varint(o, key)) return -2;
  uint64_t v;
  uint8_t *at;
  switch (key & 7) {
    case WT_VARINT:
      if (read_varint(c, &v)) return -1;
      return put_varint(o, v);
    case WT_FIXED64:
    case WT_FIXED32: {
      const size_t n = (key & 7) == WT_FIXED64 ? 8 : 4;
      if (n > c->end - c->pos) return -1;
      if ((at = reserve(o, n)) == NULL) return -2;
      return advance(c, n, at);
    }
    case WT_LEN:
      if (read_len(c, &v)) return -1;
      if (put_varint(o, v)) return -2;
      if ((at = reserve(o, v)) == NULL) return -2;
      return advance(c, v, at);
    default: /* groups, and wire types that do not exist */
      return -1;
  }
}

/* A weight sub-message of `len` bytes at the cursor: its fields but data into sub, data's
 * place into *data. */
static int split_weight(cursor_t *c, uint64_t len, out_t *sub, gemmd_piece_range_t *data) {
  const size_t outer_end = c->end;
  c->end = c->pos + len;
  int rc = 0;
  while (rc == 0 && c->pos < c->end) {
    uint64_t key, n;
    if (read_key(c, &key)) {
      rc = -1;
    } else if (key == KEY_DATA) {
      if (read_len(c, &n)) {
        rc = -1;
      } else {
        data->at = c->pos;
        data->len = n;
        rc = advance(c, n, NULL);
      }
    } else {
      rc = copy_field(c, key, sub);
    }
  }
  c->end = outer_end;
  return rc;
}

int gemmd_register_split(const gemmd_piece_t *pieces, size_t n, uint8_t **rest, size_t *rest_len,
                         gemmd_piece_range_t *data) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += pieces[i].n;
  cursor_t c = {pieces, n, 0, 0, 0, total};
  *data = (gemmd_piece_range_t){pieces, n, 0, 0};
  out_t o = {malloc(256), 0, 256}, sub = {NULL, 0, 0}; /* never a NULL rest, even empty */
  if (o.p == NULL) return -2;
  int rc = 0;
  while (rc == 0 && c.pos < c.end) {
    uint64_t key, len;
    if (read_key(&c, &key)) {
      rc = -1;
    } else if (key != KEY_WEIGHT) {
      rc = copy_field(&c, key, &o);
    } else if (read_len(&c, &len)) {
      rc = -1;
    } else {
      sub.len = 0;
      rc = split_weight(&c, len, &sub, data);
      if (rc == 0 && (put_varint(&o, key) || put_varint(&o, sub.len))) rc = -2;
      uint8_t *at;
      if (rc == 0 && sub.len > 0) {
        if ((at = reserve(&o, sub.len)) == NULL) {
          rc = -2;
        } else {
          memcpy(at, sub.p, sub.len);
        }
      }
    }
  }
  free(sub.p);
  if (rc != 0) {
    free(o.p);
    *data = (gemmd_piece_range_t){pieces, n, 0, 0};
    return rc;
  }
  *rest = o.p;
  *rest_len = o.len;
  return 0;
}

void gemmd_piece_range_copy(const gemmd_piece_range_t *r, uint8_t *dst) {
  cursor_t c = {r->pieces, r->n_pieces, 0, 0, 0, SIZE_MAX};
  if (advance(&c, r->at, NULL) == 0) advance(&c, r->len, dst);
}
