/* gRPC RegisterWeight (client streaming), UnregisterWeight and ListWeights.
 *
 * RegisterWeight: the first message names the weight and carries the Matrix header;
 * every message may carry data and scales, appended in order. The CQ thread assembles
 * and checks the bytes as they come (a stream that overruns the header's size is stopped
 * at once), quantizes BF16/FP16/FP32 weights to E4M3 128×128 when the stream ends, and
 * hands the weight to the loop, which registers it and answers. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/rpc_internal.h"
#include "daemon/status.h"
#include "daemon/validate.h"
#include "kernels/errors.h"


static uint8_t *pack_info(const gemmd_weight_t *w, size_t *len) {
  Gemmd__V1__WeightInfo info = GEMMD__V1__WEIGHT_INFO__INIT;
  info.weight_id = w->id;
  info.name = w->name;
  info.n = w->n;
  info.k = w->k;
  info.dtype = (Gemmd__V1__DType)w->dtype;
  info.scale_layout = (Gemmd__V1__ScaleLayout)w->scale_layout;
  info.bytes = w->bytes;
  *len = gemmd__v1__weight_info__get_packed_size(&info);
  uint8_t *buf = malloc(*len + 1);
  if (buf) gemmd__v1__weight_info__pack(&info, buf);
  return buf;
}

/* ---- RegisterWeight ------------------------------------------------------------------- */

typedef struct {
  rpc_call_t base;
  rpc_tag_t on_recv;
  grpc_byte_buffer *recv_buf;
  int started, finished; /* header seen; status sent */
  int counted;           /* holds one of --max-registrations */
  char name[256];
  uint32_t rows, cols;
  gemmd_dtype_t dtype;
  gemmd_scale_layout_t layout;
  uint8_t *data;
  size_t data_len, data_want, data_cap;
  float *scales;
  size_t n_scales, scales_want, scales_cap; /* scales_cap in bytes */
} reg_call_t;

size_t rpc_register_call_size(void) { return sizeof(reg_call_t); }

static void reg_cleanup(rpc_call_t *c) {
  reg_call_t *r = (reg_call_t *)c;
  if (r->counted) atomic_fetch_sub(&c->rpc->registrations, 1);
  free(r->data);
  free(r->scales);
  if (r->recv_buf) grpc_byte_buffer_destroy(r->recv_buf);
}

static void reg_fail(reg_call_t *r, int code, const char *msg) {
  if (r->finished) return;
  r->finished = 1;
  rpc_finish(&r->base, NULL, 0, code, msg);
}

/* Loop thread: the registry's answer. */
static void reg_done(void *ctx, int code, const char *message, const gemmd_weight_t *w) {
  reg_call_t *r = ctx;
  r->finished = 1;
  if (code == GEMMD_CODE_OK) {
    size_t len;
    uint8_t *buf = pack_info(w, &len);
    rpc_finish(&r->base, buf, len, buf ? GEMMD_CODE_OK : GEMMD_CODE_RESOURCE_EXHAUSTED, buf ? "" : "out of memory");
  } else {
    rpc_finish(&r->base, NULL, 0, code, message);
  }
  rpc_call_unref(&r->base);
}

typedef struct {
  reg_call_t *r;
  gemmd_weight_t *w;
} reg_post_t;

static void reg_submit(gemmd_server_t *srv, void *arg) {
  reg_post_t *p = arg;
  gemmd_server_register_weight(srv, p->w, reg_done, p->r);
  free(p);
}

