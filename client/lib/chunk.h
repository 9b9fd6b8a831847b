/* Internal: how a weight upload is cut into RegisterWeight messages, and reading a byte
 * range of an operand's dense (row-major, ld = cols) image from a strided operand. */
#ifndef GEMMD_CLIENT_LIB_CHUNK_H_
#define GEMMD_CLIENT_LIB_CHUNK_H_

#include <stddef.h>
#include <stdint.h>

#include "kernels/operand.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Payload per RegisterWeight message (data bytes + 4 per scale). */
#define GEMMD_CLIENT_CHUNK_BYTES ((size_t)1 << 20)

/* One message's share: data bytes [data_off, data_off + data_len) and scales
 * [scale_off, scale_off + scale_count), both in the dense images. */
typedef struct gemmd_chunk_s {
  uint64_t data_off;
  size_t data_len;
  uint64_t scale_off;
  size_t scale_count;
} gemmd_chunk_t;

typedef struct gemmd_chunker_s {
  uint64_t data_total, scales_total;
  uint64_t data_done, scales_done;
  size_t max_bytes;
  int emitted; /* messages handed out so far */
} gemmd_chunker_t;

/* max_bytes >= 4 (values below are raised to 4). */
void gemmd_chunker_init(gemmd_chunker_t *ch, uint64_t data_bytes, uint64_t scale_count,
                        size_t max_bytes);

/* Fills *out with the next message and returns 1, or returns 0 when all is sent. Data
 * comes first, then scales fill what each message has left; the first call always
 * yields a message (the header travels even when there is no payload). */
int gemmd_chunker_next(gemmd_chunker_t *ch, gemmd_chunk_t *out);

/* Bytes in op's dense image: rows * cols * dtype size. */
uint64_t gemmd_operand_dense_bytes(const gemmd_operand_t *op);

/* Copies bytes [off, off + len) of op's dense image to dst, honouring op->ld. */
void gemmd_operand_copy_dense(const gemmd_operand_t *op, uint64_t off, size_t len, uint8_t *dst);

/* A pointer to dense byte `off` when op is stored densely (ld == cols), else NULL. */
const uint8_t *gemmd_operand_dense_ptr(const gemmd_operand_t *op, uint64_t off);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_LIB_CHUNK_H_ */
