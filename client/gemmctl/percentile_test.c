/* Nearest-rank percentiles: hand-checked ranks (including the float traps of 99.9% of
 * 1000 and 90% of 10), the ends, and agreement with the definition — the smallest
 * sample with at least p% of samples at or below it — on random data. */
#include "client/gemmctl/bench_report.h"

#include <math.h>
#include <string.h>

#include "client/gemmctl/ctl_random.h"
#include "client/testing/testing.h"

static void check_ranks(void) {
  static const struct {
    size_t n;
    double p;
    size_t rank;
  } cases[] = {
      {0, 50, 0},         {1, 0, 1},           {1, 50, 1},
      {1, 100, 1},        {2, 50, 1},          {3, 50, 2},
      {4, 50, 2},         {4, 75, 3},          {10, 90, 9},
      {10, 91, 10},       {100, 99, 99},       {1000, 99.9, 999},
      {1001, 99.9, 1000}, {10000, 99.9, 9990}, {100000, 99.99, 99990},
      {5, 0, 1},          {5, 100, 5},         {5, 20, 1},
      {5, 20.0001, 2},    {7, 1e-9, 1},        {3, 150, 3},
      {3, -5, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const size_t got = ctl_percentile_rank(cases[i].n, cases[i].p);
    CHECK(got == cases[i].rank, "n %zu p %g: rank %zu, want %zu", cases[i].n, cases[i].p, got,
          cases[i].rank);
  }
}

static void check_values(void) {
  uint64_t v[] = {50, 10, 40, 20, 30};
  ctl_sort_u64(v, 5);
  static const uint64_t sorted[] = {10, 20, 30, 40, 50};
  CHECK(memcmp(v, sorted, sizeof v) == 0, "sort");
  CHECK(ctl_percentile(v, 5, 50) == 30, "p50");
  CHECK(ctl_percentile(v, 5, 90) == 50, "p90");
  CHECK(ctl_percentile(v, 5, 0) == 10 && ctl_percentile(v, 5, 100) == 50, "ends");
  CHECK(ctl_percentile(NULL, 0, 50) == 0, "empty");
}

/* The smallest sample x with count(<= x) >= p% of n, straight from the definition. */
static uint64_t by_definition(const uint64_t *sorted, size_t n, double p) {
  for (size_t i = 0; i < n; i++) {
    size_t at_or_below = i + 1;
    while (at_or_below < n && sorted[at_or_below] == sorted[i]) at_or_below++;
    if ((double)at_or_below * 100.0 >= p * (double)n - 1e-9 * (double)n) return sorted[i];
  }
  return sorted[n - 1];
}

static void check_random(void) {
  ctl_rng_t rng = {12345};
  static const double ps[] = {1, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.99, 100};
  for (int trial = 0; trial < 300; trial++) {
    const size_t n = 1 + ctl_rng_next(&rng) % 3000;
    uint64_t *v = malloc(n * sizeof *v);
    CHECK(v != NULL, "alloc");
    for (size_t i = 0; i < n; i++) v[i] = ctl_rng_next(&rng) % (trial % 2 ? 50 : 1000000);
    ctl_sort_u64(v, n);
    for (size_t i = 1; i < n; i++) CHECK(v[i - 1] <= v[i], "sorted");
    for (size_t j = 0; j < sizeof ps / sizeof ps[0]; j++) {
      const uint64_t got = ctl_percentile(v, n, ps[j]), want = by_definition(v, n, ps[j]);
      CHECK(got == want, "n %zu p %g: %llu, want %llu", n, ps[j], (unsigned long long)got,
            (unsigned long long)want);
    }
    free(v);
  }
}

int main(void) {
  check_ranks();
  check_values();
  check_random();
  printf("percentile_test: ok\n");
  return 0;
}
