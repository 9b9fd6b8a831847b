/* gemmd types <-> gemm.proto messages. */
#include "client/lib/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/chunk.h"
#include "client/lib/status.h"

int gemmd_wire_check_operand(const gemmd_operand_t *op, const char *what, gemmd_status_t *status) {
  const int code = GEMMD_STATUS_INVALID_ARGUMENT;
  if (!gemmd_dtype_is_valid((int)op->dtype)) {
    return gemmd_status_set(status, code, "%s.dtype %d is not a DType", what, (int)op->dtype);
  }
  if (!gemmd_scale_layout_is_valid((int)op->scale_layout)) {
    return gemmd_status_set(status, code, "%s.scale_layout %d is not a ScaleLayout", what,
                            (int)op->scale_layout);
  }
  if (op->ld < op->cols) {
    return gemmd_status_set(status, code, "%s.ld %zu is less than %s.cols %u", what, op->ld, what,
                            op->cols);
  }
  if (op->data == NULL && gemmd_operand_dense_bytes(op) > 0) {
    return gemmd_status_set(status, code, "%s.data is NULL", what);
  }
  if (op->scales == NULL && gemmd_scale_count(op->scale_layout, op->rows, op->cols) > 0) {
    return gemmd_status_set(status, code, "%s.scales is NULL; %s needs %zu", what,
                            gemmd_scale_layout_name(op->scale_layout),
                            gemmd_scale_count(op->scale_layout, op->rows, op->cols));
  }
  return GEMMD_STATUS_OK;
}

int gemmd_wire_pack(const ProtobufCMessage *msg, uint8_t **buf, size_t *len,
                    gemmd_status_t *status) {
  const size_t n = protobuf_c_message_get_packed_size(msg);
  uint8_t *b = malloc(n > 0 ? n : 1);
  if (b == NULL) {
    return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED,
                            "out of memory for a %zu-byte %s", n, msg->descriptor->name);
  }
  *len = protobuf_c_message_pack(msg, b);
  *buf = b;
  return GEMMD_STATUS_OK;
}

int gemmd_wire_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len,
                      ProtobufCMessage **msg, gemmd_status_t *status) {
  *msg = protobuf_c_message_unpack(desc, NULL, len, buf);
  if (*msg == NULL) {
    return gemmd_status_set(status, GEMMD_STATUS_INTERNAL,
                            "cannot parse the server's %s (%zu bytes)", desc->name, len);
  }
  return GEMMD_STATUS_OK;
}

/* Fills m from op; *scratch receives a dense copy of the data when op is strided. */
static int matrix_from_operand(const gemmd_operand_t *op, Gemmd__V1__Matrix *m, uint8_t **scratch,
                               gemmd_status_t *status) {
  const uint64_t bytes = gemmd_operand_dense_bytes(op);
  const uint8_t *data = gemmd_operand_dense_ptr(op, 0);
  if (data == NULL && bytes > 0) {
    *scratch = malloc((size_t)bytes);
    if (*scratch == NULL) {
      return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED,
                              "out of memory for a %llu-byte operand copy",
                              (unsigned long long)bytes);
    }
    gemmd_operand_copy_dense(op, 0, (size_t)bytes, *scratch);
    data = *scratch;
  }
  m->rows = op->rows;
  m->cols = op->cols;
  m->dtype = (Gemmd__V1__DType)op->dtype;
  m->data.len = (size_t)bytes;
  m->data.data = (uint8_t *)data;
  m->scale_layout = (Gemmd__V1__ScaleLayout)op->scale_layout;
  m->n_scales = gemmd_scale_count(op->scale_layout, op->rows, op->cols);
  m->scales = (float *)op->scales;
  return GEMMD_STATUS_OK;
}

static int check_rhs(const gemmd_gemm_call_t *call, gemmd_status_t *status) {
  const int named = (call->weight_id != 0) + (call->weight_name != NULL) + (call->b != NULL);
  if (named != 1) {
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT,
                            "name B exactly once (weight_id, weight_name or b); got %d", named);
  }
  if (call->b != NULL) return gemmd_wire_check_operand(call->b, "b", status);
  return GEMMD_STATUS_OK;
}

int gemmd_wire_encode_gemm(const gemmd_gemm_call_t *call, uint8_t **buf, size_t *len,
                           gemmd_status_t *status) {
  if (call->a_region.region != 0 || call->a_scales_region.region != 0 || call->d_region.region != 0) {
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT,
                            "the call names regions (a_region, a_scales_region, d_region), which "
                            "only the shared-memory transport has");
  }
  int rc = check_rhs(call, status);
  if (rc == 0) rc = gemmd_wire_check_operand(&call->a, "a", status);
  if (rc != 0) return rc;
  Gemmd__V1__GemmRequest req = GEMMD__V1__GEMM_REQUEST__INIT;
  Gemmd__V1__Matrix a = GEMMD__V1__MATRIX__INIT, b = GEMMD__V1__MATRIX__INIT;
  uint8_t *a_copy = NULL, *b_copy = NULL;
  req.request_id = call->request_id;
  req.out_dtype = (Gemmd__V1__DType)call->out_dtype;
  req.a = &a;
  rc = matrix_from_operand(&call->a, &a, &a_copy, status);
  if (call->weight_id != 0) {
    req.rhs_case = GEMMD__V1__GEMM_REQUEST__RHS_WEIGHT_ID;
    req.weight_id = call->weight_id;
  } else if (call->weight_name != NULL) {
    req.rhs_case = GEMMD__V1__GEMM_REQUEST__RHS_WEIGHT_NAME;
    req.weight_name = (char *)call->weight_name;
  } else {
    req.rhs_case = GEMMD__V1__GEMM_REQUEST__RHS_B;
    req.b = &b;
    if (rc == 0) rc = matrix_from_operand(call->b, &b, &b_copy, status);
  }
  if (rc == 0) rc = gemmd_wire_pack(&req.base, buf, len, status);
  free(a_copy);
  free(b_copy);
  return rc;
}

