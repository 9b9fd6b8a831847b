/* From decoded gRPC messages to gemmd's requests and weights, apart from gRPC itself:
 * rpc_gemm.c and rpc_weights.c run these on the completion-queue threads, the fuzzers
 * (fuzz/) alone. Pure: they read the message and their arguments only. Each returns a gRPC
 * code, with the message in msg. */
#ifndef GEMMD_DAEMON_RPC_DECODE_H_
#define GEMMD_DAEMON_RPC_DECODE_H_

#include <stddef.h>
#include <stdint.h>

#include "daemon/register_wire.h"
#include "daemon/request.h"
#include "daemon/validate.h"
#include "daemon/weight.h"
#include "gemmd/v1/gemm.pb-c.h"

/* Fills r from a GemmRequest (which must outlive r): builds and validates it
 * (request_build.h; a named weight is left for the loop to resolve) and prepares its
 * operands (quantizes_a: the engine's, see engine.h). gemmd_request_release frees what
 * it made, whatever the outcome. */
int gemmd_rpc_decode_gemm(const Gemmd__V1__GemmRequest *m, const gemmd_limits_t *lim,
                          int quantizes_a, gemmd_request_t *r, char *msg, size_t n);

/* A weight arriving as a RegisterWeight stream: the first message names it and carries
 * the Matrix header; every message may carry data and scales, appended in order. Memory
 * follows the data that came, never the size the header claims. Zero it to start. */
typedef struct gemmd_weight_upload_s {
  int started; /* the first message was taken */
  char name[256];
  uint32_t rows, cols;
  gemmd_dtype_t dtype;
  gemmd_scale_layout_t layout;
  uint8_t *data;
  size_t data_len, data_want, data_cap;
  float *scales;
  size_t n_scales, scales_want, scales_cap; /* scales_cap in bytes */
} gemmd_weight_upload_t;

/* The first message: its name and header, checked as if the weight were complete (sizes
 * and layouts are refused before any data), against the limits and the whole budget
 * (weight_memory_bytes). Then, when given, admit(admit_ctx, name, stored, msg, n) may refuse
 * it with a code of its own (stored: the bytes the weight will hold); else the upload
 * starts. Does not append the message's data. */
typedef int (*gemmd_upload_admit_fn)(void *ctx, const char *name, uint64_t stored, char *msg, size_t n);
int gemmd_weight_upload_start(gemmd_weight_upload_t *up, const Gemmd__V1__RegisterWeightRequest *m,
                              const gemmd_limits_t *lim, uint64_t weight_memory_bytes,
                              gemmd_upload_admit_fn admit, void *admit_ctx, char *msg, size_t n);

/* Appends one message's data and scales (any message, the first included); refused when
 * they run past the header's size. The data is `data`, where gemmd_register_split found it
 * in the message's pieces (register_wire.h; NULL: none): it is copied once, from there into
 * the weight's buffer. m is the rest of the message, unpacked. */
int gemmd_weight_upload_append(gemmd_weight_upload_t *up, const Gemmd__V1__RegisterWeightRequest *m,
                               const gemmd_piece_range_t *data, char *msg, size_t n);

/* The stream ended: the weight (refs 1, name set, id 0), once every byte and scale came.
 * FP8 bytes are taken over by the weight; other dtypes are quantized here. */
int gemmd_weight_upload_finish(gemmd_weight_upload_t *up, const gemmd_weight_quantizer_t *q, gemmd_weight_t **out,
                               char *msg, size_t n);

/* Frees what the upload holds (not a weight it made). */
void gemmd_weight_upload_free(gemmd_weight_upload_t *up);

#endif /* GEMMD_DAEMON_RPC_DECODE_H_ */
