/* gemmctl bench: nearest-rank percentiles of latency samples, and one shape's
 * measurements summarized as a table row and as JSON. */
#ifndef GEMMD_CLIENT_GEMMCTL_BENCH_REPORT_H_
#define GEMMD_CLIENT_GEMMCTL_BENCH_REPORT_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/operand.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What one shape's workers recorded in the measured window. */
typedef struct ctl_bench_samples_s {
  uint64_t *round_trip_ns; /* one per successful request; sorted by summarize */
  size_t n;
  uint64_t errors;
  uint64_t sum_queue_ns, sum_compute_ns, sum_batch_requests; /* server stats, OK requests */
  double seconds;                                            /* the window's length */
} ctl_bench_samples_t;

typedef struct ctl_bench_result_s {
  uint32_t m, n, k;
  unsigned concurrency;
  double request_rate;   /* offered req/s (open loop); 0: closed loop */
  const char *transport; /* "grpc", "shm" */
  int inline_b;
  int session; /* sent in GEMM sessions (gemmclient.h) */
  gemmd_dtype_t a_dtype, out_dtype;
  double seconds;
  uint64_t requests, errors; /* requests: successful ones */
  double req_per_s, gflop_per_s;
  double mean_us, p50_us, p90_us, p99_us, p999_us, max_us;   /* client round trip */
  double server_queue_us, server_compute_us, batch_requests; /* means */
} ctl_bench_result_t;

/* Fills the measured fields of r (shape and labels are the caller's) from s; sorts
 * s->round_trip_ns. Rates are 0 for an empty window. */
void ctl_bench_summarize(ctl_bench_result_t *r, ctl_bench_samples_t *s);

void ctl_bench_print_table(FILE *f, const ctl_bench_result_t *r, size_t n);

/* [ {shape, m, n, k, concurrency, ...}, ... ]: malloc'd; 0 or -1 (out of memory). */
int ctl_bench_json(const ctl_bench_result_t *r, size_t n, char **out);

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

#endif /* GEMMD_CLIENT_GEMMCTL_BENCH_REPORT_H_ */
