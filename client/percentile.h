/* gemmctl: nearest-rank percentiles of latency samples. */
#ifndef GEMMD_CLIENT_PERCENTILE_H_
#define GEMMD_CLIENT_PERCENTILE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Ascending, in place. */
void ctl_sort_u64(uint64_t *v, size_t n);

/* The 1-based nearest rank of percentile p (0..100) among n samples: ceil(p/100 · n),
 * at least 1 and at most n; 0 when n is 0. p = 99.9 of 1000 samples is rank 999. */
size_t ctl_percentile_rank(size_t n, double p);

/* The sample at that rank of sorted samples (0 when n is 0). */
uint64_t ctl_percentile(const uint64_t *sorted, size_t n, double p);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_PERCENTILE_H_ */
