/* Quantizers: for every FP8 dtype × scale layout × source dtype, on ragged shapes with
 * values whose magnitude changes from block to block:
 *   - every scale equals amax/fp8_max of its block, computed here independently
 *     (all-zero block -> 1);
 *   - every element dequantizes within half an FP8 step of its input;
 *   - the largest element of each block lands on ±fp8_max;
 *   - NaN stays NaN, Inf is left out of amax;
 *   - bad arguments are refused.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/errors.h"
#include "kernels/fp8.h"
#include "kernels/quantize.h"
#include "kernels/testutil.h"

static float decode(gemmd_dtype_t fp8, uint8_t c) {
  return fp8 == GEMMD_DTYPE_FP8_E4M3 ? gemmd_e4m3_to_f32(c) : gemmd_e5m2_to_f32(c);
}

/* Block geometry of a layout, written out here rather than taken from the library. */
static void block_of(gemmd_scale_layout_t layout, uint32_t rows, uint32_t cols, uint32_t r,
                     uint32_t c, size_t *index, uint32_t *r0, uint32_t *r1, uint32_t *c0,
                     uint32_t *c1) {
  const uint32_t nbc = (cols + 127) / 128;
  switch (layout) {
    case GEMMD_SCALE_NONE:
    case GEMMD_SCALE_TENSOR:
      *index = 0, *r0 = 0, *r1 = rows, *c0 = 0, *c1 = cols;
      return;
    case GEMMD_SCALE_ROW:
      *index = r, *r0 = r, *r1 = r + 1, *c0 = 0, *c1 = cols;
      return;
    case GEMMD_SCALE_BLOCK_1X128:
      *index = (size_t)r * nbc + c / 128, *r0 = r, *r1 = r + 1;
      break;
    case GEMMD_SCALE_BLOCK_128X128:
      *index = (size_t)(r / 128) * nbc + c / 128, *r0 = r / 128 * 128;
      *r1 = *r0 + 128 < rows ? *r0 + 128 : rows;
      break;
  }
  *c0 = c / 128 * 128;
  *c1 = *c0 + 128 < cols ? *c0 + 128 : cols;
}

/* The value the quantizer sees: stored value × scale, an FP32 product. */
static double real_value(const test_matrix_t *m, uint32_t r, uint32_t c) {
  const float v = gemmd_operand_raw(&m->op, r, c) * gemmd_operand_scale(&m->op, r, c);
  return v;
}

