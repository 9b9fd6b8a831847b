/* libgemmclient: a C client for gemmd.
 *
 * One API over every transport; the address picks it:
 *   "host:port", "dns:///host:port", "ipv4:...", "[::1]:port"  -> gRPC (GemmService)
 *   "host1:port1,host2:port2"  -> several gemmd over gRPC, balanced (docs/api.md §5:
 *                                 round-robin, the next endpoint on UNAVAILABLE, weights
 *                                 registered on every one)
 *   "unix:///run/gemmd/gemmd.sock"                              -> shared memory
 *
 * Every call returns 0 on success or a gRPC status code (1..16, e.g. 3 INVALID_ARGUMENT,
 * 5 NOT_FOUND, 14 UNAVAILABLE) and fills `status` (when non-NULL) with the code and the
 * server's message, so callers can act on "a.scales has 3 values; SCALE_LAYOUT_ROW needs
 * a.rows = 8". Local failures (bad arguments, out of memory, unreadable file) use the
 * same codes (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, NOT_FOUND) with a message of their own.
 *
 * A client is safe to use from many threads at once; each call is independent.
 */
#ifndef GEMMD_CLIENT_LIB_GEMMCLIENT_H_
#define GEMMD_CLIENT_LIB_GEMMCLIENT_H_

#include <stddef.h>
#include <stdint.h>

#include "kernels/operand.h"

