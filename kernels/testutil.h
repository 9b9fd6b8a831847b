/* Test helpers for kernels/: a seeded RNG and random operands of any dtype and layout. */
#ifndef GEMMD_KERNELS_TESTUTIL_H_
#define GEMMD_KERNELS_TESTUTIL_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/operand.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint64_t s;
} test_rng_t;

uint64_t test_rand(test_rng_t *r);
double test_uniform(test_rng_t *r); /* [0, 1) */
double test_normal(test_rng_t *r);
uint32_t test_range(test_rng_t *r, uint32_t lo, uint32_t hi); /* [lo, hi] */
/* A seed from $TEST_SEED, else the clock; printed so a failure can be replayed. */
uint64_t test_seed(const char *test_name);

/* A matrix that owns its storage. */
typedef struct {
  gemmd_operand_t op;
  void *data;
  float *scales;
} test_matrix_t;

/* Random rows×cols matrix: values normal with magnitude ~`mag` (FP8: while
 * test_fp8_extreme_codes is set, the default, one in 16 is any finite code instead:
 * subnormals, the maximum), and random positive scales of the layout (2^-4 .. 2^4).
 * Exits on allocation failure. */
extern int test_fp8_extreme_codes;
void test_matrix_random(test_matrix_t *t, test_rng_t *rng, uint32_t rows, uint32_t cols,
                        gemmd_dtype_t dtype, gemmd_scale_layout_t layout, double mag);
void test_matrix_free(test_matrix_t *t);

/* FP16 output overflows where |D| rounds past 65504: with `require`, those elements must be
 * ±Inf in out with the reference's sign (exits otherwise); either way they are left out of
 * the error (ref takes out's value). Elements within `band` (relative) of the threshold,
 * where the kernel's accumulation error may put them on either side, are left out too.
 * Without `require` (errors that may exceed the reference itself, as on extreme FP8 codes)
 * every element from the band's lower edge up is only left out. */
void test_fp16_overflow_mask(double *ref, const uint16_t *out, size_t n, double band, int require, const char *what);

#define TEST_CHECK(cond, ...)                                             \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: check failed: %s\n  ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                       \
      fprintf(stderr, "\n");                                              \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_KERNELS_TESTUTIL_H_ */