static void check_case(test_rng_t *rng, gemmd_dtype_t fp8, gemmd_scale_layout_t layout,
                       gemmd_dtype_t src_dtype, uint32_t rows, uint32_t cols) {
  test_matrix_t src;
  const gemmd_scale_layout_t src_layout =
      gemmd_dtype_is_fp8(src_dtype) ? GEMMD_SCALE_TENSOR : GEMMD_SCALE_NONE;
  test_matrix_random(&src, rng, rows, cols, src_dtype, src_layout, 3.0);
  /* Magnitudes that differ by row and column block, so that scales differ. */
  if (src_dtype == GEMMD_DTYPE_FP32) {
    float *v = src.data;
    for (uint32_t r = 0; r < rows; r++) {
      for (uint32_t c = 0; c < cols; c++) {
        v[(size_t)r * cols + c] *= ldexpf(1.0f, (int)((r * 7 + c / 128 * 3) % 13) - 6);
      }
    }
    /* An all-zero first 128-block of row 0 (a whole 128x128 tile when rows, cols < 128
     * is only that block), a NaN and an Inf when there is room. */
    if (rows > 1) {
      for (uint32_t c = 0; c < (cols < 128 ? cols : 128); c++) v[c] = 0.0f;
    }
    if (rows * cols > 300) {
      v[(size_t)rows * cols - 1] = NAN;
      v[(size_t)rows * cols - 2] = INFINITY;
    }
  }

  const size_t ns = gemmd_scale_count(layout, rows, cols);
  uint8_t *q = malloc((size_t)rows * cols);
  float *scales = malloc(sizeof(float) * (ns + 1));
  TEST_CHECK(gemmd_quantize(&src.op, fp8, layout, q, scales) == GEMMD_OK, "quantize failed");

  /* Expected scales, block by block. */
  float *expect = calloc(ns + 1, sizeof(float));
  double *amax = calloc(ns + 1, sizeof(double));
  for (uint32_t r = 0; r < rows; r++) {
    for (uint32_t c = 0; c < cols; c++) {
      size_t bi;
      uint32_t r0, r1, c0, c1;
      block_of(layout, rows, cols, r, c, &bi, &r0, &r1, &c0, &c1);
      const double a = fabs(real_value(&src, r, c));
      if (isfinite(a) && a > amax[bi]) amax[bi] = a;
    }
  }
  const float fp8_max = gemmd_fp8_max(fp8);
  for (size_t i = 0; i < ns; i++) {
    const float am = (float)amax[i];
    expect[i] = am == 0.0f ? 1.0f : fmaxf(am / fp8_max, FLT_MIN);
    TEST_CHECK(memcmp(&expect[i], &scales[i], sizeof(float)) == 0,
               "%s %s from %s %ux%u: scale[%zu] = %a, expected %a (amax %a)",
               gemmd_dtype_name(fp8), gemmd_scale_layout_name(layout),
               gemmd_dtype_name(src_dtype), rows, cols, i, scales[i], expect[i], am);
  }

  /* Element bounds: half an FP8 step relative, or half the smallest subnormal. */
  const double rel = fp8 == GEMMD_DTYPE_FP8_E4M3 ? 0x1p-4 : 0x1p-3;
  const double abs_unit = fp8 == GEMMD_DTYPE_FP8_E4M3 ? 0x1p-10 : 0x1p-17;
  for (uint32_t r = 0; r < rows; r++) {
    for (uint32_t c = 0; c < cols; c++) {
      size_t bi;
      uint32_t r0, r1, c0, c1;
      block_of(layout, rows, cols, r, c, &bi, &r0, &r1, &c0, &c1);
      const double s = layout == GEMMD_SCALE_NONE ? 1.0 : scales[bi];
      const double x = real_value(&src, r, c);
      const uint8_t code = q[(size_t)r * cols + c];
      const double deq = (double)decode(fp8, code) * s;
      if (isnan(x) || (isinf(x) && fp8 == GEMMD_DTYPE_FP8_E4M3)) {
        TEST_CHECK(isnan(deq), "(%u,%u): non-finite %g gave %g", r, c, x, deq);
        continue;
      }
      if (isinf(x)) {
        TEST_CHECK(deq == x, "(%u,%u): %g gave %g", r, c, x, deq);
        continue;
      }
      if (layout == GEMMD_SCALE_NONE && fabs(x) > fp8_max) {
        TEST_CHECK(deq == copysign(fp8_max, x), "(%u,%u): %g must saturate, gave %g", r, c, x,
                   deq);
        continue;
      }
      const double bound = fmax(rel * fabs(x), abs_unit * s) * (1.0 + 1e-6);
      TEST_CHECK(fabs(deq - x) <= bound,
                 "%s %s from %s %ux%u (%u,%u): x=%.9g dequantized %.9g (code 0x%02x, scale %g), "
                 "error %g > bound %g",
                 gemmd_dtype_name(fp8), gemmd_scale_layout_name(layout),
                 gemmd_dtype_name(src_dtype), rows, cols, r, c, x, deq, code, s,
                 fabs(deq - x), bound);
      if (layout != GEMMD_SCALE_NONE && amax[bi] > 0 && fabs(x) == amax[bi]) {
        TEST_CHECK(fabs(decode(fp8, code)) == fp8_max, "(%u,%u): block max %g gave code 0x%02x",
                   r, c, x, code);
      }
    }
  }
  free(q);
  free(scales);
  free(expect);
  free(amax);
  test_matrix_free(&src);
}

