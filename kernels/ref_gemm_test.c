/* The FP64 reference and the fast FP32 path against a naive triple loop written here,
 * with its own scale indexing, for every A dtype × A layout × B dtype × B layout × output
 * dtype, on ragged shapes (M, N, K of 1; sizes that are not multiples of 16 or 128), plus
 * larger shapes that cross every cache block of the fast path, strided operands, and
 * several thread counts (which must give identical bits).
 */
#include <math.h>
#include <string.h>

#include "kernels/cpu_gemm.h"
#include "kernels/errors.h"
#include "kernels/ref_gemm.h"
#include "kernels/testutil.h"

static double naive_scale(const gemmd_operand_t *op, uint32_t r, uint32_t c) {
  const uint32_t kb = (op->cols + 127) / 128;
  switch (op->scale_layout) {
    case GEMMD_SCALE_NONE:
      return 1.0;
    case GEMMD_SCALE_TENSOR:
      return op->scales[0];
    case GEMMD_SCALE_ROW:
      return op->scales[r];
    case GEMMD_SCALE_BLOCK_1X128:
      return op->scales[r * kb + c / 128];
    case GEMMD_SCALE_BLOCK_128X128:
      return op->scales[(r / 128) * kb + c / 128];
  }
  return NAN;
}

static double naive_value(const gemmd_operand_t *op, uint32_t r, uint32_t c) {
  const size_t i = (size_t)r * op->ld + c;
  double raw = NAN;
  switch (op->dtype) {
    case GEMMD_DTYPE_FP8_E4M3:
      raw = gemmd_e4m3_to_f32(((const uint8_t *)op->data)[i]);
      break;
    case GEMMD_DTYPE_FP8_E5M2:
      raw = gemmd_e5m2_to_f32(((const uint8_t *)op->data)[i]);
      break;
    case GEMMD_DTYPE_BF16:
      raw = gemmd_bf16_to_f32(((const uint16_t *)op->data)[i]);
      break;
    case GEMMD_DTYPE_FP16:
      raw = gemmd_fp16_to_f32(((const uint16_t *)op->data)[i]);
      break;
    case GEMMD_DTYPE_FP32:
      raw = ((const float *)op->data)[i];
      break;
    default:
      break;
  }
  return raw * naive_scale(op, r, c);
}

/* d = A·Bᵀ, and terms = |A|·|B|ᵀ: the size of the terms each element sums, which bounds
 * what an FP32 accumulation may lose to cancellation. */
static void naive_gemm(const gemmd_operand_t *a, const gemmd_operand_t *b, double *d,
                       double *terms) {
  for (uint32_t m = 0; m < a->rows; m++) {
    for (uint32_t n = 0; n < b->rows; n++) {
      double s = 0.0, sa = 0.0;
      for (uint32_t k = 0; k < a->cols; k++) {
        const double t = naive_value(a, m, k) * naive_value(b, n, k);
        s += t;
        sa += fabs(t);
      }
      d[(size_t)m * b->rows + n] = s;
      terms[(size_t)m * b->rows + n] = sa;
    }
  }
}

static double tolerance(gemmd_dtype_t out, uint32_t k) {
  switch (out) {
    case GEMMD_DTYPE_FP32:
      return 2e-6 * sqrt((double)k) + 1e-6;
    case GEMMD_DTYPE_FP16:
      return 1.5e-3;
    default:
      return 8e-3;
  }
}

static int g_cases = 0;

