/* The fake GemmService. */
#include "client/testing/fake_service.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemmd/v1/gemm.pb-c.h"
#include "grpc/health/v1/health.pb-c.h"
#include "kernels/quantize.h"
#include "kernels/ref_gemm.h"

#define MAX_WEIGHTS 64

typedef struct fake_weight_s {
  uint64_t id;
  char name[256];
  gemmd_operand_t op; /* data and scales owned */
} fake_weight_t;

struct fake_service_s {
  pthread_mutex_t mu;
  fake_weight_t weights[MAX_WEIGHTS];
  size_t n_weights;
  uint64_t next_id, batches, requests, register_messages;
};

fake_service_t *fake_service_create(void) {
  fake_service_t *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  pthread_mutex_init(&s->mu, NULL);
  s->next_id = 1;
  return s;
}

static void free_weight(fake_weight_t *w) {
  free((void *)w->op.data);
  free((void *)w->op.scales);
  memset(w, 0, sizeof *w);
}

void fake_service_destroy(fake_service_t *s) {
  if (s == NULL) return;
  for (size_t i = 0; i < s->n_weights; i++) free_weight(&s->weights[i]);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

size_t fake_service_register_messages(fake_service_t *s) {
  pthread_mutex_lock(&s->mu);
  const size_t n = s->register_messages;
  pthread_mutex_unlock(&s->mu);
  return n;
}

static void fail(fake_reply_t *r, grpc_status_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(fake_reply_t *r, grpc_status_code code, const char *fmt, ...) {
  va_list ap;
  r->code = code;
  va_start(ap, fmt);
  vsnprintf(r->message, sizeof r->message, fmt, ap);
  va_end(ap);
}

static void reply(fake_reply_t *r, const ProtobufCMessage *m) {
  r->body_len = protobuf_c_message_get_packed_size(m);
  r->body = malloc(r->body_len + 1);
  protobuf_c_message_pack(m, r->body);
  r->code = GRPC_STATUS_OK;
}

static ProtobufCMessage *unpack(const ProtobufCMessageDescriptor *d, grpc_slice s) {
  return protobuf_c_message_unpack(d, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
}

/* A view of a Matrix; INVALID_ARGUMENT when its sizes disagree. */
static int operand_of(const Gemmd__V1__Matrix *m, const char *what, gemmd_operand_t *op,
                      fake_reply_t *r) {
  const size_t esz = gemmd_dtype_size((gemmd_dtype_t)m->dtype);
  const size_t ns = gemmd_scale_count((gemmd_scale_layout_t)m->scale_layout, m->rows, m->cols);
  if (esz == 0 || m->rows == 0 || m->cols == 0) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "%s: bad dtype or shape", what);
    return -1;
  }
  if (m->data.len != (size_t)m->rows * m->cols * esz || m->n_scales != ns) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "%s: %zu data bytes and %zu scales for %ux%u", what,
         m->data.len, m->n_scales, m->rows, m->cols);
    return -1;
  }
  *op = (gemmd_operand_t){m->rows,
                          m->cols,
                          m->cols,
                          (gemmd_dtype_t)m->dtype,
                          m->data.data,
                          (gemmd_scale_layout_t)m->scale_layout,
                          ns ? m->scales : NULL};
  return 0;
}

static fake_weight_t *find(fake_service_t *s, uint64_t id, const char *name) {
  for (size_t i = 0; i < s->n_weights; i++) {
    if ((id != 0 && s->weights[i].id == id) || (id == 0 && strcmp(s->weights[i].name, name) == 0))
      return &s->weights[i];
  }
  return NULL;
}

/* What the service multiplies (docs/api.md §1): FP8 as sent, other dtypes quantized to E4M3
 * with `layout`; *owned is the quantized copy (free it). */
static gemmd_operand_t as_served(const gemmd_operand_t *op, gemmd_scale_layout_t layout,
                                 void **owned) {
  *owned = NULL;
  if (gemmd_dtype_is_fp8(op->dtype)) return *op;
  const size_t data_bytes = ((size_t)op->rows * op->cols + 15) & ~(size_t)15;
  uint8_t *q =
      malloc(data_bytes + sizeof(float) * (gemmd_scale_count(layout, op->rows, op->cols) + 1));
  float *scales = (float *)(q + data_bytes);
  gemmd_quantize(op, GEMMD_DTYPE_FP8_E4M3, layout, q, scales);
  *owned = q;
  return (gemmd_operand_t){op->rows, op->cols, op->cols, GEMMD_DTYPE_FP8_E4M3, q, layout, scales};
}