#ifdef __cplusplus
extern "C" {
#endif

/* gRPC status codes, as on the wire. */
enum {
  GEMMD_STATUS_OK = 0,
  GEMMD_STATUS_CANCELLED = 1,
  GEMMD_STATUS_UNKNOWN = 2,
  GEMMD_STATUS_INVALID_ARGUMENT = 3,
  GEMMD_STATUS_DEADLINE_EXCEEDED = 4,
  GEMMD_STATUS_NOT_FOUND = 5,
  GEMMD_STATUS_ALREADY_EXISTS = 6,
  GEMMD_STATUS_PERMISSION_DENIED = 7,
  GEMMD_STATUS_RESOURCE_EXHAUSTED = 8,
  GEMMD_STATUS_FAILED_PRECONDITION = 9,
  GEMMD_STATUS_ABORTED = 10,
  GEMMD_STATUS_OUT_OF_RANGE = 11,
  GEMMD_STATUS_UNIMPLEMENTED = 12,
  GEMMD_STATUS_INTERNAL = 13,
  GEMMD_STATUS_UNAVAILABLE = 14,
  GEMMD_STATUS_DATA_LOSS = 15,
  GEMMD_STATUS_UNAUTHENTICATED = 16,
};

/* "OK", "INVALID_ARGUMENT", ... ("UNKNOWN_CODE" otherwise). */
const char *gemmd_status_name(int code);

typedef struct gemmd_status_s {
  int code;
  char message[512];
} gemmd_status_t;

typedef struct gemmd_client_s gemmd_client_t;

typedef struct gemmd_client_options_s {
  int64_t timeout_ms;         /* default deadline per call; 0 = none */
  uint64_t max_message_bytes; /* gRPC send/receive limit; 0 = 1 GiB */
  const char *tls_root_certs; /* PEM file of CAs: use TLS; NULL = plaintext */
  const char *bearer_token;   /* gRPC: sent as "authorization: Bearer <token>" on every call
                                 (gemmd's --grpc-token-file); NULL = none */
  /* Mutual TLS (gemmd's --tls-client-ca): this client's certificate chain and private key,
   * PEM files, both or neither; they need tls_root_certs. */
  const char *tls_cert_chain;
  const char *tls_private_key;
} gemmd_client_options_t;

/* opts may be NULL for defaults. The first client a process opens, before anything in it
 * has started gRPC, picks gRPC core's `poll` poller unless $GRPC_POLL_STRATEGY is set:
 * against its epoll1 default it answered a loopback GEMM at one worker in 188 µs instead of
 * 288, and 32 workers made 42.1k req/s instead of 33.2k (docs/bench/serving.md). A process
 * that sets $GRPC_POLL_STRATEGY, or starts gRPC itself first, keeps its own choice.
 * It also switches off Abseil's lock-order tracking of mutexes for the whole process
 * (Debian's Abseil is built with it on; docs/api.md §5 says what it costs).
 * A synchronous gRPC call polls for its answer for up to $GEMMD_GRPC_SPIN_US (default 200
 * where the process may run on 8 CPUs or more, else 0) before it sleeps, while the client's
 * answers have come within that on average (docs/bench/serving.md). */
int gemmd_client_open(const char *address, const gemmd_client_options_t *opts, gemmd_client_t **out,
                      gemmd_status_t *status);
/* Waits for the client's outstanding async calls (as gemmd_client_drain), then frees it.
 * NULL is ignored. Not from inside a `done` callback. */
void gemmd_client_close(gemmd_client_t *c);
/* "grpc" or "shm". */
const char *gemmd_client_transport(const gemmd_client_t *c);

/* Shared memory only: where an operand lies in a region (gemmd_client_region_open_*). */
typedef struct gemmd_region_ref_s {
  uint32_t region; /* its id; 0 = not in a region */
  uint64_t offset; /* bytes from the region's start */
} gemmd_region_ref_t;

/* One GEMM: D = A·Bᵀ. Exactly one of weight_id (non-zero), weight_name (non-NULL) or b
 * (non-NULL) names B. Operands are sent as given (row stride ld honoured; scales as the
 * layout needs). */
typedef struct gemmd_gemm_call_s {
  uint64_t request_id;
  uint64_t weight_id;
  const char *weight_name;
  const gemmd_operand_t *b;
  gemmd_operand_t a;
  gemmd_dtype_t out_dtype; /* UNSPECIFIED means BF16 */
  int64_t timeout_ms;      /* overrides the client default when non-zero */
  /* Shared memory only, optional: where D goes, inside the arena (gemmd_client_shm_alloc)
   * with room for M·N elements. The result then points there instead of owning a copy. */
  void *d_out;
  /* Shared memory only, optional: A's data, A's scales and D in regions, read and written
   * there by gemmd, instead of a.data, a.scales and d_out. A in a region is dense (a.ld is
   * a.cols or 0). With D in a region the result's data is NULL (data_borrowed): D is in
   * the region when the call returns, or when `done` runs. */
  gemmd_region_ref_t a_region, a_scales_region, d_region;
} gemmd_gemm_call_t;

typedef struct gemmd_request_stats_s {
  uint64_t queue_ns, compute_ns, total_ns;
  uint32_t batch_requests, batch_groups;
  uint64_t batch_id;
} gemmd_request_stats_t;

typedef struct gemmd_gemm_result_s {
  uint64_t request_id;
  uint32_t rows, cols;
  gemmd_dtype_t dtype;
  void *data; /* rows*cols elements of dtype, row-major; owned, see _result_free */
  size_t data_bytes;
  int data_borrowed; /* data is the call's d_out, not owned */
  gemmd_request_stats_t stats;
  uint64_t client_ns; /* round trip measured by the client (serialize, call, parse) */
} gemmd_gemm_result_t;

void gemmd_gemm_result_free(gemmd_gemm_result_t *r);

/* Shared memory only: memory inside the client's arena, 256-byte aligned, for operands
 * and results that should not be copied (NULL on gRPC or when the arena is full). */
void *gemmd_client_shm_alloc(gemmd_client_t *c, size_t bytes);
void gemmd_client_shm_free(gemmd_client_t *c, void *p);

/* Shared memory only (docs/shm-protocol.md §7): memory of this process that gemmd opens
 * once, then reads operands from and writes D into where they lie, with no copy through
 * the arena. On gemmd's CUDA backend, GPU memory by its CUDA IPC handle (cudaIpcGetMemHandle
 * of a cudaMalloc block, 64 bytes; the region's bytes count from the block's start); on
 * the CPU backend, a file both map (a memfd), by fd, which may be closed after. A region
 * belongs to this client; gemmd unmaps it after close (once the requests that use it are
 * done) or when the client goes. At most 32 are open at once. A's data (and its scales)
 * must be complete in GPU memory before the call: synchronize the stream that wrote them.
 * Over gRPC: UNIMPLEMENTED. */
int gemmd_client_region_open_fd(gemmd_client_t *c, int fd, uint64_t bytes, uint32_t *region_id,
                                gemmd_status_t *status);
int gemmd_client_region_open_cuda_ipc(gemmd_client_t *c, const void *ipc_handle, uint64_t bytes,
                                      uint32_t *region_id, gemmd_status_t *status);
int gemmd_client_region_close(gemmd_client_t *c, uint32_t region_id, gemmd_status_t *status);

/* Synchronous GEMM. */
int gemmd_client_gemm(gemmd_client_t *c, const gemmd_gemm_call_t *call, gemmd_gemm_result_t *result,
                      gemmd_status_t *status);

/* Asynchronous GEMM: returns at once; `done` runs once, on a client thread, with the
 * result (owned by the callback: free it) and the status. The call's operands (and its
 * weight_name) must stay valid until `done` runs: with several endpoints the call may be
 * sent again to the next. Returns non-zero only if the call could not be started (then
 * `done` never runs). */
typedef void (*gemmd_gemm_done_fn)(void *user, gemmd_gemm_result_t *result,
                                   const gemmd_status_t *status);
int gemmd_client_gemm_async(gemmd_client_t *c, const gemmd_gemm_call_t *call,
                            gemmd_gemm_done_fn done, void *user, gemmd_status_t *status);

/* Waits until every async call started on c has run its callback. Not from inside a
 * `done` callback (that would wait for itself). */
void gemmd_client_drain(gemmd_client_t *c);

/* A GemmStream: many GEMMs on one call, answered as their batches finish (not necessarily
 * in order: match them by request_id). `done` runs once per request, on a client thread,
 * as for gemmd_client_gemm_async; a request the server refuses gets its own status there
 * and the stream goes on. gemmd holds at most --stream-window requests of one stream, so
 * a send waits while the server is not reading (HTTP/2 flow control): a stream is bounded
 * on both sides. Over shared memory the same API sends each request as an async call.
 * One thread sends at a time. */
typedef struct gemmd_gemm_stream_s gemmd_gemm_stream_t;

int gemmd_client_gemm_stream_open(gemmd_client_t *c, gemmd_gemm_done_fn done, void *user,
                                  gemmd_gemm_stream_t **out, gemmd_status_t *status);
/* Sends one request (its timeout_ms is ignored: the stream has none). Its operands may be
 * reused once this returns. Fails with the stream's final status once the stream ended. */
int gemmd_gemm_stream_send(gemmd_gemm_stream_t *s, const gemmd_gemm_call_t *call,
                           gemmd_status_t *status);
/* Ends the stream: half-closes it, waits for every answer's `done` and the final status,
 * and frees it. Returns that status: OK, or why the stream broke (UNAVAILABLE when it
 * ended with requests unanswered). Not from inside a `done` callback. */
int gemmd_gemm_stream_close(gemmd_gemm_stream_t *s, gemmd_status_t *status);

/* A GEMM session: synchronous GEMMs, one at a time, on one GemmStream that stays open
 * between them. Each call sends its request and waits for the answer on the calling
 * thread, as gemmd_client_gemm does, without a new gRPC call each time (docs/api.md §5).
 * One thread uses a session at a time; open one per thread. A call's timeout (its own, else
 * the client's) ends the stream when it passes, since one request on a stream cannot be
 * cancelled alone; the next call opens a new one. A stream that ended UNAVAILABLE is
 * replaced and the request sent again (on the next endpoint when there are several).
 * Over shared memory each call is gemmd_client_gemm. */
typedef struct gemmd_gemm_session_s gemmd_gemm_session_t;

int gemmd_client_gemm_session_open(gemmd_client_t *c, gemmd_gemm_session_t **out, gemmd_status_t *status);
/* As gemmd_client_gemm. */
int gemmd_gemm_session_call(gemmd_gemm_session_t *s, const gemmd_gemm_call_t *call,
                            gemmd_gemm_result_t *result, gemmd_status_t *status);
/* Half-closes the stream, waits for its end (at most the client's timeout, then cancels
 * it), frees the session: OK, or the status the stream ended with. */
int gemmd_gemm_session_close(gemmd_gemm_session_t *s, gemmd_status_t *status);

typedef struct gemmd_weight_info_s {
  uint64_t weight_id;
  char name[256];
  uint32_t n, k;
  gemmd_dtype_t dtype;
  gemmd_scale_layout_t scale_layout;
  uint64_t bytes;
  char source[16]; /* "registered", "restored" (from --weight-dir) or "preloaded" */
} gemmd_weight_info_t;

/* Registers a weight (N×K) under `name`, streamed in chunks. BF16/FP32 weights are
 * quantized by the server to E4M3 with 128×128 scales; info describes what is stored. */
int gemmd_client_register_weight(gemmd_client_t *c, const char *name, const gemmd_operand_t *w,
                                 gemmd_weight_info_t *info, gemmd_status_t *status);

/* The same from files: `data_path` holds n*k elements of dtype, row-major, little-endian;
 * `scales_path` (NULL for SCALE_NONE) holds the layout's floats. */
int gemmd_client_register_weight_file(gemmd_client_t *c, const char *name, uint32_t n, uint32_t k,
                                      gemmd_dtype_t dtype, const char *data_path,
                                      gemmd_scale_layout_t layout, const char *scales_path,
                                      gemmd_weight_info_t *info, gemmd_status_t *status);

/* By id when weight_id != 0, else by name. Returns once in-flight users are done. */
int gemmd_client_unregister_weight(gemmd_client_t *c, uint64_t weight_id, const char *name,
                                   gemmd_status_t *status);

/* *infos is malloc'd (free it); *count entries. */
int gemmd_client_list_weights(gemmd_client_t *c, gemmd_weight_info_t **infos, size_t *count,
                              gemmd_status_t *status);

/* ServerStats as a JSON object (malloc'd string; free it), field names as in gemm.proto. */
int gemmd_client_get_stats_json(gemmd_client_t *c, char **json, gemmd_status_t *status);

/* ---- Added: ServerStats as a C struct (gemm.proto's fields, same names). ---------------
 * Strings are malloc'd and never NULL after a successful call ("" when the server sent
 * none); free everything with gemmd_server_stats_free. */
typedef struct gemmd_latency_summary_s {
  uint64_t count;
  double mean_us, p50_us, p90_us, p99_us, p999_us, max_us;
} gemmd_latency_summary_t;

typedef struct gemmd_code_count_s {
  char *transport; /* "grpc" or "shm" */
  char *code;      /* "OK", "INVALID_ARGUMENT", ... */
  uint64_t count;
} gemmd_code_count_t;

typedef struct gemmd_server_stats_s {
  char *version, *backend, *device, *gemm_kernel;
  uint64_t uptime_ns;
  int ready, draining;
  uint64_t requests_total, requests_failed, batches_total;
  double flops_total;
  uint64_t input_bytes_total, output_bytes_total;
  uint64_t graph_replays_total, graph_captures_total;
  gemmd_code_count_t *requests_by_code; /* n_requests_by_code entries */
  size_t n_requests_by_code;
  gemmd_latency_summary_t request_latency, queue_latency, batch_latency;
  double mean_batch_requests;
  uint32_t queue_depth, inflight_requests, shm_clients, weights;
  uint64_t weight_bytes, weight_budget_bytes;
  uint64_t device_memory_used_bytes, device_memory_total_bytes;
  int loading; /* start-up weights still loading: */
  uint64_t startup_files, startup_files_loaded, startup_weights_loaded;
} gemmd_server_stats_t;

int gemmd_client_get_stats(gemmd_client_t *c, gemmd_server_stats_t *stats, gemmd_status_t *status);
void gemmd_server_stats_free(gemmd_server_stats_t *stats);

/* The JSON of gemmd_client_get_stats_json, from a struct: one compact object, every field
 * present, in gemm.proto's order and names; uint64 as JSON numbers; NaN and infinities as
 * the strings "NaN", "Infinity", "-Infinity". 0, or RESOURCE_EXHAUSTED (out of memory). */
int gemmd_server_stats_json(const gemmd_server_stats_t *stats, char **json);

/* grpc.health.v1 Check for `service` ("" = the server): *serving = 1 when SERVING. */
int gemmd_client_health(gemmd_client_t *c, const char *service, int *serving,
                        gemmd_status_t *status);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_LIB_GEMMCLIENT_H_ */
