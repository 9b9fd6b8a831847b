/* Weight uploads: every byte of data and every scale goes out exactly once, in order,
 * data before scales, no message over the limit, no empty message except a lone header;
 * strided operands are read back densely. */
#include "client/lib/chunk.h"

#include <string.h>

#include "client/testing/testing.h"

static size_t ceil_div(uint64_t a, uint64_t b) { return (size_t)((a + b - 1) / b); }

static void check_plan(uint64_t data, uint64_t scales, size_t max) {
  gemmd_chunker_t ch;
  gemmd_chunk_t c;
  uint64_t data_next = 0, scale_next = 0;
  size_t n = 0;
  gemmd_chunker_init(&ch, data, scales, max);
  while (gemmd_chunker_next(&ch, &c)) {
    n++;
    CHECK(n < 100000, "runaway plan for %llu/%llu/%zu", (unsigned long long)data,
          (unsigned long long)scales, max);
    CHECK(c.data_off == data_next, "data out of order: %llu vs %llu",
          (unsigned long long)c.data_off, (unsigned long long)data_next);
    CHECK(c.scale_off == scale_next, "scales out of order");
    CHECK(c.data_len + 4 * c.scale_count <= max, "message %zu over %zu bytes", n, max);
    CHECK(c.scale_count == 0 || data_next + c.data_len == data, "scales before all data");
    CHECK(n == 1 || c.data_len + c.scale_count > 0, "empty message %zu", n);
    data_next += c.data_len;
    scale_next += c.scale_count;
  }
  CHECK(n >= 1, "no message at all");
  CHECK(data_next == data && scale_next == scales, "short: %llu/%llu of %llu/%llu",
        (unsigned long long)data_next, (unsigned long long)scale_next, (unsigned long long)data,
        (unsigned long long)scales);
  /* No more messages than sending data and scales separately, each packed full. */
  const size_t bound = ceil_div(data, max) + ceil_div(scales, max / 4);
  CHECK(n <= (bound > 1 ? bound : 1), "%zu messages for %llu/%llu/%zu", n, (unsigned long long)data,
        (unsigned long long)scales, max);
  CHECK(gemmd_chunker_next(&ch, &c) == 0, "next after the end");
}

static void check_message_count(uint64_t data, uint64_t scales, size_t want) {
  gemmd_chunker_t ch;
  gemmd_chunk_t c;
  size_t n = 0;
  gemmd_chunker_init(&ch, data, scales, GEMMD_CLIENT_CHUNK_BYTES);
  while (gemmd_chunker_next(&ch, &c)) n++;
  CHECK(n == want, "%llu data, %llu scales: %zu messages, want %zu", (unsigned long long)data,
        (unsigned long long)scales, n, want);
}

static void check_plans(void) {
  static const uint64_t sizes[] = {0, 1, 3, 4, 5, 7, 64, 100, 1023, 1024, 1025, 4096, 12345};
  static const size_t maxes[] = {4, 5, 7, 8, 64, 100, 1024};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++)
      for (size_t m = 0; m < sizeof maxes / sizeof maxes[0]; m++)
        check_plan(sizes[i], sizes[j] / 4, maxes[m]);
  check_plan(3 * GEMMD_CLIENT_CHUNK_BYTES + 17, 1000, GEMMD_CLIENT_CHUNK_BYTES);
  /* Typical weights: 4096×4096 E4M3 with 32×32 block scales is 16 full messages of data,
   * then one with the scales; a small weight fits in one; a header alone is one. */
  check_message_count((uint64_t)4096 * 4096, 32 * 32, 17);
  check_message_count(128 * 256, 2, 1);
  check_message_count(0, 0, 1);
  /* Row scales of a tall weight spill into messages of their own. */
  check_message_count(GEMMD_CLIENT_CHUNK_BYTES, GEMMD_CLIENT_CHUNK_BYTES / 4 + 1, 3);
}

static void check_dense_copy(void) {
  /* 3×5 BF16 stored with ld 8: element (r, c) holds 100r + c, padding holds 0xEEEE. */
  uint16_t store[3 * 8];
  uint16_t dense[15];
  for (int i = 0; i < 24; i++) store[i] = 0xEEEE;
  for (uint16_t r = 0; r < 3; r++)
    for (uint16_t c = 0; c < 5; c++) {
      store[r * 8 + c] = (uint16_t)(100 * r + c);
      dense[r * 5 + c] = (uint16_t)(100 * r + c);
    }
  const gemmd_operand_t op = {3, 5, 8, GEMMD_DTYPE_BF16, store, GEMMD_SCALE_NONE, NULL};
  CHECK(gemmd_operand_dense_bytes(&op) == 30, "dense bytes %llu",
        (unsigned long long)gemmd_operand_dense_bytes(&op));
  CHECK(gemmd_operand_dense_ptr(&op, 0) == NULL, "strided operand has no dense pointer");
  for (size_t off = 0; off <= 30; off++) {
    for (size_t len = 0; off + len <= 30; len++) {
      uint8_t got[32];
      memset(got, 0x55, sizeof got);
      gemmd_operand_copy_dense(&op, off, len, got);
      CHECK(memcmp(got, (const uint8_t *)dense + off, len) == 0, "bytes [%zu, +%zu)", off, len);
      CHECK(got[len] == 0x55, "wrote past [%zu, +%zu)", off, len);
    }
  }
  const gemmd_operand_t flat = {3, 5, 5, GEMMD_DTYPE_BF16, dense, GEMMD_SCALE_NONE, NULL};
  CHECK(gemmd_operand_dense_ptr(&flat, 6) == (const uint8_t *)dense + 6, "dense pointer");
}

int main(void) {
  check_plans();
  check_dense_copy();
  printf("chunk_test: ok\n");
  return 0;
}
