/* Internal: gemmd's C types <-> gemm.proto messages (protobuf-c), with the checks that
 * keep the client from reading outside the caller's buffers. No gRPC here. */
#ifndef GEMMD_CLIENT_LIB_WIRE_H_
#define GEMMD_CLIENT_LIB_WIRE_H_

#include <stddef.h>
#include <stdint.h>

#include "client/lib/gemmclient.h"
#include "gemmd/v1/gemm.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* INVALID_ARGUMENT with a message naming `what` ("a", "b", "weight") when op cannot be
 * read: unknown dtype or layout, ld < cols, NULL data or scales where bytes are needed. */
int gemmd_wire_check_operand(const gemmd_operand_t *op, const char *what, gemmd_status_t *status);

/* Packs any message into a malloc'd buffer (*buf, *len). */
int gemmd_wire_pack(const ProtobufCMessage *msg, uint8_t **buf, size_t *len,
                    gemmd_status_t *status);

/* A GemmRequest for `call`: exactly one of weight_id, weight_name, b; A (and an inline B)
 * serialized densely whatever their ld. */
int gemmd_wire_encode_gemm(const gemmd_gemm_call_t *call, uint8_t **buf, size_t *len,
                           gemmd_status_t *status);

/* A GemmResponse into *result (data malloc'd); INTERNAL when it is malformed. A GemmStream
 * answer with error_code set returns that code and error_message, request_id filled. */
int gemmd_wire_decode_gemm(const uint8_t *buf, size_t len, gemmd_gemm_result_t *result,
                           gemmd_status_t *status);

/* One RegisterWeightRequest: with `first`, name and w's header (rows, cols, dtype,
 * scale_layout) too; data and scales are this message's share (already dense). */
int gemmd_wire_encode_weight_chunk(const char *name, const gemmd_operand_t *w, int first,
                                   const uint8_t *data, size_t data_len, const float *scales,
                                   size_t scale_count, uint8_t **buf, size_t *len,
                                   gemmd_status_t *status);

void gemmd_wire_weight_info(const Gemmd__V1__WeightInfo *w, gemmd_weight_info_t *out);

/* Unpacks `desc` from buf; INTERNAL "cannot parse <name> (N bytes)" on failure. */
int gemmd_wire_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len,
                      ProtobufCMessage **msg, gemmd_status_t *status);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_LIB_WIRE_H_ */
