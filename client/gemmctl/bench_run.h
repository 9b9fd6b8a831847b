/* gemmctl bench: one shape under load. C threads issue the same synchronous GEMM, back
 * to back (closed loop), or at a fixed total rate (open loop: request k of all is due at
 * start + k/rate, spread over the threads in turn, and its latency counts from when it was
 * due, so a slow answer delays and charges the ones behind it, as wrk2 measures). Requests
 * that start after the warmup and end before the window closes are recorded. With
 * `session` each thread sends on its own GEMM session (one GemmStream over gRPC) instead
 * of a call per request. Progress
 * once a second on stderr. */
#ifndef GEMMD_CLIENT_GEMMCTL_BENCH_RUN_H_
#define GEMMD_CLIENT_GEMMCTL_BENCH_RUN_H_

#include <signal.h>
#include <stdint.h>

#include "client/gemmctl/bench_report.h"
#include "client/lib/gemmclient.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ctl_bench_run_s {
  gemmd_client_t *client;
  const gemmd_gemm_call_t *call; /* the template; each worker numbers its requests */
  unsigned concurrency;
  double request_rate; /* requests per second over all threads; 0: closed loop */
  int session;         /* each thread sends in a GEMM session (gemmclient.h) */
  double warmup_s, duration_s;
  const char *label; /* for progress lines: "1x128x128 c=32" */
  int quiet;
  volatile sig_atomic_t *interrupted; /* set by a signal handler: end the window now */
} ctl_bench_run_t;

/* Runs the load; fills *out (samples malloc'd: free out->round_trip_ns) and the first
 * error seen (code OK when none). 0, or -1 when threads or memory ran out. */
int ctl_bench_run(const ctl_bench_run_t *run, ctl_bench_samples_t *out,
                  gemmd_status_t *first_error);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_GEMMCTL_BENCH_RUN_H_ */
