/* A RegisterWeight stream as gRPC delivers it: the input is a sequence of messages, each a
 * 2-byte little-endian length and that many bytes (the last one cut at the input's end).
 * Each is taken as rpc_weights.c takes gRPC's slices: split into its data and the rest
 * (register_wire.h), here in up to three pieces cut where its first bytes say, the rest
 * unpacked by protobuf-c (rpc_decode.h); the first names the weight and its header, every
 * one appends data and scales, the end of the input ends the stream. A message that does
 * not unpack, or is refused, ends it as the server does. The weight made, if any, is read
 * whole and freed. */
#include <stdlib.h>
#include <string.h>

#include "daemon/rpc_decode.h"
#include "daemon/status.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const gemmd_limits_t lim = {65536, 65536, 65536};
  const uint64_t budget = 32ull << 30; /* --weight-memory-bytes' default */
  gemmd_weight_upload_t up;
  memset(&up, 0, sizeof up);
  char msg[512];
  int code = GEMMD_CODE_OK;
  size_t at = 0;
  while (code == GEMMD_CODE_OK && size - at >= 2) {
    size_t len = (size_t)data[at] | (size_t)data[at + 1] << 8;
    at += 2;
    if (len > size - at) len = size - at;
    const uint8_t *p = data + at;
    at += len;
    /* Cut points from the message's first two bytes, each piece a buffer of its own so
     * that a read past a piece is seen. */
    const size_t c1 = len ? p[0] % (len + 1) : 0, c2 = len > 1 ? c1 + p[1] % (len - c1 + 1) : len;
    const size_t ends[3] = {c1, c2, len};
    gemmd_piece_t pieces[3];
    uint8_t *copies[3];
    for (size_t i = 0, from = 0; i < 3; from = ends[i++]) {
      copies[i] = malloc(ends[i] - from + 1);
      memcpy(copies[i], p + from, ends[i] - from);
      pieces[i] = (gemmd_piece_t){copies[i], ends[i] - from};
    }
    uint8_t *rest = NULL;
    size_t rest_len = 0;
    gemmd_piece_range_t range;
    Gemmd__V1__RegisterWeightRequest *m = NULL;
    if (gemmd_register_split(pieces, 3, &rest, &rest_len, &range) == 0) {
      fuzz_check(range.at + range.len <= len);
      m = gemmd__v1__register_weight_request__unpack(NULL, rest_len, rest);
      free(rest);
    }
    if (m == NULL) {
      code = GEMMD_CODE_INVALID_ARGUMENT;
    } else {
      if (!up.started) code = gemmd_weight_upload_start(&up, m, &lim, budget, NULL, NULL, msg, sizeof msg);
      if (code == GEMMD_CODE_OK) code = gemmd_weight_upload_append(&up, m, &range, msg, sizeof msg);
      gemmd__v1__register_weight_request__free_unpacked(m, NULL);
    }
    for (int i = 0; i < 3; i++) free(copies[i]);
    if (m == NULL) break;
    if (code != GEMMD_CODE_OK) fuzz_check_message(msg, sizeof msg);
  }
  if (code == GEMMD_CODE_OK) {
    fuzz_check(up.data_len <= up.data_want && up.n_scales <= up.scales_want);
    fuzz_touch(up.data, up.data_len);
    fuzz_touch(up.scales, sizeof(float) * up.n_scales);
    gemmd_weight_t *w = NULL;
    code = gemmd_weight_upload_finish(&up, NULL, &w, msg, sizeof msg);
    if (code != GEMMD_CODE_OK) {
      fuzz_check_message(msg, sizeof msg);
    } else {
      fuzz_check(w != NULL && w->name != NULL && strcmp(w->name, up.name) == 0);
      const gemmd_operand_t op = gemmd_weight_operand(w);
      fuzz_touch_operand(&op);
      gemmd_weight_free(w);
    }
  }
  gemmd_weight_upload_free(&up);
  return 0;
}
