/* RegisterWeight: a weight streamed in chunks, from memory or from files, to every
 * endpoint. */
#include <stdlib.h>
#include <string.h>

#include "client/lib/chunk.h"
#include "client/lib/client_impl.h"
#include "client/lib/endpoints.h"
#include "client/lib/files.h"
#include "client/lib/rpc.h"
#include "client/lib/status.h"
#include "client/lib/wire.h"

/* This chunk's data, dense: straight from w when it is stored densely, else copied into
 * scratch (GEMMD_CLIENT_CHUNK_BYTES bytes). */
static const uint8_t *chunk_data(const gemmd_operand_t *w, const gemmd_chunk_t *ch,
                                 uint8_t *scratch) {
  const uint8_t *direct = gemmd_operand_dense_ptr(w, ch->data_off);
  if (direct != NULL || ch->data_len == 0) return direct;
  gemmd_operand_copy_dense(w, ch->data_off, ch->data_len, scratch);
  return scratch;
}

/* Sends every chunk; stops early (rc 0) when the server ends the stream, so that finish
 * reports the server's reason. */
static int send_chunks(gemmd_rpc_stream_t *s, const char *name, const gemmd_operand_t *w,
                       uint8_t *scratch, gemmd_status_t *status) {
  gemmd_chunker_t chunker;
  gemmd_chunk_t ch;
  gemmd_chunker_init(&chunker, gemmd_operand_dense_bytes(w),
                     gemmd_scale_count(w->scale_layout, w->rows, w->cols),
                     GEMMD_CLIENT_CHUNK_BYTES);
  for (int first = 1; gemmd_chunker_next(&chunker, &ch); first = 0) {
    uint8_t *buf;
    size_t len;
    const float *scales = ch.scale_count > 0 ? w->scales + ch.scale_off : NULL;
    const int rc =
        gemmd_wire_encode_weight_chunk(name, w, first, chunk_data(w, &ch, scratch), ch.data_len,
                                       scales, ch.scale_count, &buf, &len, status);
    if (rc != 0) return rc;
    if (gemmd_rpc_stream_send(s, buf, len) != 0) break;
  }
  return GEMMD_STATUS_OK;
}

static int stream_weight(gemmd_client_t *c, size_t ep, grpc_completion_queue *cq, const char *name,
                         const gemmd_operand_t *w, uint8_t *scratch, gemmd_weight_info_t *info,
                         gemmd_status_t *status) {
  gemmd_rpc_stream_t s;
  grpc_slice bytes;
  ProtobufCMessage *msg = NULL;
  int rc = gemmd_rpc_stream_open(&s, c->channels[ep], gemmd_client_auth(c), cq, GEMMD_METHOD_REGISTER_WEIGHT,
                                 gemmd_rpc_deadline(c->timeout_ms), status);
  if (rc != 0) return rc;
  rc = send_chunks(&s, name, w, scratch, status);
  if (rc != 0) {
    grpc_call_cancel(s.call, NULL);
    gemmd_status_t ignored;
    if (gemmd_rpc_stream_finish(&s, &bytes, &ignored) == 0) grpc_slice_unref(bytes);
    return rc;
  }
  rc = gemmd_rpc_stream_finish(&s, &bytes, status);
  if (rc != 0) return rc;
  rc = gemmd_wire_unpack(&gemmd__v1__weight_info__descriptor, GRPC_SLICE_START_PTR(bytes),
                         GRPC_SLICE_LENGTH(bytes), &msg, status);
  grpc_slice_unref(bytes);
  if (rc != 0) return rc;
  if (info != NULL) gemmd_wire_weight_info((const Gemmd__V1__WeightInfo *)msg, info);
  protobuf_c_message_free_unpacked(msg, NULL);
  return GEMMD_STATUS_OK;
}

/* On every endpoint (endpoints.h), all or none: when one refuses, the weight is
 * unregistered from those that took it, and the refusal names the endpoint. */
