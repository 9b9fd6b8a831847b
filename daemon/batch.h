/* A batch: the requests one engine run serves, grouped into GEMM groups, and the plan
 * that lays them out as a parameter table over three arenas (kernels/group_table.h).
 *
 * The batcher forms it on the loop thread; gemmd_batch_plan fills the table and each
 * request's offsets; the engine stages A into its arenas (gemmd_batch_stage_a), runs the
 * table, and reports back; the loop answers the requests and frees the batch. */
#ifndef GEMMD_DAEMON_BATCH_H_
#define GEMMD_DAEMON_BATCH_H_

#include <stdint.h>

#include "daemon/metrics.h"
#include "daemon/request.h"
#include "kernels/group_table.h"

struct gemmd_batch_s {
  uint64_t id;
  uint32_t n_requests, n_groups;
  uint64_t rows; /* Σ M */
  int piece;     /* one piece of a large request (the batcher's pieces lane) */
  int slot_freed; /* released by done, before the loop had the batch back (engine.h) */
  int kernel_lt;  /* the engine ran it on cuBLASLt */

  /* Requests, grouped: group g owns requests[group_start[g] .. group_start[g+1]). */
  gemmd_request_t **requests;
  uint32_t *group_start;
  gemmd_weight_t **group_weight;
  gemmd_group_params_t *table; /* n_groups rows */

  /* Arena sizes from the plan. */
  uint64_t a_bytes, sa_count, d_bytes;
  double flops;                      /* Σ 2·m·n·k */
  uint64_t input_bytes, output_bytes; /* A bytes + scales in; D bytes out */

  /* The engine's outcome. status is a gRPC code for every request of the batch. */
  int status;
  char message[256];
  uint64_t formed_ns, compute_ns;
  uint64_t gemm_ns; /* of compute_ns, the GEMM kernels alone (0: the engine does not time them) */
  gemmd_batch_marks_t marks; /* its hand-offs, for gemmd_batch_stage_seconds_total */
  uint32_t graph_replays, graph_captures;
  int device_failed; /* the engine's device is gone: gemmd must stop (exit non-zero) */
  void *engine_data;
};

/* Room for n requests; NULL when out of memory. */
gemmd_batch_t *gemmd_batch_new(uint32_t n_requests);
void gemmd_batch_free(gemmd_batch_t *b);

/* Lays out the table and arenas. Needs requests grouped and their weights resolved.
 * Rows of A are row_align-byte multiples apart (lda; the engine's need: 1 on the CPU,
 * 16 for TMA). B addresses are the weights' host bytes; an engine that keeps its own
 * copies rewrites b_data / b_scales / ldb. Returns 0. */
int gemmd_batch_plan(gemmd_batch_t *b, uint32_t row_align);

/* Whether the engine should DMA this request's A straight from where the client put it
 * instead of copying it into the batch: A is FP8 in memory registered with the engine
 * (request.h a_pinned), dense at the batch's lda, and large enough
 * (GEMMD_DIRECT_A_MIN_BYTES) that one more DMA costs less than the copy. */
enum { GEMMD_DIRECT_A_MIN_BYTES = 256u << 10 };
int gemmd_batch_a_direct(const gemmd_batch_t *b, const gemmd_request_t *r);

/* Copies every request's 1×128 A scales, and its A rows (zero-padded to lda) unless they
 * go direct (gemmd_batch_a_direct), to their places in the arenas; requests with raw A
 * are left to the engine, and so are rows and scales in device memory (a_device), whose
 * rows are zeroed here for the engine's device copy to fill. */
void gemmd_batch_stage_a(const gemmd_batch_t *b, uint8_t *a_arena, float *sa_arena);

#endif /* GEMMD_DAEMON_BATCH_H_ */
