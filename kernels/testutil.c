#include "kernels/testutil.h"

#include <math.h>
#include <string.h>
#include <time.h>

uint64_t test_rand(test_rng_t *r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double test_uniform(test_rng_t *r) { return (double)(test_rand(r) >> 11) * 0x1.0p-53; }

double test_normal(test_rng_t *r) {
  double u = test_uniform(r);
  if (u < 1e-300) u = 1e-300;
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * test_uniform(r));
}

uint32_t test_range(test_rng_t *r, uint32_t lo, uint32_t hi) {
  return lo + (uint32_t)(test_rand(r) % ((uint64_t)hi - lo + 1));
}

uint64_t test_seed(const char *test_name) {
  const char *env = getenv("TEST_SEED");
  uint64_t seed;
  if (env != NULL && *env) {
    seed = strtoull(env, NULL, 0);
  } else {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    seed = (uint64_t)ts.tv_sec * 1000000007ull + (uint64_t)ts.tv_nsec;
  }
  /* On stderr, unbuffered: a failing check may end the process (LeakSanitizer's exit among
   * them) before stdout is flushed, and the seed is what reproduces the failure. */
  fprintf(stderr, "%s: TEST_SEED=%llu\n", test_name, (unsigned long long)seed);
  return seed;
}

int test_fp8_extreme_codes = 1;

/* One element in 16 takes any finite FP8 code (while test_fp8_extreme_codes is set). */
static int extreme(test_rng_t *rng) { return (test_rand(rng) & 15) == 0 && test_fp8_extreme_codes; }

static uint8_t random_fp8_code(test_rng_t *rng, gemmd_dtype_t dtype) {
  for (;;) {
    const uint8_t c = (uint8_t)test_rand(rng);
    if (dtype == GEMMD_DTYPE_FP8_E4M3 && (c & 0x7F) == 0x7F) continue; /* NaN */
    if (dtype == GEMMD_DTYPE_FP8_E5M2 && (c & 0x7C) == 0x7C) continue; /* Inf, NaN */
    return c;
  }
}

void test_matrix_random(test_matrix_t *t, test_rng_t *rng, uint32_t rows, uint32_t cols,
                        gemmd_dtype_t dtype, gemmd_scale_layout_t layout, double mag) {
  const size_t n = (size_t)rows * cols, esz = gemmd_dtype_size(dtype);
  const size_t ns = gemmd_scale_count(layout, rows, cols);
  memset(t, 0, sizeof *t);
  t->data = malloc(n * esz + 1);
  t->scales = malloc(sizeof(float) * (ns + 1));
  if (t->data == NULL || t->scales == NULL) {
    fprintf(stderr, "test_matrix_random: out of memory\n");
    exit(2);
  }
  for (size_t i = 0; i < ns; i++) {
    t->scales[i] = (float)(ldexp(0.5 + test_uniform(rng), (int)test_range(rng, 0, 8) - 4));
  }
  for (size_t i = 0; i < n; i++) {
    const float v = (float)(test_normal(rng) * mag);
    switch (dtype) {
      case GEMMD_DTYPE_FP8_E4M3:
        /* Mostly normal values; some any finite code (subnormals, the max). */
        ((uint8_t *)t->data)[i] = extreme(rng) ? random_fp8_code(rng, dtype) : gemmd_e4m3_from_f32(v, GEMMD_SAT);
        break;
      case GEMMD_DTYPE_FP8_E5M2:
        ((uint8_t *)t->data)[i] = extreme(rng) ? random_fp8_code(rng, dtype) : gemmd_e5m2_from_f32(v, GEMMD_SAT);
        break;
      case GEMMD_DTYPE_BF16:
        ((uint16_t *)t->data)[i] = gemmd_bf16_from_f32(v);
        break;
      case GEMMD_DTYPE_FP16:
        ((uint16_t *)t->data)[i] = gemmd_fp16_from_f32(v);
        break;
      case GEMMD_DTYPE_FP32:
        ((float *)t->data)[i] = v;
        break;
      default:
        break;
    }
  }
  t->op = (gemmd_operand_t){rows, cols, cols, dtype, t->data, layout,
                            layout == GEMMD_SCALE_NONE ? NULL : t->scales};
}

void test_matrix_free(test_matrix_t *t) {
  free(t->data);
  free(t->scales);
  memset(t, 0, sizeof *t);
}

void test_fp16_overflow_mask(double *ref, const uint16_t *out, size_t n, double band, int require, const char *what) {
  for (size_t i = 0; i < n; i++) {
    const double r = fabs(ref[i]);
    if (r < 65519.0 * (1.0 - band)) continue;
    if (require && r > 65520.0 * (1.0 + band)) {
      const float o = gemmd_fp16_to_f32(out[i]);
      TEST_CHECK(isinf(o) && (o > 0) == (ref[i] > 0), "%s: D[%zu]=%g must overflow, got %g",
                 what, i, ref[i], o);
    }
    ref[i] = gemmd_fp16_to_f32(out[i]); /* excluded */
  }
}
