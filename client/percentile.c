/* Nearest-rank percentiles. */
#include "client/percentile.h"

#include <math.h>
#include <stdlib.h>

static int cmp_u64(const void *a, const void *b) {
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

void ctl_sort_u64(uint64_t *v, size_t n) {
  if (n > 1) qsort(v, n, sizeof *v, cmp_u64);
}

size_t ctl_percentile_rank(size_t n, double p) {
  if (n == 0) return 0;
  if (!(p > 0)) return 1;
  if (p >= 100) return n;
  /* p/100·n is often a whole number that binary floating point misses by an ulp
   * (99.9/100·1000 = 999.0000000000001): shave a relative 1e-12 before rounding up. */
  const double r = ceil(p / 100.0 * (double)n * (1.0 - 1e-12));
  if (r < 1) return 1;
  return r > (double)n ? n : (size_t)r;
}

uint64_t ctl_percentile(const uint64_t *sorted, size_t n, double p) {
  const size_t rank = ctl_percentile_rank(n, p);
  return rank == 0 ? 0 : sorted[rank - 1];
}