static void check_case(test_rng_t *rng, uint32_t M, uint32_t N, uint32_t K, gemmd_dtype_t adt,
                       gemmd_scale_layout_t al, gemmd_dtype_t bdt, gemmd_scale_layout_t bl,
                       gemmd_dtype_t out, uint32_t pad) {
  char what[256];
  snprintf(what, sizeof what, "M=%u N=%u K=%u A=%s/%s B=%s/%s out=%s pad=%u", M, N, K,
           gemmd_dtype_name(adt), gemmd_scale_layout_name(al), gemmd_dtype_name(bdt),
           gemmd_scale_layout_name(bl), gemmd_dtype_name(out), pad);
  test_matrix_t a, b;
  /* Stored with `pad` extra columns per row: the views must honour ld. */
  test_matrix_random(&a, rng, M, K + pad, adt, al, 2.0);
  test_matrix_random(&b, rng, N, K + pad, bdt, bl, 2.0);
  a.op.cols = K;
  b.op.cols = K;
  if (pad) { /* the scale counts follow the viewed K, so refill them for it */
    for (size_t i = 0; i < gemmd_scale_count(al, M, K); i++) a.scales[i] = 0.5f + (float)(i % 7);
    for (size_t i = 0; i < gemmd_scale_count(bl, N, K); i++) b.scales[i] = 0.25f * (float)(1 + i % 5);
  }

  const size_t mn = (size_t)M * N;
  double *naive = malloc(sizeof(double) * mn);
  double *ref = malloc(sizeof(double) * mn);
  double *terms = malloc(sizeof(double) * mn);
  naive_gemm(&a.op, &b.op, naive, terms);

  TEST_CHECK(gemmd_ref_gemm_f64(&a.op, &b.op, ref) == GEMMD_OK, "%s: ref failed", what);
  for (size_t i = 0; i < mn; i++) {
    TEST_CHECK(fabs(ref[i] - naive[i]) <= 1e-12 * (fabs(naive[i]) + 1e-300) + 1e-300,
               "%s: FP64 reference D[%zu] = %.17g, naive %.17g", what, i, ref[i], naive[i]);
  }

  const size_t esz = gemmd_dtype_size(out);
  unsigned char *d1 = malloc(mn * esz), *d3 = malloc(mn * esz);
  memset(d1, 0xA5, mn * esz); /* poison: every element must be written */
  memset(d3, 0x5A, mn * esz);
  TEST_CHECK(gemmd_cpu_gemm(&a.op, &b.op, out, d1, N, 1) == GEMMD_OK, "%s: cpu_gemm failed",
             what);
  TEST_CHECK(gemmd_cpu_gemm(&a.op, &b.op, out, d3, N, 3) == GEMMD_OK,
             "%s: cpu_gemm (3 threads) failed", what);
  TEST_CHECK(memcmp(d1, d3, mn * esz) == 0, "%s: 1 and 3 threads differ", what);
  if (out == GEMMD_DTYPE_FP16) test_fp16_overflow_mask(naive, (const uint16_t *)d1, mn, 1e-3, 1, what);
  const double err = gemmd_rel_frobenius_error(naive, d1, out, mn);
  double tol = tolerance(out, K);
  /* Absolute slack, relative to D's norm (elements that overflowed count in neither):
   * - FP32 accumulation rounds each partial sum, a random walk of about sqrt(K)·2^-24 of
   *   the terms' size. Where the terms cancel (extreme FP8 codes of 3e5 summing to 20
   *   beside outputs that overflow and are masked) that is the error that remains.
   * - FP16 subnormals (below 2^-14) are 2^-24 apart, so rounding one may cost up to 2^-25
   *   whatever the relative tolerance (seen: one D of -1.2e-5). */
  double slack2 = 0, norm2 = 0;
  for (size_t i = 0; i < mn; i++) {
    if (!isfinite(naive[i])) continue;
    const double e = sqrt((double)K) * ldexp(terms[i], -24);
    slack2 += e * e;
    norm2 += naive[i] * naive[i];
  }
  if (norm2 > 0) {
    tol += sqrt(slack2 / norm2);
    if (out == GEMMD_DTYPE_FP16) tol += ldexp(1.0, -25) * sqrt((double)mn / norm2);
  }
  TEST_CHECK(err <= tol, "%s: relative Frobenius error %.3g > %.3g", what, err, tol);
  g_cases++;
  free(naive);
  free(terms);
  free(ref);
  free(d1);
  free(d3);
  test_matrix_free(&a);
  test_matrix_free(&b);
}

static void check_bad_arguments(void) {
  float x[6] = {0};
  uint16_t d[4];
  gemmd_operand_t a = {2, 3, 3, GEMMD_DTYPE_FP32, x, GEMMD_SCALE_NONE, NULL};
  gemmd_operand_t b = {2, 2, 2, GEMMD_DTYPE_FP32, x, GEMMD_SCALE_NONE, NULL};
  TEST_CHECK(gemmd_cpu_gemm(&a, &b, GEMMD_DTYPE_BF16, d, 2, 1) == GEMMD_EINVAL, "K differs");
  b.cols = 3;
  b.ld = 3;
  TEST_CHECK(gemmd_cpu_gemm(&a, &b, GEMMD_DTYPE_FP8_E4M3, d, 2, 1) == GEMMD_EINVAL,
             "FP8 output");
  TEST_CHECK(gemmd_cpu_gemm(&a, &b, GEMMD_DTYPE_BF16, d, 1, 1) == GEMMD_EINVAL, "ldd < N");
  b.scale_layout = GEMMD_SCALE_ROW;
  TEST_CHECK(gemmd_cpu_gemm(&a, &b, GEMMD_DTYPE_BF16, d, 2, 1) == GEMMD_EINVAL,
             "layout without scales");
  b.scale_layout = GEMMD_SCALE_NONE;
  TEST_CHECK(gemmd_cpu_gemm(&a, &b, GEMMD_DTYPE_BF16, d, 2, 1) == GEMMD_OK, "valid call");
}

