/* A fixed-bucket histogram, Prometheus style (cumulative on output), with quantile
 * estimates for ServerStats. Not thread-safe: gemmd updates it on the loop thread. */
#ifndef GEMMD_DAEMON_HISTOGRAM_H_
#define GEMMD_DAEMON_HISTOGRAM_H_

#include <stdint.h>

#define GEMMD_HISTOGRAM_MAX_BUCKETS 32

typedef struct gemmd_histogram_s {
  int n_bounds;                                  /* finite upper bounds, ascending */
  double bounds[GEMMD_HISTOGRAM_MAX_BUCKETS];
  uint64_t counts[GEMMD_HISTOGRAM_MAX_BUCKETS + 1]; /* per bucket (not cumulative); last = +Inf */
  uint64_t count;
  double sum;
  double max;
} gemmd_histogram_t;

/* Latency buckets in seconds: 10 µs ... 10 s, 1-2.5-5 steps. */
extern const double gemmd_latency_bounds_s[];
extern const int gemmd_latency_bounds_n;
/* Batch-size buckets: 1, 2, 4, ... 4096. */
extern const double gemmd_batch_size_bounds[];
extern const int gemmd_batch_size_bounds_n;

/* Returns 0 or GEMMD_EINVAL (too many bounds, not ascending). */
int gemmd_histogram_init(gemmd_histogram_t *h, const double *bounds, int n);
void gemmd_histogram_observe(gemmd_histogram_t *h, double v);
/* Estimate of quantile q in [0,1]: linear interpolation inside the bucket that holds it
 * (the +Inf bucket reports max). 0 when empty. */
double gemmd_histogram_quantile(const gemmd_histogram_t *h, double q);
double gemmd_histogram_mean(const gemmd_histogram_t *h);

#endif /* GEMMD_DAEMON_HISTOGRAM_H_ */
