/* Bucket tables, bucket placement (le semantics), quantile interpolation, mean. */
#include "daemon/histogram.h"

#include <math.h>
#include <stdio.h>

#include "kernels/errors.h"
#include "daemon/test_check.h"


#define CHECK_NEAR(a, b)                                                             \
  do {                                                                               \
    const double a_ = (a), b_ = (b);                                                 \
    if (!(fabs(a_ - b_) <= 1e-12 * (fabs(b_) + 1e-300) + 1e-15)) {                   \
      fprintf(stderr, "%s:%d: %s = %.17g, want %.17g\n", __FILE__, __LINE__, #a, a_, b_); \
      check_failures++;                                                                    \
    }                                                                                \
  } while (0)

static void test_tables(void) {
  static const double want_latency[] = {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3,
                                        2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25,
                                        0.5, 1, 2.5, 5, 10};
  CHECK(gemmd_latency_bounds_n == 19);
  for (int i = 0; i < 19 && i < gemmd_latency_bounds_n; i++)
    CHECK_NEAR(gemmd_latency_bounds_s[i], want_latency[i]);
  CHECK(gemmd_batch_size_bounds_n == 13);
  for (int i = 0; i < 13 && i < gemmd_batch_size_bounds_n; i++)
    CHECK(gemmd_batch_size_bounds[i] == (double)(1 << i));
  gemmd_histogram_t h;
  CHECK(gemmd_histogram_init(&h, gemmd_latency_bounds_s, gemmd_latency_bounds_n) == GEMMD_OK);
  CHECK(gemmd_histogram_init(&h, gemmd_batch_size_bounds, gemmd_batch_size_bounds_n) ==
        GEMMD_OK);
}

static void test_init_rejects(void) {
  gemmd_histogram_t h;
  const double descending[] = {1, 3, 2};
  const double equal[] = {1, 1};
  const double with_nan[] = {1, NAN};
  const double with_inf[] = {1, INFINITY};
  double many[GEMMD_HISTOGRAM_MAX_BUCKETS + 1];
  for (int i = 0; i <= GEMMD_HISTOGRAM_MAX_BUCKETS; i++) many[i] = i;
  CHECK(gemmd_histogram_init(&h, descending, 3) == GEMMD_EINVAL);
  CHECK(gemmd_histogram_init(&h, equal, 2) == GEMMD_EINVAL);
  CHECK(gemmd_histogram_init(&h, with_nan, 2) == GEMMD_EINVAL);
  CHECK(gemmd_histogram_init(&h, with_inf, 2) == GEMMD_EINVAL);
  CHECK(gemmd_histogram_init(&h, many, GEMMD_HISTOGRAM_MAX_BUCKETS + 1) == GEMMD_EINVAL);
  CHECK(gemmd_histogram_init(&h, many, -1) == GEMMD_EINVAL);
  CHECK(gemmd_histogram_init(&h, many, GEMMD_HISTOGRAM_MAX_BUCKETS) == GEMMD_OK);
  CHECK(h.n_bounds == GEMMD_HISTOGRAM_MAX_BUCKETS);
}

static void test_observe(void) {
  gemmd_histogram_t h;
  const double b[] = {1, 2, 4, 8};
  CHECK(gemmd_histogram_init(&h, b, 4) == GEMMD_OK);
  CHECK(h.count == 0 && h.sum == 0 && gemmd_histogram_mean(&h) == 0);
  CHECK(gemmd_histogram_quantile(&h, 0.5) == 0);
  gemmd_histogram_observe(&h, 0.25); /* bucket 0 */
  gemmd_histogram_observe(&h, 1.0);  /* le: exactly on a bound stays in that bucket */
  gemmd_histogram_observe(&h, 1.5);  /* bucket 1 */
  gemmd_histogram_observe(&h, 8.0);  /* bucket 3 */
  gemmd_histogram_observe(&h, 9.0);  /* +Inf */
  gemmd_histogram_observe(&h, NAN);  /* ignored */
  CHECK(h.counts[0] == 2);
  CHECK(h.counts[1] == 1);
  CHECK(h.counts[2] == 0);
  CHECK(h.counts[3] == 1);
  CHECK(h.counts[4] == 1);
  CHECK(h.count == 5);
  CHECK_NEAR(h.sum, 19.75);
  CHECK_NEAR(h.max, 9.0);
  CHECK_NEAR(gemmd_histogram_mean(&h), 19.75 / 5);
}

static void test_quantile(void) {
  gemmd_histogram_t h;
  const double b[] = {1, 2, 4, 8};
  CHECK(gemmd_histogram_init(&h, b, 4) == GEMMD_OK);
  for (int i = 0; i < 4; i++) gemmd_histogram_observe(&h, 0.5); /* (0,1] */
  for (int i = 0; i < 4; i++) gemmd_histogram_observe(&h, 3.0); /* (2,4] */
  for (int i = 0; i < 2; i++) gemmd_histogram_observe(&h, 100); /* +Inf */
  /* rank = q * 10 */
  CHECK_NEAR(gemmd_histogram_quantile(&h, 0.0), 0.0);
  CHECK_NEAR(gemmd_histogram_quantile(&h, 0.2), 0.5);  /* 2 of 4 in (0,1] */
  CHECK_NEAR(gemmd_histogram_quantile(&h, 0.4), 1.0);  /* all of (0,1] */
  CHECK_NEAR(gemmd_histogram_quantile(&h, 0.5), 2.5);  /* 1 of 4 in (2,4]; (1,2] empty */
  CHECK_NEAR(gemmd_histogram_quantile(&h, 0.6), 3.0);
  CHECK_NEAR(gemmd_histogram_quantile(&h, 0.8), 4.0);
  CHECK_NEAR(gemmd_histogram_quantile(&h, 0.9), 100.0); /* +Inf bucket: max */
  CHECK_NEAR(gemmd_histogram_quantile(&h, 1.0), 100.0);
  CHECK_NEAR(gemmd_histogram_quantile(&h, 7.0), 100.0); /* clamped to 1 */
  CHECK_NEAR(gemmd_histogram_mean(&h), (2.0 + 12.0 + 200.0) / 10);

  /* Never above the largest observation. */
  const double one[] = {10};
  CHECK(gemmd_histogram_init(&h, one, 1) == GEMMD_OK);
  gemmd_histogram_observe(&h, 1.0);
  gemmd_histogram_observe(&h, 2.0);
  CHECK_NEAR(gemmd_histogram_quantile(&h, 0.1), 1.0);   /* 0 + 10 * (0.2 / 2) */
  CHECK_NEAR(gemmd_histogram_quantile(&h, 0.25), 2.0);  /* 2.5 interpolated, capped */
  CHECK_NEAR(gemmd_histogram_quantile(&h, 0.99), 2.0);

  /* Latency buckets: 1000 samples of 3 ms land in (2.5 ms, 5 ms]. */
  CHECK(gemmd_histogram_init(&h, gemmd_latency_bounds_s, gemmd_latency_bounds_n) == GEMMD_OK);
  for (int i = 0; i < 1000; i++) gemmd_histogram_observe(&h, 3e-3);
  CHECK(h.counts[8] == 1000);
  CHECK_NEAR(gemmd_histogram_quantile(&h, 0.1), 2.5e-3 + 2.5e-3 * 0.1);
  CHECK_NEAR(gemmd_histogram_quantile(&h, 0.5), 3e-3); /* interpolated 3.75 ms, capped */
  CHECK_NEAR(gemmd_histogram_mean(&h), 3e-3);
}

int main(void) {
  test_tables();
  test_init_rejects();
  test_observe();
  test_quantile();
  if (check_failures != 0) {
    fprintf(stderr, "histogram_test: %d failure(s)\n", check_failures);
    return 1;
  }
  printf("histogram_test: ok\n");
  return 0;
}