static int compute(const gemmd_operand_t *a_in, const gemmd_operand_t *b_in, gemmd_dtype_t out,
                   Gemmd__V1__Matrix *d, fake_reply_t *r) {
  if (a_in->cols != b_in->cols) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "a.cols %u != b.cols %u", a_in->cols, b_in->cols);
    return -1;
  }
  void *qa, *qb;
  const gemmd_operand_t a = as_served(a_in, GEMMD_SCALE_BLOCK_1X128, &qa);
  const gemmd_operand_t b = as_served(b_in, GEMMD_SCALE_BLOCK_128X128, &qb);
  const size_t n = (size_t)a.rows * b.rows;
  double *ref = malloc(n * sizeof *ref);
  float *row = malloc(n * sizeof *row);
  d->data.data = malloc(n * gemmd_dtype_size(out) + 1);
  gemmd_ref_gemm_f64(&a, &b, ref);
  for (size_t i = 0; i < n; i++) row[i] = (float)ref[i];
  gemmd_encode_row(out, row, n, d->data.data);
  free(ref);
  free(row);
  free(qa);
  free(qb);
  d->rows = a.rows;
  d->cols = b.rows;
  d->dtype = (Gemmd__V1__DType)out;
  d->data.len = n * gemmd_dtype_size(out);
  return 0;
}

static void gemm_locked(fake_service_t *s, const Gemmd__V1__GemmRequest *q, fake_reply_t *r) {
  gemmd_operand_t a, b;
  const gemmd_operand_t *bp = &b;
  if (q->a == NULL || operand_of(q->a, "a", &a, r) != 0) {
    if (q->a == NULL) fail(r, GRPC_STATUS_INVALID_ARGUMENT, "no a");
    return;
  }
  if (q->rhs_case == GEMMD__V1__GEMM_REQUEST__RHS_B) {
    if (operand_of(q->b, "b", &b, r) != 0) return;
  } else {
    const int by_id = q->rhs_case == GEMMD__V1__GEMM_REQUEST__RHS_WEIGHT_ID;
    const fake_weight_t *w = find(s, by_id ? q->weight_id : 0, by_id ? "" : q->weight_name);
    if (w == NULL) {
      if (by_id)
        fail(r, GRPC_STATUS_NOT_FOUND, "no weight with id %llu", (unsigned long long)q->weight_id);
      else
        fail(r, GRPC_STATUS_NOT_FOUND, "no weight named '%s'", q->weight_name);
      return;
    }
    bp = &w->op;
  }
  const gemmd_dtype_t out = q->out_dtype ? (gemmd_dtype_t)q->out_dtype : GEMMD_DTYPE_BF16;
  Gemmd__V1__Matrix d = GEMMD__V1__MATRIX__INIT;
  Gemmd__V1__RequestStats st = GEMMD__V1__REQUEST_STATS__INIT;
  Gemmd__V1__GemmResponse resp = GEMMD__V1__GEMM_RESPONSE__INIT;
  if (compute(&a, bp, out, &d, r) != 0) return;
  st.queue_ns = 1000;
  st.compute_ns = 2000;
  st.total_ns = 3000;
  st.batch_requests = 1;
  st.batch_groups = 1;
  st.batch_id = ++s->batches;
  resp.request_id = q->request_id;
  resp.d = &d;
  resp.stats = &st;
  reply(r, &resp.base);
  free(d.data.data);
}

static void gemm(fake_service_t *s, grpc_slice msg, fake_reply_t *r) {
  Gemmd__V1__GemmRequest *q =
      (Gemmd__V1__GemmRequest *)unpack(&gemmd__v1__gemm_request__descriptor, msg);
  if (q == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "cannot parse GemmRequest");
    return;
  }
  pthread_mutex_lock(&s->mu);
  s->requests++;
  gemm_locked(s, q, r);
  pthread_mutex_unlock(&s->mu);
  gemmd__v1__gemm_request__free_unpacked(q, NULL);
}

/* Appends one RegisterWeight message's data and scales to w. */
static void append(fake_weight_t *w, const Gemmd__V1__Matrix *m, size_t *data_len,
                   size_t *n_scales) {
  if (m == NULL) return;
  uint8_t *d = realloc((void *)w->op.data, *data_len + m->data.len + 1);
  float *sc = realloc((void *)w->op.scales, (*n_scales + m->n_scales + 1) * sizeof(float));
  if (d == NULL || sc == NULL) abort(); /* a test server: out of memory ends the test */
  if (m->data.len > 0) memcpy(d + *data_len, m->data.data, m->data.len);
  if (m->n_scales > 0) memcpy(sc + *n_scales, m->scales, m->n_scales * sizeof(float));
  w->op.data = d;
  w->op.scales = sc;
  *data_len += m->data.len;
  *n_scales += m->n_scales;
}