static int register_everywhere(gemmd_client_t *c, grpc_completion_queue *cq, const char *name,
                               const gemmd_operand_t *w, uint8_t *scratch, gemmd_weight_info_t *info,
                               gemmd_status_t *status) {
  if (c->n_channels == 1) return stream_weight(c, 0, cq, name, w, scratch, info, status);
  uint64_t ids[GEMMD_MAX_ENDPOINTS];
  gemmd_weight_info_t one, first;
  gemmd_status_t st;
  size_t ep = 0;
  int rc = 0;
  for (; ep < c->n_channels && rc == 0; ep++) {
    rc = stream_weight(c, ep, cq, name, w, scratch, ep == 0 ? &first : &one, &st);
    if (rc == 0) ids[ep] = ep == 0 ? first.weight_id : one.weight_id;
  }
  if (rc != 0) {
    gemmd_status_set(status, rc, "%s: %s", c->endpoints[ep - 1], st.message);
    for (size_t k = 0; k + 1 < ep; k++) {
      Gemmd__V1__UnregisterWeightRequest req = GEMMD__V1__UNREGISTER_WEIGHT_REQUEST__INIT;
      req.weight_case = GEMMD__V1__UNREGISTER_WEIGHT_REQUEST__WEIGHT_WEIGHT_ID;
      req.weight_id = ids[k];
      ProtobufCMessage *resp = NULL;
      gemmd_client_call_message_on(c, k, GEMMD_METHOD_UNREGISTER_WEIGHT, &req.base,
                                   &gemmd__v1__unregister_weight_response__descriptor, &resp, &st);
      if (resp != NULL) protobuf_c_message_free_unpacked(resp, NULL);
    }
    return rc;
  }
  if (gemmd_endpoint_ids_add(c, ids) != 0) {
    return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  }
  if (info != NULL) *info = first;
  return GEMMD_STATUS_OK;
}

int gemmd_client_register_weight(gemmd_client_t *c, const char *name, const gemmd_operand_t *w,
                                 gemmd_weight_info_t *info, gemmd_status_t *status) {
  if (info != NULL) memset(info, 0, sizeof *info);
  if (name == NULL) {
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT, "the weight has no name");
  }
  int rc = gemmd_wire_check_operand(w, "weight", status);
  if (rc != 0) return rc;
  if (c->shm) return gemmd_shm_register_weight(c->shm, name, w, info, status);
  uint8_t *scratch = w->ld != w->cols ? malloc(GEMMD_CLIENT_CHUNK_BYTES) : NULL;
  grpc_completion_queue *cq = gemmd_cq_pool_get(&c->cqs);
  if ((w->ld != w->cols && scratch == NULL) || cq == NULL) {
    rc = gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    rc = register_everywhere(c, cq, name, w, scratch, info, status);
  }
  if (cq != NULL) gemmd_cq_pool_put(&c->cqs, cq);
  free(scratch);
  if (rc == 0) gemmd_status_clear(status);
  return rc;
}

static int check_file_args(gemmd_dtype_t dtype, gemmd_scale_layout_t layout, uint32_t n, uint32_t k,
                           const char *scales_path, gemmd_status_t *status) {
  const int code = GEMMD_STATUS_INVALID_ARGUMENT;
  if (!gemmd_dtype_is_valid((int)dtype)) {
    return gemmd_status_set(status, code, "weight.dtype %d is not a DType", (int)dtype);
  }
  if (!gemmd_scale_layout_is_valid((int)layout)) {
    return gemmd_status_set(status, code, "weight.scale_layout %d is not a ScaleLayout",
                            (int)layout);
  }
  const size_t n_scales = gemmd_scale_count(layout, n, k);
  if (n_scales > 0 && scales_path == NULL) {
    return gemmd_status_set(status, code, "%s needs a scales file of %zu floats",
                            gemmd_scale_layout_name(layout), n_scales);
  }
  return GEMMD_STATUS_OK;
}

int gemmd_client_register_weight_file(gemmd_client_t *c, const char *name, uint32_t n, uint32_t k,
                                      gemmd_dtype_t dtype, const char *data_path,
                                      gemmd_scale_layout_t layout, const char *scales_path,
                                      gemmd_weight_info_t *info, gemmd_status_t *status) {
  gemmd_operand_t w = {n, k, k, dtype, NULL, layout, NULL};
  gemmd_file_map_t data, scales;
  memset(&data, 0, sizeof data);
  memset(&scales, 0, sizeof scales);
  if (info != NULL) memset(info, 0, sizeof *info);
  int rc = check_file_args(dtype, layout, n, k, scales_path, status);
  if (rc == 0) {
    rc = gemmd_file_map(data_path, gemmd_operand_dense_bytes(&w), "the weight's shape and dtype",
                        &data, status);
  }
  const size_t n_scales = gemmd_scale_count(layout, n, k);
  if (rc == 0 && n_scales > 0) {
    rc = gemmd_file_map(scales_path, (uint64_t)n_scales * sizeof(float), "the scale layout",
                        &scales, status);
  }
  if (rc == 0) {
    w.data = data.addr;
    w.scales = scales.addr;
    rc = gemmd_client_register_weight(c, name, &w, info, status);
  }
  gemmd_file_unmap(&scales);
  gemmd_file_unmap(&data);
  return rc;
}
