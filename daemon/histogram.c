#include "daemon/histogram.h"

#include <math.h>
#include <string.h>

#include "kernels/errors.h"

/* 10 µs ... 10 s in 1-2.5-5 steps. */
const double gemmd_latency_bounds_s[] = {
    1e-5, 2.5e-5, 5e-5,  /* */
    1e-4, 2.5e-4, 5e-4,  /* */
    1e-3, 2.5e-3, 5e-3,  /* */
    1e-2, 2.5e-2, 5e-2,  /* */
    1e-1, 2.5e-1, 5e-1,  /* */
    1.0,  2.5,    5.0,   /* */
    10.0,
};
const int gemmd_latency_bounds_n =
    (int)(sizeof gemmd_latency_bounds_s / sizeof gemmd_latency_bounds_s[0]);

const double gemmd_batch_size_bounds[] = {1,   2,   4,    8,    16,   32,  64,
                                          128, 256, 512, 1024, 2048, 4096};
const int gemmd_batch_size_bounds_n =
    (int)(sizeof gemmd_batch_size_bounds / sizeof gemmd_batch_size_bounds[0]);

int gemmd_histogram_init(gemmd_histogram_t *h, const double *bounds, int n) {
  if (h == NULL) return GEMMD_EINVAL;
  memset(h, 0, sizeof *h);
  if (n < 0 || n > GEMMD_HISTOGRAM_MAX_BUCKETS || (n > 0 && bounds == NULL)) return GEMMD_EINVAL;
  for (int i = 0; i < n; i++) {
    if (!isfinite(bounds[i])) return GEMMD_EINVAL;
    if (i > 0 && !(bounds[i] > bounds[i - 1])) return GEMMD_EINVAL;
  }
  memcpy(h->bounds, bounds, (size_t)n * sizeof bounds[0]);
  h->n_bounds = n;
  return GEMMD_OK;
}

void gemmd_histogram_observe(gemmd_histogram_t *h, double v) {
  if (isnan(v)) return; /* would poison sum and max; no bucket holds it */
  /* Bucket i holds (bounds[i-1], bounds[i]] ("le" semantics); binary search for the
   * first bound >= v, n_bounds (the +Inf bucket) when none is. */
  int lo = 0, hi = h->n_bounds;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (v <= h->bounds[mid]) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  h->counts[lo]++;
  if (h->count == 0 || v > h->max) h->max = v;
  h->count++;
  h->sum += v;
}

double gemmd_histogram_quantile(const gemmd_histogram_t *h, double q) {
  if (h->count == 0) return 0.0;
  if (isnan(q) || q < 0.0) q = 0.0;
  if (q > 1.0) q = 1.0;
  const double rank = q * (double)h->count;
  uint64_t below = 0; /* observations in the buckets before i */
  for (int i = 0; i <= h->n_bounds; i++) {
    const uint64_t c = h->counts[i];
    /* The first non-empty bucket whose cumulative count reaches the rank. */
    if (c == 0 || (double)(below + c) < rank) {
      below += c;
      continue;
    }
    if (i == h->n_bounds) return h->max; /* +Inf bucket: no upper bound to use */
    const double lower = i == 0 ? 0.0 : h->bounds[i - 1];
    const double upper = h->bounds[i];
    double frac = (rank - (double)below) / (double)c;
    if (frac < 0.0) frac = 0.0;
    double v = lower + (upper - lower) * frac;
    if (v > h->max) v = h->max;
    return v;
  }
  return h->max; /* unreachable: the counts sum to count */
}

double gemmd_histogram_mean(const gemmd_histogram_t *h) {
  return h->count == 0 ? 0.0 : h->sum / (double)h->count;
}