static void check_bad_arguments(void) {
  float v[4] = {1, 2, 3, 4}, s[4];
  uint8_t q[4];
  gemmd_operand_t op = {2, 2, 2, GEMMD_DTYPE_FP32, v, GEMMD_SCALE_NONE, NULL};
  TEST_CHECK(gemmd_quantize(&op, GEMMD_DTYPE_BF16, GEMMD_SCALE_ROW, q, s) == GEMMD_EINVAL,
             "BF16 is not an FP8 target");
  TEST_CHECK(gemmd_quantize(&op, GEMMD_DTYPE_FP8_E4M3, (gemmd_scale_layout_t)9, q, s) ==
                 GEMMD_EINVAL,
             "unknown layout");
  TEST_CHECK(gemmd_quantize(&op, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_ROW, q, NULL) ==
                 GEMMD_EINVAL,
             "missing scales");
  TEST_CHECK(gemmd_quantize_scale(GEMMD_DTYPE_FP8_E4M3, 0.0f) == 1.0f, "zero block");
  TEST_CHECK(gemmd_quantize_scale(GEMMD_DTYPE_FP8_E4M3, 448.0f) == 1.0f, "amax 448");
  TEST_CHECK(gemmd_quantize_scale(GEMMD_DTYPE_FP8_E5M2, 57344.0f * 4) == 4.0f, "amax 4*max");
}

/* gemmd_decode_row's FP8 decoding (vector where the CPU has F16C, a table otherwise)
 * equals the scalar decoders bit for bit, NaN codes included, at every start offset and
 * length around the vector width. */
static void check_decode_row(void) {
  uint8_t codes[256 + 24];
  for (int i = 0; i < 256 + 24; i++) codes[i] = (uint8_t)(i < 256 ? i : i * 7);
  float out[256 + 24];
  for (int f = 0; f < 2; f++) {
    const gemmd_dtype_t dt = f == 0 ? GEMMD_DTYPE_FP8_E4M3 : GEMMD_DTYPE_FP8_E5M2;
    for (size_t off = 0; off < 9; off++) {
      for (size_t n = 256 + 15 - off; n > 0; n = n > 40 ? n - 37 : n - 1) {
        gemmd_decode_row(dt, codes + off, n, out);
        for (size_t i = 0; i < n; i++) {
          const uint8_t c = codes[off + i];
          const float want = f == 0 ? gemmd_e4m3_to_f32(c) : gemmd_e5m2_to_f32(c);
          uint32_t got_bits, want_bits;
          memcpy(&got_bits, &out[i], 4);
          memcpy(&want_bits, &want, 4);
          TEST_CHECK(got_bits == want_bits, "%s code 0x%02x (offset %zu, n %zu): 0x%08x, want 0x%08x",
                     gemmd_dtype_name(dt), c, off, n, got_bits, want_bits);
        }
      }
    }
  }
}

/* gemmd_quantize_span's table equals the scalar encoder bit for bit: every sign, exponent,
 * kept mantissa and round bit, each with the bits below all clear, the lowest set, all set
 * and random; then random values over random scales. */
static void check_span(test_rng_t *rng) {
  const gemmd_dtype_t fp8s[] = {GEMMD_DTYPE_FP8_E4M3, GEMMD_DTYPE_FP8_E5M2};
  enum { N = 4096 };
  static float v[N];
  static uint8_t got[N];
  size_t checked = 0;
  for (int f = 0; f < 2; f++) {
    const gemmd_dtype_t fp8 = fp8s[f];
    const int shift = fp8 == GEMMD_DTYPE_FP8_E4M3 ? 19 : 20;
    const uint32_t low = (1u << shift) - 1u;
    for (uint32_t hi = 0; hi < (1u << (32 - shift)); hi += N / 4) {
      for (uint32_t j = 0; j < N; j++) {
        const uint32_t fill[4] = {0, 1, low, (uint32_t)test_rand(rng) & low};
        const uint32_t u = (hi + j / 4) << shift | fill[j % 4];
        memcpy(&v[j], &u, 4);
      }
      gemmd_quantize_span(fp8, v, N, 1.0f, got);
      for (uint32_t j = 0; j < N; j++, checked++) {
        const uint8_t want = gemmd_quantize_value(fp8, v[j]);
        uint32_t u;
        memcpy(&u, &v[j], 4);
        TEST_CHECK(got[j] == want, "%s of 0x%08x: 0x%02x, want 0x%02x", gemmd_dtype_name(fp8), u, got[j], want);
      }
    }
    for (int rep = 0; rep < 64; rep++) {
      const float scale = (float)ldexp(0.5 + test_uniform(rng), (int)(test_rand(rng) % 40) - 20);
      for (uint32_t j = 0; j < N; j++) v[j] = (float)ldexp(test_uniform(rng) * 2 - 1, (int)(test_rand(rng) % 60) - 30);
      gemmd_quantize_span(fp8, v, N, scale, got);
      for (uint32_t j = 0; j < N; j++, checked++) {
        TEST_CHECK(got[j] == gemmd_quantize_value(fp8, v[j] / scale), "%s of %g / %g", gemmd_dtype_name(fp8),
                   (double)v[j], (double)scale);
      }
    }
  }
  printf("quantize_test: %zu encodings by table match the scalar encoder\n", checked);
}

