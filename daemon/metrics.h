/* Prometheus exposition of gemmd's counters (docs/api.md §4).
 *
 * The loop thread owns a gemmd_metrics_t and updates its fields directly; gauges are set
 * right before rendering. gemmd_metrics_render writes the text format (version 0.0.4)
 * that `promtool check metrics` accepts: HELP and TYPE for every family, the families of
 * docs/api.md §4 with their labels, and the standard process_* metrics read from /proc. */
#ifndef GEMMD_DAEMON_METRICS_H_
#define GEMMD_DAEMON_METRICS_H_

#include <stddef.h>
#include <stdint.h>

#include "daemon/histogram.h"
#include "daemon/nvml.h"

typedef enum { GEMMD_TRANSPORT_GRPC = 0, GEMMD_TRANSPORT_SHM = 1 } gemmd_transport_t;
#define GEMMD_N_TRANSPORTS 2
#define GEMMD_N_CODES 17 /* gRPC status codes 0..16 */

/* "grpc" / "shm". */
const char *gemmd_transport_name(gemmd_transport_t t);
/* "OK", "CANCELLED", ... "UNAUTHENTICATED"; "UNKNOWN" outside 0..16. */
const char *gemmd_code_name(int code);

/* Stages of gemmd_batch_stage_seconds_total, in a batch's order. */
#define GEMMD_BATCH_STAGES(X)                                                                \
  X(TO_ENGINE, "to_engine")       /* loop submits → the engine's thread picks it up */       \
  X(STAGING, "host_staging")      /* layout, copies into pinned memory, tensor maps */        \
  X(DEVICE, "device")             /* CUDA events: upload, kernels, result copies */            \
  X(NOTICE, "completion_notice")  /* the GPU done → the engine's thread knows (+ API calls) */ \
  X(TO_FINISHER, "to_finisher")   /* → a finishing thread takes it (answers shm requests) */  \
  X(TO_LOOP, "to_loop")           /* the finishing thread → the loop */                       \
  X(ANSWER, "answer")             /* the loop answers every request of the batch */
enum {
#define GEMMD_STAGE_ENUM(id, name) GEMMD_STAGE_##id,
  GEMMD_BATCH_STAGES(GEMMD_STAGE_ENUM)
#undef GEMMD_STAGE_ENUM
      GEMMD_N_BATCH_STAGES
};

typedef struct gemmd_metrics_s {
  /* Counters. */
  uint64_t requests[GEMMD_N_TRANSPORTS][GEMMD_N_CODES]; /* gemmd_requests_total */
  uint64_t batches;                                      /* gemmd_batches_total */
  uint64_t batches_cublaslt;                             /* of those, on cuBLASLt */
  double flops;                                          /* gemmd_flops_total */
  uint64_t input_bytes, output_bytes;                    /* gemmd_{input,output}_bytes_total */
  uint64_t graph_replays, graph_captures;                /* gemmd_graph_{replays,captures}_total */
  /* gemmd_batch_stage_seconds_total{stage}: where a batch's time goes between the loop
   * and the GPU (engines that report their hand-offs), and its count. */
  double stage_seconds[GEMMD_N_BATCH_STAGES];
  uint64_t staged_batches;
  /* gemmd_batch_gemm_seconds_total: of the device stage, the GEMM kernels alone. */
  double gemm_seconds;
  /* Histograms. */
  gemmd_histogram_t request_seconds[GEMMD_N_TRANSPORTS]; /* gemmd_request_duration_seconds */
  gemmd_histogram_t queue_seconds;                       /* gemmd_queue_duration_seconds */
  gemmd_histogram_t batch_seconds;                       /* gemmd_batch_duration_seconds */
  gemmd_histogram_t batch_requests;                      /* gemmd_batch_requests */
  /* Gauges. */
  uint64_t queue_depth, inflight, weights, weight_bytes, shm_clients, shm_pinned_bytes, device_memory_used;
  uint64_t weight_budget_bytes, queue_capacity; /* --weight-memory-bytes, --queue-depth */
  int device_failed;                            /* the GPU failed; gemmd is stopping (exit 3) */
  gemmd_gpu_sample_t gpu;                       /* gemmd_gpu_* (nvml.h); NaN: unknown */
  /* Start-up loading (loader.h): gemmd_startup_*. */
  int startup_loading;
  uint64_t startup_files, startup_files_done, startup_files_skipped, startup_weights, startup_weight_bytes;
  int up;
  /* gemmd_build_info labels. */
  char version[32];
  char backend[16];
  char device[128];
} gemmd_metrics_t;

void gemmd_metrics_init(gemmd_metrics_t *m, const char *version, const char *backend,
                        const char *device);

/* Records one answered request: its code, total latency; queue time only for requests
 * that reached a batch (queue_ns = 0 and dispatched = 0 otherwise). */
void gemmd_metrics_request(gemmd_metrics_t *m, gemmd_transport_t t, int code, uint64_t total_ns,
                           int dispatched, uint64_t queue_ns);

/* A batch's hand-offs, CLOCK_MONOTONIC ns (0 where an engine does not have them):
 * submitted by the loop, picked up by the engine's thread, host staging done (the device
 * work starts being enqueued; the device time is timed from there on the GPU), seen
 * complete by the engine, taken by the thread that finishes it (where that is another
 * thread), back on the loop, every request answered. */
typedef struct {
  uint64_t submit, engine_start, launch, seen_done, finishing, done, answered;
} gemmd_batch_marks_t;

/* Adds a finished batch's hand-offs and device time to gemmd_batch_stage_seconds_total,
 * and its GEMM kernels' own time (part of device_ns) to gemmd_batch_gemm_seconds_total. */
void gemmd_metrics_batch_stages(gemmd_metrics_t *m, const gemmd_batch_marks_t *k, uint64_t device_ns,
                                uint64_t gemm_ns);

/* Records one finished batch. */
void gemmd_metrics_batch(gemmd_metrics_t *m, uint32_t requests, uint64_t device_ns, double flops,
                         uint64_t input_bytes, uint64_t output_bytes);

/* The whole exposition as a malloc'd, NUL-terminated string (*len without the NUL).
 * Returns 0 or GEMMD_ENOMEM. */
int gemmd_metrics_render(const gemmd_metrics_t *m, char **out, size_t *len);

#endif /* GEMMD_DAEMON_METRICS_H_ */
