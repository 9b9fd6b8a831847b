/* The HELLO of a shared-memory client (docs/shm-protocol.md §1): the whole input is the
 * message as recv() returned it, checked as the handshake checks it (shm_check.h), with
 * --shm-arena-bytes at its default. An accepted HELLO must give a geometry make_arena can
 * lay out: a power-of-two ring and a data region of at least a page. */
#include <string.h>

#include "daemon/shm_check.h"
#include "daemon/status.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char msg[224];
  gemmd_shm_hello_t hello;
  int code = gemmd_shm_hello_parse(data, size, &hello, msg, sizeof msg);
  if (code != GEMMD_CODE_OK) {
    fuzz_check(code == GEMMD_CODE_INVALID_ARGUMENT);
    fuzz_check_message(msg, sizeof msg);
    return 0;
  }
  fuzz_check(size == sizeof hello && memcmp(hello.magic, GEMMD_SHM_MAGIC, 8) == 0);
  fuzz_check(hello.version == GEMMD_SHM_VERSION || hello.version == GEMMD_SHM_VERSION_2);
  fuzz_check(hello.flags == 0 && hello.reserved == 0);
  uint64_t bytes = 0;
  uint32_t entries = 0;
  code = gemmd_shm_hello_geometry(&hello, 256ull << 20, &bytes, &entries, msg, sizeof msg);
  if (code != GEMMD_CODE_OK) {
    fuzz_check(code == GEMMD_CODE_INVALID_ARGUMENT);
    fuzz_check_message(msg, sizeof msg);
    return 0;
  }
  fuzz_check(entries >= GEMMD_SHM_MIN_ENTRIES && entries <= GEMMD_SHM_MAX_ENTRIES);
  fuzz_check((entries & (entries - 1)) == 0);
  fuzz_check(bytes % 4096 == 0 && bytes <= (1ull << 36));
  /* make_arena's layout: header, SQ, CQ, data. */
  const uint64_t data_offset = GEMMD_SHM_HEADER_BYTES + 2ull * entries * GEMMD_SHM_ENTRY_BYTES;
  fuzz_check(data_offset < bytes && bytes - data_offset >= 4096);
  return 0;
}