static int assemble(const grpc_slice *msgs, size_t n, fake_weight_t *w, fake_reply_t *r) {
  size_t data_len = 0, n_scales = 0;
  for (size_t i = 0; i < n; i++) {
    Gemmd__V1__RegisterWeightRequest *q = (Gemmd__V1__RegisterWeightRequest *)unpack(
        &gemmd__v1__register_weight_request__descriptor, msgs[i]);
    if (q == NULL) {
      fail(r, GRPC_STATUS_INVALID_ARGUMENT, "cannot parse RegisterWeightRequest");
      return -1;
    }
    if (i == 0 && q->weight != NULL) {
      snprintf(w->name, sizeof w->name, "%s", q->name);
      w->op = (gemmd_operand_t){q->weight->rows,
                                q->weight->cols,
                                q->weight->cols,
                                (gemmd_dtype_t)q->weight->dtype,
                                NULL,
                                (gemmd_scale_layout_t)q->weight->scale_layout,
                                NULL};
    } else if (q->name[0] != '\0' || q->weight == NULL || q->weight->rows != 0) {
      fail(r, GRPC_STATUS_INVALID_ARGUMENT, "message %zu repeats the header", i);
    }
    append(w, q->weight, &data_len, &n_scales);
    gemmd__v1__register_weight_request__free_unpacked(q, NULL);
  }
  if (r->code != GRPC_STATUS_OK) return -1;
  const Gemmd__V1__Matrix m = {PROTOBUF_C_MESSAGE_INIT(&gemmd__v1__matrix__descriptor),
                               w->op.rows,
                               w->op.cols,
                               (Gemmd__V1__DType)w->op.dtype,
                               {data_len, (uint8_t *)w->op.data},
                               (Gemmd__V1__ScaleLayout)w->op.scale_layout,
                               n_scales,
                               (float *)w->op.scales};
  gemmd_operand_t check;
  return operand_of(&m, "weight", &check, r);
}

static void register_weight(fake_service_t *s, const grpc_slice *msgs, size_t n, fake_reply_t *r) {
  fake_weight_t w;
  memset(&w, 0, sizeof w);
  pthread_mutex_lock(&s->mu);
  s->register_messages += n;
  if (assemble(msgs, n, &w, r) != 0) {
    free_weight(&w);
  } else if (find(s, 0, w.name) != NULL) {
    fail(r, GRPC_STATUS_ALREADY_EXISTS, "a weight named '%s' exists", w.name);
    free_weight(&w);
  } else if (s->n_weights == MAX_WEIGHTS) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "too many weights");
    free_weight(&w);
  } else {
    w.id = s->next_id++;
    s->weights[s->n_weights++] = w;
    Gemmd__V1__WeightInfo info = GEMMD__V1__WEIGHT_INFO__INIT;
    info.weight_id = w.id;
    info.name = w.name;
    info.n = w.op.rows;
    info.k = w.op.cols;
    info.dtype = (Gemmd__V1__DType)w.op.dtype;
    info.scale_layout = (Gemmd__V1__ScaleLayout)w.op.scale_layout;
    info.bytes = (uint64_t)w.op.rows * w.op.cols * gemmd_dtype_size(w.op.dtype);
    info.source = (char *)"registered";
    reply(r, &info.base);
  }
  pthread_mutex_unlock(&s->mu);
}

static void unregister_weight(fake_service_t *s, grpc_slice msg, fake_reply_t *r) {
  Gemmd__V1__UnregisterWeightRequest *q = (Gemmd__V1__UnregisterWeightRequest *)unpack(
      &gemmd__v1__unregister_weight_request__descriptor, msg);
  if (q == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "cannot parse");
    return;
  }
  pthread_mutex_lock(&s->mu);
  const int by_id = q->weight_case == GEMMD__V1__UNREGISTER_WEIGHT_REQUEST__WEIGHT_WEIGHT_ID;
  fake_weight_t *w = find(s, by_id ? q->weight_id : 0, by_id ? "" : q->name ? q->name : "");
  if (w == NULL) {
    fail(r, GRPC_STATUS_NOT_FOUND, "no such weight");
  } else {
    free_weight(w);
    *w = s->weights[--s->n_weights];
    Gemmd__V1__UnregisterWeightResponse resp = GEMMD__V1__UNREGISTER_WEIGHT_RESPONSE__INIT;
    reply(r, &resp.base);
  }
  pthread_mutex_unlock(&s->mu);
  gemmd__v1__unregister_weight_request__free_unpacked(q, NULL);
}