static void copy_request_stats(const Gemmd__V1__RequestStats *s, gemmd_request_stats_t *out) {
  memset(out, 0, sizeof *out);
  if (s == NULL) return;
  out->queue_ns = s->queue_ns;
  out->compute_ns = s->compute_ns;
  out->total_ns = s->total_ns;
  out->batch_requests = s->batch_requests;
  out->batch_groups = s->batch_groups;
  out->batch_id = s->batch_id;
}

static int check_output(const Gemmd__V1__Matrix *d, gemmd_status_t *status) {
  if (d == NULL) {
    return gemmd_status_set(status, GEMMD_STATUS_INTERNAL, "the server's response has no d");
  }
  const size_t esz = gemmd_dtype_size((gemmd_dtype_t)d->dtype);
  const uint64_t want = (uint64_t)d->rows * d->cols * esz;
  if (esz == 0 || d->data.len != want) {
    return gemmd_status_set(status, GEMMD_STATUS_INTERNAL,
                            "the server's d has %zu bytes; %ux%u of %s needs %llu", d->data.len,
                            d->rows, d->cols, gemmd_dtype_name((gemmd_dtype_t)d->dtype),
                            (unsigned long long)want);
  }
  return GEMMD_STATUS_OK;
}

int gemmd_wire_decode_gemm(const uint8_t *buf, size_t len, gemmd_gemm_result_t *result,
                           gemmd_status_t *status) {
  ProtobufCMessage *msg = NULL;
  int rc = gemmd_wire_unpack(&gemmd__v1__gemm_response__descriptor, buf, len, &msg, status);
  if (rc != 0) return rc;
  const Gemmd__V1__GemmResponse *resp = (const Gemmd__V1__GemmResponse *)msg;
  if (resp->error_code != 0) { /* a GemmStream answer for a request the server refused */
    result->request_id = resp->request_id;
    rc = gemmd_status_set(status, resp->error_code, "%s",
                          resp->error_message != NULL && resp->error_message[0] != '\0'
                              ? resp->error_message
                              : gemmd_status_name(resp->error_code));
    protobuf_c_message_free_unpacked(msg, NULL);
    return rc;
  }
  rc = check_output(resp->d, status);
  if (rc == 0 && resp->d->data.len == 0) {
    result->data = malloc(1); /* an empty result still owns a buffer */
    if (result->data == NULL) rc = gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  } else if (rc == 0) {
    /* The unpacked message's own copy of D (protobuf-c's default allocator: malloc) becomes
     * the result's: no second copy, and no second allocation of the result's size. */
    result->data = resp->d->data.data;
    resp->d->data.data = NULL;
  }
  if (rc == 0) {
    result->data_bytes = resp->d->data.len;
    result->request_id = resp->request_id;
    result->rows = resp->d->rows;
    result->cols = resp->d->cols;
    result->dtype = (gemmd_dtype_t)resp->d->dtype;
    copy_request_stats(resp->stats, &result->stats);
  }
  protobuf_c_message_free_unpacked(msg, NULL);
  return rc;
}

int gemmd_wire_encode_weight_chunk(const char *name, const gemmd_operand_t *w, int first,
                                   const uint8_t *data, size_t data_len, const float *scales,
                                   size_t scale_count, uint8_t **buf, size_t *len,
                                   gemmd_status_t *status) {
  Gemmd__V1__RegisterWeightRequest req = GEMMD__V1__REGISTER_WEIGHT_REQUEST__INIT;
  Gemmd__V1__Matrix m = GEMMD__V1__MATRIX__INIT;
  req.weight = &m;
  if (first) {
    req.name = (char *)name;
    m.rows = w->rows;
    m.cols = w->cols;
    m.dtype = (Gemmd__V1__DType)w->dtype;
    m.scale_layout = (Gemmd__V1__ScaleLayout)w->scale_layout;
  }
  m.data.data = (uint8_t *)data;
  m.data.len = data_len;
  m.scales = (float *)scales;
  m.n_scales = scale_count;
  return gemmd_wire_pack(&req.base, buf, len, status);
}

void gemmd_wire_weight_info(const Gemmd__V1__WeightInfo *w, gemmd_weight_info_t *out) {
  memset(out, 0, sizeof *out);
  out->weight_id = w->weight_id;
  if (w->name != NULL) snprintf(out->name, sizeof out->name, "%s", w->name);
  out->n = w->n;
  out->k = w->k;
  out->dtype = (gemmd_dtype_t)w->dtype;
  out->scale_layout = (gemmd_scale_layout_t)w->scale_layout;
  out->bytes = w->bytes;
  if (w->source != NULL) snprintf(out->source, sizeof out->source, "%s", w->source);
}
