/* A RegisterWeightRequest read straight from the pieces (gRPC slices) it arrived in, so
 * that weight.data, nearly all of a large message, is copied once: from the pieces into
 * the weight's own buffer. protobuf-c unpacks only the rest (name, header, scales).
 * Pure: no gRPC; the fuzzer (fuzz/register_weight_fuzz.c) drives it alone. */
#ifndef GEMMD_DAEMON_REGISTER_WIRE_H_
#define GEMMD_DAEMON_REGISTER_WIRE_H_

#include <stddef.h>
#include <stdint.h>

/* One contiguous piece of a message. */
typedef struct {
  const uint8_t *p;
  size_t n;
} gemmd_piece_t;

/* Bytes inside a message held in pieces: `len` bytes from offset `at` of the pieces taken
 * as one sequence. */
typedef struct {
  const gemmd_piece_t *pieces;
  size_t n_pieces;
  size_t at, len;
} gemmd_piece_range_t;

/* Splits the message in pieces[0..n) into *rest (malloc'd, *rest_len bytes: the message
 * with every weight.data field taken out, for protobuf-c to unpack) and *data (where the
 * weight's data bytes are; len 0 when it has none). As protobuf merges a repeated
 * singular field, the last weight.data counts. 0; -1 when the bytes are not valid
 * protobuf wire format (a truncated field, a length past its message, a group, field 0);
 * -2 out of memory. */
int gemmd_register_split(const gemmd_piece_t *pieces, size_t n, uint8_t **rest, size_t *rest_len,
                         gemmd_piece_range_t *data);

/* Copies the range's bytes to dst. */
void gemmd_piece_range_copy(const gemmd_piece_range_t *r, uint8_t *dst);

#endif /* GEMMD_DAEMON_REGISTER_WIRE_H_ */