static void list_weights(fake_service_t *s, fake_reply_t *r) {
  Gemmd__V1__WeightInfo infos[MAX_WEIGHTS], *ptrs[MAX_WEIGHTS];
  Gemmd__V1__ListWeightsResponse resp = GEMMD__V1__LIST_WEIGHTS_RESPONSE__INIT;
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->n_weights; i++) {
    const fake_weight_t *w = &s->weights[i];
    gemmd__v1__weight_info__init(&infos[i]);
    infos[i].weight_id = w->id;
    infos[i].name = (char *)w->name;
    infos[i].n = w->op.rows;
    infos[i].k = w->op.cols;
    infos[i].dtype = (Gemmd__V1__DType)w->op.dtype;
    infos[i].scale_layout = (Gemmd__V1__ScaleLayout)w->op.scale_layout;
    infos[i].bytes = (uint64_t)w->op.rows * w->op.cols * gemmd_dtype_size(w->op.dtype);
    infos[i].source = (char *)"registered";
    ptrs[i] = &infos[i];
  }
  resp.n_weights = s->n_weights;
  resp.weights = ptrs;
  reply(r, &resp.base);
  pthread_mutex_unlock(&s->mu);
}

static void get_stats(fake_service_t *s, fake_reply_t *r) {
  Gemmd__V1__ServerStats st = GEMMD__V1__SERVER_STATS__INIT;
  Gemmd__V1__LatencySummary lat = GEMMD__V1__LATENCY_SUMMARY__INIT;
  lat.count = 1;
  lat.p50_us = 3;
  st.version = "fake";
  st.backend = "cpu";
  st.device = "fake \"device\"";
  st.gemm_kernel = "ref_gemm_f64";
  st.uptime_ns = 3723000000000ull;
  st.ready = 1;
  st.request_latency = &lat;
  pthread_mutex_lock(&s->mu);
  st.requests_total = s->requests;
  st.batches_total = s->batches;
  st.weights = (uint32_t)s->n_weights;
  reply(r, &st.base);
  pthread_mutex_unlock(&s->mu);
}

static void health(grpc_slice msg, fake_reply_t *r) {
  Grpc__Health__V1__HealthCheckRequest *q = (Grpc__Health__V1__HealthCheckRequest *)unpack(
      &grpc__health__v1__health_check_request__descriptor, msg);
  if (q == NULL) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "cannot parse");
    return;
  }
  if (q->service[0] != '\0' && strcmp(q->service, "gemmd.v1.GemmService") != 0) {
    fail(r, GRPC_STATUS_NOT_FOUND, "unknown service '%s'", q->service);
  } else {
    Grpc__Health__V1__HealthCheckResponse resp = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    resp.status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
    reply(r, &resp.base);
  }
  grpc__health__v1__health_check_request__free_unpacked(q, NULL);
}

void fake_service_handle(fake_service_t *s, const char *method, const grpc_slice *msgs, size_t n,
                         fake_reply_t *r) {
  memset(r, 0, sizeof *r);
  r->code = GRPC_STATUS_OK;
  if (strcmp(method, "/gemmd.v1.GemmService/RegisterWeight") == 0) {
    register_weight(s, msgs, n, r);
  } else if (n != 1) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "%zu messages for a unary call", n);
  } else if (strcmp(method, "/gemmd.v1.GemmService/Gemm") == 0) {
    gemm(s, msgs[0], r);
  } else if (strcmp(method, "/gemmd.v1.GemmService/UnregisterWeight") == 0) {
    unregister_weight(s, msgs[0], r);
  } else if (strcmp(method, "/gemmd.v1.GemmService/ListWeights") == 0) {
    list_weights(s, r);
  } else if (strcmp(method, "/gemmd.v1.GemmService/GetStats") == 0) {
    get_stats(s, r);
  } else if (strcmp(method, "/grpc.health.v1.Health/Check") == 0) {
    health(msgs[0], r);
  } else {
    fail(r, GRPC_STATUS_UNIMPLEMENTED, "no method %s", method);
  }
}
