/* Weight upload chunking and dense copies of strided operands. */
#include "client/lib/chunk.h"

#include <string.h>

void gemmd_chunker_init(gemmd_chunker_t *ch, uint64_t data_bytes, uint64_t scale_count,
                        size_t max_bytes) {
  memset(ch, 0, sizeof *ch);
  ch->data_total = data_bytes;
  ch->scales_total = scale_count;
  ch->max_bytes = max_bytes < sizeof(float) ? sizeof(float) : max_bytes;
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

int gemmd_chunker_next(gemmd_chunker_t *ch, gemmd_chunk_t *out) {
  const int done = ch->data_done == ch->data_total && ch->scales_done == ch->scales_total;
  if (done && ch->emitted > 0) return 0;
  out->data_off = ch->data_done;
  out->data_len = (size_t)min_u64(ch->data_total - ch->data_done, ch->max_bytes);
  ch->data_done += out->data_len;
  const size_t room = (ch->max_bytes - out->data_len) / sizeof(float);
  out->scale_off = ch->scales_done;
  out->scale_count = ch->data_done == ch->data_total
                         ? (size_t)min_u64(ch->scales_total - ch->scales_done, room)
                         : 0;
  ch->scales_done += out->scale_count;
  ch->emitted++;
  return 1;
}

uint64_t gemmd_operand_dense_bytes(const gemmd_operand_t *op) {
  return (uint64_t)op->rows * op->cols * gemmd_dtype_size(op->dtype);
}

void gemmd_operand_copy_dense(const gemmd_operand_t *op, uint64_t off, size_t len, uint8_t *dst) {
  const size_t esz = gemmd_dtype_size(op->dtype);
  const uint64_t row_bytes = (uint64_t)op->cols * esz;
  const uint8_t *base = (const uint8_t *)op->data;
  while (len > 0) {
    const uint64_t r = off / row_bytes, c = off % row_bytes;
    const size_t n = (size_t)min_u64(row_bytes - c, len);
    memcpy(dst, base + r * op->ld * esz + c, n);
    dst += n;
    off += n;
    len -= n;
  }
}

const uint8_t *gemmd_operand_dense_ptr(const gemmd_operand_t *op, uint64_t off) {
  if (op->ld != op->cols) return NULL;
  return (const uint8_t *)op->data + off;
}