/* The whole weight is here: check it is complete, make the weight, post it. */
static void reg_complete(reg_call_t *r) {
  char msg[512];
  if (!r->started) {
    reg_fail(r, GEMMD_CODE_INVALID_ARGUMENT, "the stream ended before any RegisterWeightRequest");
    return;
  }
  if (r->data_len != r->data_want || r->n_scales != r->scales_want) {
    snprintf(msg, sizeof msg,
             "the stream ended after %zu of %zu weight.data bytes and %zu of %zu weight.scales",
             r->data_len, r->data_want, r->n_scales, r->scales_want);
    reg_fail(r, GEMMD_CODE_INVALID_ARGUMENT, msg);
    return;
  }
  const gemmd_operand_t op = {r->rows,  r->cols, r->cols, r->dtype, r->data,
                              r->layout, r->scales_want ? r->scales : NULL};
  gemmd_weight_t *w;
  /* FP8 bytes are taken over by the weight; other dtypes are quantized here. */
  const int fp8 = gemmd_dtype_is_fp8(r->dtype);
  const int rc = gemmd_weight_from_operand(&op, NULL, NULL, &w);
  if (rc != GEMMD_OK) {
    snprintf(msg, sizeof msg, "cannot prepare the weight: %s", gemmd_strerror(rc));
    reg_fail(r, GEMMD_CODE_RESOURCE_EXHAUSTED, msg);
    return;
  }
  if (fp8) {
    w->owned_data = r->data;
    w->owned_scales = r->scales;
    r->data = NULL;
    r->scales = NULL;
  }
  w->name = strdup(r->name);
  reg_post_t *p = malloc(sizeof *p);
  if (w->name == NULL || p == NULL) {
    free(p);
    gemmd_weight_free(w);
    reg_fail(r, GEMMD_CODE_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  p->r = r;
  p->w = w;
  rpc_call_ref(&r->base);
  gemmd_server_post(r->base.rpc->srv, reg_submit, p);
}

/* First message: name and header. Returns a gRPC code. */
static int reg_start(reg_call_t *r, const Gemmd__V1__RegisterWeightRequest *m, char *msg,
                     size_t n) {
  const gemmd_rpc_t *rpc = r->base.rpc;
  if (m->name == NULL || m->name[0] == '\0' || strlen(m->name) >= sizeof r->name) {
    snprintf(msg, n, "name must be 1 to %zu characters in the first message", sizeof r->name - 1);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (m->weight == NULL) {
    snprintf(msg, n, "weight is missing: the first message carries the Matrix header");
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  const Gemmd__V1__Matrix *h = m->weight;
  /* Check the header as if complete, so sizes and layouts are refused before the data. */
  const size_t esz = gemmd_dtype_size((gemmd_dtype_t)h->dtype);
  const size_t want = (size_t)h->rows * h->cols * esz;
  const size_t want_s = gemmd_scale_layout_is_valid(h->scale_layout)
                            ? gemmd_scale_count((gemmd_scale_layout_t)h->scale_layout, h->rows, h->cols)
                            : 0;
  const gemmd_matrix_in_t in = {"weight", GEMMD_OPERAND_B, h->rows, h->cols, h->dtype,
                                h->scale_layout, want, want_s};
  int code = gemmd_validate_matrix(&in, &rpc->srv->limits, msg, n);
  if (code) return code;
  const uint64_t stored = (uint64_t)h->rows * h->cols + 4 * want_s;
  if (stored > rpc->srv->cfg->weight_memory_bytes) {
    snprintf(msg, n, "weight '%s' needs %" PRIu64 " bytes, over the whole budget of %" PRIu64
             " (--weight-memory-bytes)", m->name, stored, rpc->srv->cfg->weight_memory_bytes);
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  const int64_t limit = rpc->srv->cfg->max_registrations;
  if (atomic_fetch_add(&((gemmd_rpc_t *)rpc)->registrations, 1) >= limit) {
    atomic_fetch_sub(&((gemmd_rpc_t *)rpc)->registrations, 1);
    snprintf(msg, n, "%" PRId64 " weights are being registered already (--max-registrations); retry "
             "when one is done", limit);
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  r->counted = 1;
  snprintf(r->name, sizeof r->name, "%s", m->name);
  r->rows = h->rows;
  r->cols = h->cols;
  r->dtype = (gemmd_dtype_t)h->dtype;
  r->layout = (gemmd_scale_layout_t)h->scale_layout;
  r->data_want = want;
  r->scales_want = want_s;
  r->started = 1;
  return GEMMD_CODE_OK;
}

/* Grows *buf to hold `need` bytes (never past `want`): memory follows the data that came,
 * not the size a header claims. 0, or -1 out of memory. */
static int grow(void **buf, size_t *cap, size_t need, size_t want) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 1 << 20;
  while (c < need) c *= 2;
  if (c > want) c = want;
  void *p = realloc(*buf, c + 1);
  if (p == NULL) return -1;
  *buf = p;
  *cap = c;
  return 0;
}

/* Appends one message's data and scales. Returns a gRPC code. */
static int reg_append(reg_call_t *r, const Gemmd__V1__RegisterWeightRequest *m, char *msg,
                      size_t n) {
  if (m->weight == NULL) return GEMMD_CODE_OK;
  const Gemmd__V1__Matrix *h = m->weight;
  if (h->data.len > r->data_want - r->data_len) {
    snprintf(msg, n, "weight.data runs past %zu bytes, the size of a %u x %u %s weight",
             r->data_want, r->rows, r->cols, gemmd_dtype_name(r->dtype));
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (h->n_scales > r->scales_want - r->n_scales) {
    snprintf(msg, n, "weight.scales runs past the %zu values %s needs", r->scales_want,
             gemmd_scale_layout_name(r->layout));
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (grow((void **)&r->data, &r->data_cap, r->data_len + h->data.len, r->data_want) != 0 ||
      grow((void **)&r->scales, &r->scales_cap, sizeof(float) * (r->n_scales + h->n_scales),
           sizeof(float) * r->scales_want) != 0) {
    snprintf(msg, n, "out of memory for a %zu-byte weight", r->data_want);
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  if (h->data.len) memcpy(r->data + r->data_len, h->data.data, h->data.len);
  r->data_len += h->data.len;
  if (h->n_scales) memcpy(r->scales + r->n_scales, h->scales, sizeof(float) * h->n_scales);
  r->n_scales += h->n_scales;
  return GEMMD_CODE_OK;
}

static void reg_recv(reg_call_t *r);

static void on_reg_recv(rpc_tag_t *tag, int ok) {
  reg_call_t *r = RPC_CONTAINER(tag, reg_call_t, on_recv);
  if (!ok) { /* the call broke */
    rpc_call_unref(&r->base);
    return;
  }
  if (r->recv_buf == NULL) {
    reg_complete(r);
    rpc_call_unref(&r->base);
    return;
  }
  uint8_t *bytes;
  size_t len;
  const int read_rc = rpc_read_buffer(r->recv_buf, &bytes, &len);
  grpc_byte_buffer_destroy(r->recv_buf);
  r->recv_buf = NULL;
  Gemmd__V1__RegisterWeightRequest *m =
      read_rc == GEMMD_OK ? gemmd__v1__register_weight_request__unpack(NULL, len, bytes) : NULL;
  if (read_rc == GEMMD_OK) free(bytes);
  char msg[512];
  int code = GEMMD_CODE_OK;
  if (m == NULL) {
    snprintf(msg, sizeof msg, "a message is not a valid gemmd.v1.RegisterWeightRequest");
    code = GEMMD_CODE_INVALID_ARGUMENT;
  } else {
    if (!r->started) code = reg_start(r, m, msg, sizeof msg);
    if (code == GEMMD_CODE_OK) code = reg_append(r, m, msg, sizeof msg);
    gemmd__v1__register_weight_request__free_unpacked(m, NULL);
  }
  if (code != GEMMD_CODE_OK) {
    reg_fail(r, code, msg);
  } else {
    reg_recv(r);
  }
  rpc_call_unref(&r->base);
}

static void reg_recv(reg_call_t *r) {
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &r->recv_buf;
  rpc_call_ref(&r->base);
  if (grpc_call_start_batch(r->base.call, &op, 1, &r->on_recv, NULL) != GRPC_CALL_OK) {
    rpc_call_unref(&r->base);
  }
}

void rpc_register_arrived(rpc_call_t *c) {
  reg_call_t *r = (reg_call_t *)c;
  c->cleanup = reg_cleanup;
  r->on_recv.fn = on_reg_recv;
  rpc_watch_close(c);
  reg_recv(r);
}

/* ---- UnregisterWeight ------------------------------------------------------------------ */

typedef struct {
  rpc_call_t *c;
  uint64_t id;
  char name[256];
} unreg_post_t;

static void unreg_done(void *ctx, int code, const char *message, const gemmd_weight_t *w) {
  (void)w;
  rpc_call_t *c = ctx;
  if (code == GEMMD_CODE_OK) {
    Gemmd__V1__UnregisterWeightResponse resp = GEMMD__V1__UNREGISTER_WEIGHT_RESPONSE__INIT;
    const size_t len = gemmd__v1__unregister_weight_response__get_packed_size(&resp);
    uint8_t *buf = malloc(len + 1);
    if (buf) gemmd__v1__unregister_weight_response__pack(&resp, buf);
    rpc_finish(c, buf, len, GEMMD_CODE_OK, "");
  } else {
    rpc_finish(c, NULL, 0, code, message);
  }
  rpc_call_unref(c);
}

static void unreg_submit(gemmd_server_t *srv, void *arg) {
  unreg_post_t *p = arg;
  gemmd_server_unregister_weight(srv, p->id, p->name, unreg_done, p->c);
  free(p);
}

void rpc_unregister_arrived(rpc_call_t *c) {
  uint8_t *bytes;
  size_t len;
  if (rpc_read_buffer(c->payload, &bytes, &len) != GEMMD_OK) {
    rpc_finish(c, NULL, 0, GEMMD_CODE_INVALID_ARGUMENT, "the request carried no message");
    return;
  }
  Gemmd__V1__UnregisterWeightRequest *m =
      gemmd__v1__unregister_weight_request__unpack(NULL, len, bytes);
  free(bytes);
  if (m == NULL) {
    rpc_finish(c, NULL, 0, GEMMD_CODE_INVALID_ARGUMENT,
               "the request is not a valid gemmd.v1.UnregisterWeightRequest message");
    return;
  }
  unreg_post_t *p = calloc(1, sizeof *p);
  const char *err = NULL;
  if (p == NULL) {
    err = "out of memory";
  } else if (m->weight_case == GEMMD__V1__UNREGISTER_WEIGHT_REQUEST__WEIGHT_WEIGHT_ID &&
             m->weight_id != 0) {
    p->id = m->weight_id;
  } else if (m->weight_case == GEMMD__V1__UNREGISTER_WEIGHT_REQUEST__WEIGHT_NAME && m->name &&
             m->name[0] && strlen(m->name) < sizeof p->name) {
    snprintf(p->name, sizeof p->name, "%s", m->name);
  } else {
    err = "set weight_id (1 or more) or name (1 to 255 characters)";
  }
  gemmd__v1__unregister_weight_request__free_unpacked(m, NULL);
  if (err != NULL) {
    free(p);
    rpc_finish(c, NULL, 0, p ? GEMMD_CODE_INVALID_ARGUMENT : GEMMD_CODE_RESOURCE_EXHAUSTED, err);
    return;
  }
  p->c = c;
  rpc_call_ref(c);
  gemmd_server_post(c->rpc->srv, unreg_submit, p);
}

/* ---- ListWeights ----------------------------------------------------------------------- */

typedef struct {
  Gemmd__V1__WeightInfo *infos;
  Gemmd__V1__WeightInfo **ptrs;
  size_t n;
} list_ctx_t;

static void list_one(void *ctx, gemmd_weight_t *w) {
  list_ctx_t *l = ctx;
  Gemmd__V1__WeightInfo *info = &l->infos[l->n];
  gemmd__v1__weight_info__init(info);
  info->weight_id = w->id;
  info->name = w->name;
  info->n = w->n;
  info->k = w->k;
  info->dtype = (Gemmd__V1__DType)w->dtype;
  info->scale_layout = (Gemmd__V1__ScaleLayout)w->scale_layout;
  info->bytes = w->bytes;
  l->ptrs[l->n] = info;
  l->n++;
}

static int by_weight_id(const void *x, const void *y) {
  const uint64_t a = (*(Gemmd__V1__WeightInfo *const *)x)->weight_id;
  const uint64_t b = (*(Gemmd__V1__WeightInfo *const *)y)->weight_id;
  return (a > b) - (a < b);
}

static void list_on_loop(gemmd_server_t *srv, void *arg) {
  rpc_call_t *c = arg;
  const size_t n = srv->weights.active;
  list_ctx_t l = {calloc(n + 1, sizeof *l.infos), calloc(n + 1, sizeof *l.ptrs), 0};
  if (l.infos == NULL || l.ptrs == NULL) {
    rpc_finish(c, NULL, 0, GEMMD_CODE_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    gemmd_weights_each(&srv->weights, list_one, &l);
    qsort(l.ptrs, l.n, sizeof *l.ptrs, by_weight_id);
    Gemmd__V1__ListWeightsResponse resp = GEMMD__V1__LIST_WEIGHTS_RESPONSE__INIT;
    resp.n_weights = l.n;
    resp.weights = l.ptrs;
    const size_t len = gemmd__v1__list_weights_response__get_packed_size(&resp);
    uint8_t *buf = malloc(len + 1);
    if (buf) gemmd__v1__list_weights_response__pack(&resp, buf);
    rpc_finish(c, buf, len, buf ? GEMMD_CODE_OK : GEMMD_CODE_RESOURCE_EXHAUSTED, buf ? "" : "out of memory");
  }
  free(l.infos);
  free(l.ptrs);
  rpc_call_unref(c);
}

void rpc_list_arrived(rpc_call_t *c) {
  uint8_t *bytes;
  size_t len;
  if (rpc_read_buffer(c->payload, &bytes, &len) != GEMMD_OK) {
    rpc_finish(c, NULL, 0, GEMMD_CODE_INVALID_ARGUMENT, "the request carried no message");
    return;
  }
  Gemmd__V1__ListWeightsRequest *m = gemmd__v1__list_weights_request__unpack(NULL, len, bytes);
  free(bytes);
  if (m == NULL) {
    rpc_finish(c, NULL, 0, GEMMD_CODE_INVALID_ARGUMENT,
               "the request is not a valid gemmd.v1.ListWeightsRequest message");
    return;
  }
  gemmd__v1__list_weights_request__free_unpacked(m, NULL);
  rpc_call_ref(c);
  gemmd_server_post(c->rpc->srv, list_on_loop, c);
}