static void run_all(test_rng_t *rng) {
  static const uint32_t shapes[][3] = {
      {1, 1, 1},   {1, 7, 129}, {7, 1, 1},    {3, 17, 128}, {15, 33, 130},
      {14, 32, 5}, {29, 65, 257}, {4, 100, 31}, {2, 3, 1000}, {40, 9, 200},
  };
  const size_t nshapes = sizeof shapes / sizeof shapes[0];
  const gemmd_scale_layout_t a_layouts[] = {GEMMD_SCALE_NONE, GEMMD_SCALE_TENSOR,
                                            GEMMD_SCALE_ROW, GEMMD_SCALE_BLOCK_1X128};
  const gemmd_scale_layout_t b_layouts[] = {GEMMD_SCALE_NONE, GEMMD_SCALE_TENSOR,
                                            GEMMD_SCALE_ROW, GEMMD_SCALE_BLOCK_128X128};
  const gemmd_dtype_t outs[] = {GEMMD_DTYPE_BF16, GEMMD_DTYPE_FP16, GEMMD_DTYPE_FP32};
  size_t s = 0;
  for (int adt = GEMMD_DTYPE_FP8_E4M3; adt <= GEMMD_DTYPE_FP32; adt++) {
    for (int bdt = GEMMD_DTYPE_FP8_E4M3; bdt <= GEMMD_DTYPE_FP32; bdt++) {
      for (int al = 0; al < 4; al++) {
        for (int bl = 0; bl < 4; bl++) {
          for (int o = 0; o < 3; o++) {
            const uint32_t *sh = shapes[s++ % nshapes];
            check_case(rng, sh[0], sh[1], sh[2], (gemmd_dtype_t)adt, a_layouts[al],
                       (gemmd_dtype_t)bdt, b_layouts[bl], outs[o], 0);
          }
        }
      }
    }
  }
  /* Shapes that cross the fast path's blocks: M past MC (168), N past NC (3072), K past
   * KC (384), an M-split (M > N), tiles with ragged edges, and strided rows. */
  check_case(rng, 200, 70, 800, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_1X128,
             GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_128X128, GEMMD_DTYPE_FP32, 0);
  check_case(rng, 9, 3100, 400, GEMMD_DTYPE_FP8_E5M2, GEMMD_SCALE_ROW, GEMMD_DTYPE_FP8_E4M3,
             GEMMD_SCALE_BLOCK_128X128, GEMMD_DTYPE_BF16, 0);
  check_case(rng, 181, 47, 385, GEMMD_DTYPE_BF16, GEMMD_SCALE_NONE, GEMMD_DTYPE_FP8_E4M3,
             GEMMD_SCALE_TENSOR, GEMMD_DTYPE_FP32, 0);
  check_case(rng, 23, 45, 300, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_1X128,
             GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_128X128, GEMMD_DTYPE_FP32, 13);
  check_case(rng, 3, 130, 129, GEMMD_DTYPE_FP32, GEMMD_SCALE_ROW, GEMMD_DTYPE_FP16,
             GEMMD_SCALE_ROW, GEMMD_DTYPE_BF16, 5);
  /* The small-M path (no packing) split over threads: enough work for three slices. */
  check_case(rng, 2, 3100, 1000, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_1X128,
             GEMMD_DTYPE_FP8_E5M2, GEMMD_SCALE_BLOCK_128X128, GEMMD_DTYPE_BF16, 3);
}

int main(void) {
  test_rng_t rng = {test_seed("ref_gemm_test")};
  /* Every micro-kernel this CPU can run, the portable one always. */
  const char *isas[] = {"avx512", "avx2", "portable"};
  for (size_t i = 0; i < 3; i++) {
    const int rc = gemmd_cpu_gemm_use_kernel(isas[i]);
    if (rc == GEMMD_ENOTSUP) {
      printf("cpu_gemm kernel %s: not on this CPU, skipped\n", isas[i]);
      continue;
    }
    TEST_CHECK(rc == GEMMD_OK, "use_kernel(%s)", isas[i]);
    printf("cpu_gemm kernel: %s\n", gemmd_cpu_gemm_kernel_name());
    run_all(&rng);
  }
  TEST_CHECK(gemmd_cpu_gemm_use_kernel("sse9") == GEMMD_EINVAL, "unknown kernel name");
  TEST_CHECK(gemmd_cpu_gemm_use_kernel("auto") == GEMMD_OK, "auto");
  check_bad_arguments();
  printf("ref_gemm_test: %d cases passed\n", g_cases);
  return 0;
}
