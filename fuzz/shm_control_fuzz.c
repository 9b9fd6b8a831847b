/* A control message of a version-2 shared-memory client (docs/shm-protocol.md §7): the whole
 * input is the message as recvmsg() returned it, its first byte saying whether the kernel
 * truncated it (bit 0), checked as on_control checks it (shm_check.h). An accepted message
 * is exactly 128 bytes with a known op, a known kind for REGION_OPEN, and reserved bytes 0. */
#include <string.h>

#include "daemon/shm_check.h"
#include "daemon/status.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  const int truncated = data[0] & 1;
  char msg[224];
  gemmd_shm_ctl_t m;
  const int code = gemmd_shm_ctl_parse(data + 1, size - 1, truncated, &m, msg, sizeof msg);
  if (code != GEMMD_CODE_OK) {
    fuzz_check(code == GEMMD_CODE_INVALID_ARGUMENT);
    fuzz_check_message(msg, sizeof msg);
    return 0;
  }
  fuzz_check(!truncated && size - 1 == sizeof m);
  fuzz_check(m.op == GEMMD_SHM_CTL_REGION_OPEN || m.op == GEMMD_SHM_CTL_REGION_CLOSE);
  fuzz_check(m.op != GEMMD_SHM_CTL_REGION_OPEN || m.kind == GEMMD_SHM_REGION_FD ||
             m.kind == GEMMD_SHM_REGION_CUDA_IPC);
  fuzz_check(m.reserved0 == 0);
  for (size_t i = 0; i < sizeof m.reserved1; i++) fuzz_check(m.reserved1[i] == 0);
  return 0;
}
