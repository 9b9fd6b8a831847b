/* The HTTP endpoint's request parsing (http.c, http_parse.h): the input's first byte sets
 * how many bytes each read brings (1 to 256), the rest is what the client sends. The reads
 * fill a buffer of at most 16 KiB (the head limit; beyond it 431) and the head, once its
 * end is found, is parsed in a buffer of its exact size. */
#include <stdlib.h>
#include <string.h>

#include "daemon/http_parse.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/fuzz_util.h"

enum { MAX_HEAD = 16384 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + (size_t)data[0];
  const size_t total = size - 1 < MAX_HEAD ? size - 1 : MAX_HEAD;
  char *buf = malloc(total ? total : 1);
  fuzz_check(buf != NULL);
  if (total) memcpy(buf, data + 1, total);
  size_t len = 0, head_len = 0;
  while (len < total && head_len == 0) {
    const size_t from = len;
    len += chunk < total - len ? chunk : total - len;
    head_len = gemmd_http_head_end(buf, from, len);
  }
  if (head_len > 0) {
    fuzz_check(head_len >= 4 && head_len <= len && memcmp(buf + head_len - 4, "\r\n\r\n", 4) == 0);
    char *head = malloc(head_len);
    fuzz_check(head != NULL);
    memcpy(head, buf, head_len);
    gemmd_http_head_t h = {0, NULL};
    const int rc = gemmd_http_parse_head(head, head_len, &h);
    fuzz_check(rc == 0 || rc == 400 || rc == 405);
    if (rc == 0) {
      fuzz_check(h.target > head && h.target < head + head_len && h.target[0] == '/');
      const size_t tl = strlen(h.target);
      fuzz_check(h.target + tl < head + head_len && strpbrk(h.target, "?#") == NULL);
      fuzz_check(memcmp(head, h.is_head ? "HEAD" : "GET", h.is_head ? 5 : 4) == 0);
    }
    free(head);
  }
  free(buf);
  return 0;
}