/* Bands split over threads give the same bits and scales as one thread, for every banded
 * layout, with ragged last bands and more threads than bands. */
static void check_threads(test_rng_t *rng) {
  const gemmd_scale_layout_t layouts[] = {GEMMD_SCALE_ROW, GEMMD_SCALE_BLOCK_1X128, GEMMD_SCALE_BLOCK_128X128};
  const uint32_t shapes[][2] = {{700, 1000}, {129, 300}, {5, 4096}};
  for (size_t l = 0; l < 3; l++) {
    for (size_t sh = 0; sh < 3; sh++) {
      const uint32_t rows = shapes[sh][0], cols = shapes[sh][1];
      test_matrix_t src;
      test_matrix_random(&src, rng, rows, cols, GEMMD_DTYPE_BF16, GEMMD_SCALE_NONE, 3.0);
      const size_t ns = gemmd_scale_count(layouts[l], rows, cols);
      uint8_t *q1 = malloc((size_t)rows * cols), *qn = malloc((size_t)rows * cols);
      float *s1 = malloc(4 * ns), *sn = malloc(4 * ns);
      TEST_CHECK(gemmd_quantize_threads(&src.op, GEMMD_DTYPE_FP8_E4M3, layouts[l], q1, s1, 1) == GEMMD_OK, "1 thread");
      for (unsigned t = 2; t <= 9; t += 7) {
        TEST_CHECK(gemmd_quantize_threads(&src.op, GEMMD_DTYPE_FP8_E4M3, layouts[l], qn, sn, t) == GEMMD_OK,
                   "%u threads", t);
        TEST_CHECK(memcmp(q1, qn, (size_t)rows * cols) == 0 && memcmp(s1, sn, 4 * ns) == 0,
                   "layout %d, %ux%u: %u threads differ from one", (int)layouts[l], rows, cols, t);
      }
      free(q1), free(qn), free(s1), free(sn);
      test_matrix_free(&src);
    }
  }
}

int main(void) {
  test_rng_t rng = {test_seed("quantize_test")};
  check_decode_row();
  check_span(&rng);
  check_threads(&rng);
  static const uint32_t shapes[][2] = {{1, 1},   {1, 129},  {7, 128},  {3, 1000},
                                       {129, 257}, {128, 128}, {200, 300}, {17, 16}};
  const gemmd_dtype_t fp8s[] = {GEMMD_DTYPE_FP8_E4M3, GEMMD_DTYPE_FP8_E5M2};
  const gemmd_dtype_t srcs[] = {GEMMD_DTYPE_FP32, GEMMD_DTYPE_BF16, GEMMD_DTYPE_FP16,
                                GEMMD_DTYPE_FP8_E5M2};
  int cases = 0;
  for (size_t f = 0; f < 2; f++) {
    for (int layout = GEMMD_SCALE_NONE; layout <= GEMMD_SCALE_BLOCK_128X128; layout++) {
      for (size_t s = 0; s < sizeof srcs / sizeof srcs[0]; s++) {
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
          check_case(&rng, fp8s[f], (gemmd_scale_layout_t)layout, srcs[s], shapes[i][0],
                     shapes[i][1]);
          cases++;
        }
      }
    }
  }
  check_bad_arguments();
  printf("quantize_test: %d cases passed\n", cases);
  return 0;
}
