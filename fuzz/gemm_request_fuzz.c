/* A GemmRequest as gRPC delivers it (Gemm and GemmStream): the input is the message's
 * bytes, unpacked by protobuf-c and decoded as the completion-queue threads decode it
 * (rpc_decode.h: validation, B's reference, operand preparation), with the default limits.
 * The engine quantizes A itself when the request id is odd. What the request then holds
 * (A normalized, its scales, an inline B made a weight) is read whole. */
#include "daemon/request.h"
#include "daemon/rpc_decode.h"
#include "daemon/status.h"
#include "fuzz/fuzz_request.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Gemmd__V1__GemmRequest *m = gemmd__v1__gemm_request__unpack(NULL, size, data);
  if (m == NULL) return 0;
  const gemmd_limits_t lim = {65536, 65536, 65536};
  gemmd_request_t r;
  gemmd_request_init(&r);
  char msg[512];
  const int code = gemmd_rpc_decode_gemm(m, &lim, (int)(m->request_id & 1), &r, msg, sizeof msg);
  if (code != GEMMD_CODE_OK) {
    fuzz_check_message(msg, sizeof msg);
  } else {
    fuzz_touch_request(&r);
  }
  gemmd_request_release(&r);
  gemmd__v1__gemm_request__free_unpacked(m, NULL);
  return 0;
}
