/* A RegisterWeight stream as gRPC delivers it: the input is a sequence of messages, each a
 * 2-byte little-endian length and that many bytes (the last one cut at the input's end),
 * unpacked by protobuf-c and taken as rpc_weights.c takes them (rpc_decode.h): the first
 * names the weight and its header, every one appends data and scales, the end of the
 * input ends the stream. A message that does not unpack, or is refused, ends it as the
 * server does. The weight made, if any, is read whole and freed. */
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
    Gemmd__V1__RegisterWeightRequest *m = gemmd__v1__register_weight_request__unpack(NULL, len, data + at);
    at += len;
    if (m == NULL) {
      code = GEMMD_CODE_INVALID_ARGUMENT;
      break;
    }
    if (!up.started) code = gemmd_weight_upload_start(&up, m, &lim, budget, NULL, NULL, msg, sizeof msg);
    if (code == GEMMD_CODE_OK) code = gemmd_weight_upload_append(&up, m, msg, sizeof msg);
    gemmd__v1__register_weight_request__free_unpacked(m, NULL);
    if (code != GEMMD_CODE_OK) fuzz_check_message(msg, sizeof msg);
  }
  if (code == GEMMD_CODE_OK) {
    fuzz_check(up.data_len <= up.data_want && up.n_scales <= up.scales_want);
    fuzz_touch(up.data, up.data_len);
    fuzz_touch(up.scales, sizeof(float) * up.n_scales);
    gemmd_weight_t *w = NULL;
    code = gemmd_weight_upload_finish(&up, &w, msg, sizeof msg);
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
