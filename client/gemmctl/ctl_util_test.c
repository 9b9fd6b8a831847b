/* gemmctl's small helpers: human-readable sizes and durations at their unit boundaries,
 * and random operands (shapes, dtype encodings, scale counts and ranges, reproducibility
 * from the seed). */
#include <math.h>
#include <string.h>

#include "client/gemmctl/ctl_parse.h"
#include "client/gemmctl/ctl_random.h"
#include "client/testing/testing.h"

static void expect_bytes(uint64_t v, const char *want) {
  char b[32];
  CHECK(strcmp(ctl_format_bytes(v, b, sizeof b), want) == 0, "%llu: '%s', want '%s'",
        (unsigned long long)v, b, want);
}

static void expect_duration(uint64_t ns, const char *want) {
  char b[32];
  CHECK(strcmp(ctl_format_duration_ns(ns, b, sizeof b), want) == 0, "%llu ns: '%s', want '%s'",
        (unsigned long long)ns, b, want);
}

static void check_format(void) {
  expect_bytes(0, "0 B");
  expect_bytes(1023, "1023 B");
  expect_bytes(1024, "1.0 KiB");
  expect_bytes(1536, "1.5 KiB");
  expect_bytes(16u << 20, "16.0 MiB");
  expect_bytes(3ull << 30, "3.00 GiB");
  expect_bytes(1ull << 40, "1.00 TiB");
  expect_bytes(UINT64_MAX, "16384.00 PiB");
  const uint64_t s = 1000000000ull;
  expect_duration(0, "0 ms");
  expect_duration(950000000ull, "950 ms");
  expect_duration(42 * s + s / 10, "42.1 s");
  expect_duration(185 * s, "3m 05s");
  expect_duration((2 * 3600 + 3 * 60 + 4) * s, "2h 03m 04s");
  expect_duration((3 * 86400 + 4 * 3600 + 5 * 60 + 6) * s, "3d 04h 05m");
}

static void check_random(void) {
  ctl_rng_t r1 = {7}, r2 = {7};
  ctl_matrix_t a, b;
  CHECK(ctl_matrix_random(&a, &r1, 3, 300, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_1X128) == 0,
        "a");
  CHECK(ctl_matrix_random(&b, &r2, 3, 300, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_1X128) == 0,
        "b");
  CHECK(a.op.rows == 3 && a.op.cols == 300 && a.op.ld == 300, "shape");
  CHECK(a.op.dtype == GEMMD_DTYPE_FP8_E4M3 && a.op.scale_layout == GEMMD_SCALE_BLOCK_1X128, "kind");
  CHECK(a.op.data == a.data && a.op.scales == a.scales, "views its storage");
  CHECK(memcmp(a.data, b.data, 900) == 0 && memcmp(a.scales, b.scales, 9 * sizeof(float)) == 0,
        "same seed, same matrix");
  int distinct = 0, nonzero = 0;
  for (int i = 0; i < 900; i++) {
    const uint8_t c = ((const uint8_t *)a.data)[i];
    CHECK((c & 0x7F) != 0x7F, "E4M3 NaN at %d", i);
    distinct += i > 0 && c != ((const uint8_t *)a.data)[i - 1];
    nonzero += (c & 0x7F) != 0;
  }
  CHECK(distinct > 400 && nonzero > 800, "values look random: %d changes, %d non-zero", distinct,
        nonzero);
  for (int i = 0; i < 9; i++) {
    CHECK(a.scales[i] >= 0x1p-5f && a.scales[i] < 24.0f, "scale %d = %g", i, a.scales[i]);
  }
  ctl_matrix_free(&a);
  ctl_matrix_free(&b);
  CHECK(a.data == NULL && a.scales == NULL, "freed");

  ctl_rng_t r3 = {8};
  static const gemmd_dtype_t dtypes[] = {GEMMD_DTYPE_FP8_E5M2, GEMMD_DTYPE_BF16, GEMMD_DTYPE_FP16,
                                         GEMMD_DTYPE_FP32};
  for (int d = 0; d < 4; d++) {
    CHECK(ctl_matrix_random(&a, &r3, 5, 7, dtypes[d], GEMMD_SCALE_NONE) == 0, "dtype %d", d);
    CHECK(a.op.scales == NULL, "no scales for NONE");
    double sum_sq = 0;
    for (uint32_t r = 0; r < 5; r++)
      for (uint32_t c = 0; c < 7; c++) {
        const float v = gemmd_operand_raw(&a.op, r, c);
        CHECK(isfinite(v) && fabsf(v) < 10, "dtype %d value %g", d, v);
        sum_sq += (double)v * v;
      }
    CHECK(sum_sq > 3 && sum_sq < 140, "dtype %d: sum of squares %g of 35 normals", d, sum_sq);
    ctl_matrix_free(&a);
  }
}

int main(void) {
  check_format();
  check_random();
  printf("ctl_util_test: ok\n");
  return 0;
}
