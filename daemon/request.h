/* One GEMM request on its way through gemmd.
 *
 * A transport (gRPC, shared memory) decodes the caller's message on its own thread, has
 * request_build.h validate it, fill one of these and prepare its operands (inline B made
 * a weight, A normalized by gemmd_request_prepare_a), then hands it to the loop
 * (gemmd_server_submit). From there the loop owns it: admission, the batcher's queue, a
 * batch on the engine, and finally exactly one call of `respond`, on the loop thread,
 * with status set and, for OK, `d` pointing at the result. After `respond` returns the
 * request's memory is the transport's again; `d` stays valid only during the call.
 */
#ifndef GEMMD_DAEMON_REQUEST_H_
#define GEMMD_DAEMON_REQUEST_H_

#include <stddef.h>
#include <stdint.h>

#include "daemon/metrics.h"
#include "daemon/weight.h"
#include "kernels/operand.h"

typedef struct gemmd_request_s gemmd_request_t;
typedef struct gemmd_batch_s gemmd_batch_t;

struct gemmd_request_s {
  gemmd_request_t *next; /* the batcher's queue; a batch's list */

  /* Who asked, and how to answer. */
  uint64_t request_id; /* the caller's tag, echoed */
  gemmd_transport_t transport;
  uint64_t conn_id; /* one per client connection: the in-flight limit counts by it */
  void (*respond)(gemmd_request_t *req);
  void *respond_ctx;
  /* Optional: answers the caller from the engine's thread the moment its batch completes
   * OK (status, compute_ns, batch_* and d set), ahead of the loop; respond still runs
   * later on the loop, for the bookkeeping, with answered_early set. Only for transports
   * whose answer is safe off the loop (shared memory: a locked CQ publish; gRPC: a unary
   * call's send started, a GemmStream answer queued under its stream's mutex). */
  void (*answer_early)(gemmd_request_t *req);
  int answered_early;
  /* Optional, with answer_early: wakes the caller if it sleeps on its answer. The engine's
   * thread publishes every early answer of a batch first and wakes afterwards, so that a
   * client polling for its answer never waits behind another client's wake-up. */
  void (*wake_early)(gemmd_request_t *req);

  /* Times, CLOCK_MONOTONIC ns. deadline_ns = 0: none. */
  uint64_t accepted_ns, deadline_ns, dispatched_ns, done_ns;

  /* A, normalized: FP8 m×k row-major with 1×128 scales. */
  uint32_t m, n, k;
  gemmd_dtype_t a_dtype;
  const uint8_t *a;
  const float *a_scales;
  int a_pinned; /* a lies in memory registered with the engine: a DMA may read it */
  /* a and a_scales (or a_raw) are device memory of the engine (a client's region, shm
   * protocol version 2): never read on the host, copied on the device. */
  int a_device;
  uint8_t *a_owned; /* storage made by normalization, freed by gemmd_request_release */
  float *a_scales_owned;
  /* Or, for an engine that quantizes on the device: A as sent (BF16/FP16/FP32, no
   * scales, dense m×k); then a and a_scales are NULL and a_dtype is the FP8 target. */
  const void *a_raw;
  gemmd_dtype_t a_raw_dtype;
  gemmd_dtype_t out_dtype; /* BF16, FP16 or FP32 */

  /* B: exactly one of the three, as the caller named it. */
  uint64_t weight_id;
  char weight_name[256];
  gemmd_weight_t *inline_b; /* owned until resolved */

  /* Set by the loop. */
  gemmd_weight_t *weight; /* resolved; holds a reference until respond */
  int admitted;           /* counted in the in-flight and per-connection totals */
  /* A large request runs as pieces of its rows (server.c, --split-flops): each piece is a
   * request of the loop's own with parent set, rows [piece_row, piece_row + m) of the
   * parent's A and D, no reference or accounting of its own. The parent counts the
   * pieces still out and, without d_dest, gathers their D in d_owned. */
  gemmd_request_t *parent;
  uint32_t piece_row;
  uint32_t pieces_left;
  uint8_t *d_owned;

  /* Set by the batch plan: where this request's rows live in the batch's arenas. */
  uint32_t group;
  uint64_t a_offset, sa_offset, d_offset;

  /* The answer. */
  int status;         /* gRPC code */
  char message[512];  /* for status != OK */
  uint8_t *d_dest;    /* when set, the engine copies D here (a shared-memory arena) */
  int d_dest_pinned;  /* d_dest is registered with the engine: a DMA may write it */
  int d_device;       /* d_dest is device memory of the engine: D is copied there on the device */
  const uint8_t *d;   /* m×n of out_dtype, valid during respond */
  size_t d_bytes;
  uint64_t batch_id, compute_ns;
  uint32_t batch_requests, batch_groups;
};

/* Zeroes the request. */
void gemmd_request_init(gemmd_request_t *r);

/* Normalizes a validated A operand into the request: FP8 keeps its bytes (a points into
 * the caller's storage, which must outlive the request) and gets 1×128 scales expanded
 * from its layout; BF16/FP16/FP32 are quantized to E4M3 with 1×128 scales (docs/api.md §1) —
 * or, when raw_ok (the engine quantizes on the device) and A is dense and unscaled, kept
 * as sent in a_raw. Returns 0 or GEMMD_ENOMEM. */
int gemmd_request_prepare_a(gemmd_request_t *r, const gemmd_operand_t *a, int raw_ok);

/* Whether gemmd_request_prepare_a will quantize A on the calling thread: work in
 * proportion to A, which a transport keeps off the loop. */
int gemmd_request_a_quantizes(const gemmd_operand_t *a, int raw_ok);

/* Frees what normalization allocated and an unresolved inline B. */
void gemmd_request_release(gemmd_request_t *r);

/* Sets status and a formatted message. */
void gemmd_request_fail(gemmd_request_t *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* GEMMD_DAEMON_REQUEST_H_ */
