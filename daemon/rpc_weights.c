/* gRPC RegisterWeight (client streaming), UnregisterWeight and ListWeights.
 *
 * RegisterWeight: the first message names the weight and carries the Matrix header;
 * every message may carry data and scales, appended in order. The CQ thread assembles
 * and checks the bytes as they come (a stream that overruns the header's size is stopped
 * at once), quantizes BF16/FP16/FP32 weights to E4M3 128×128 when the stream ends, and
 * hands the weight to the loop, which registers it and answers. */
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/rpc_decode.h"
#include "daemon/rpc_internal.h"
#include "daemon/status.h"
#include "kernels/errors.h"


/* A weight as WeightInfo describes it (the strings stay the weight's). */
static void fill_info(Gemmd__V1__WeightInfo *info, const gemmd_weight_t *w) {
  gemmd__v1__weight_info__init(info);
  info->weight_id = w->id;
  info->name = w->name;
  info->n = w->n;
  info->k = w->k;
  info->dtype = (Gemmd__V1__DType)w->dtype;
  info->scale_layout = (Gemmd__V1__ScaleLayout)w->scale_layout;
  info->bytes = w->bytes;
  info->source = (char *)(w->source != NULL ? w->source : "registered");
}

static uint8_t *pack_info(const gemmd_weight_t *w, size_t *len) {
  Gemmd__V1__WeightInfo info;
  fill_info(&info, w);
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
  int finished; /* status sent */
  int counted;  /* holds one of --max-registrations */
  _Atomic uint64_t uploading; /* its share of rpc->uploading_bytes, until answered */
  gemmd_weight_upload_t up;
} reg_call_t;

size_t rpc_register_call_size(void) { return sizeof(reg_call_t); }

/* Gives the upload's bytes back to the budget check. Before the answer is sent, so that a
 * client's next registration never counts this one twice (the registry holds it by then,
 * or it failed). */
static void release_upload(reg_call_t *r) {
  const uint64_t share = atomic_exchange(&r->uploading, 0);
  if (share) atomic_fetch_sub(&r->base.rpc->uploading_bytes, share);
}

static void reg_cleanup(rpc_call_t *c) {
  reg_call_t *r = (reg_call_t *)c;
  if (r->counted) atomic_fetch_sub(&c->rpc->registrations, 1);
  release_upload(r);
  gemmd_weight_upload_free(&r->up);
  if (r->recv_buf) grpc_byte_buffer_destroy(r->recv_buf);
}

static void reg_fail(reg_call_t *r, int code, const char *msg) {
  if (r->finished) return;
  r->finished = 1;
  release_upload(r);
  rpc_finish(&r->base, NULL, 0, code, msg);
}

/* Loop thread: the registry's answer. */
static void reg_done(void *ctx, int code, const char *message, const gemmd_weight_t *w) {
  reg_call_t *r = ctx;
  r->finished = 1;
  release_upload(r);
  if (code == GEMMD_CODE_OK) {
    size_t len;
    uint8_t *buf = pack_info(w, &len);
    rpc_finish(&r->base, buf, len, buf ? GEMMD_CODE_OK : GEMMD_CODE_RESOURCE_EXHAUSTED, buf ? "" : "out of memory");
  } else {
    rpc_finish(&r->base, NULL, 0, code, message);
  }
  rpc_call_unref(&r->base);
}

/* The weight made from a complete upload, on the uv pool: quantizing a BF16/FP16/FP32
 * weight takes time in proportion to it (hundreds of ms for a large one), which neither a
 * completion-queue thread, serving every other call, nor the loop may spend. */
typedef struct {
  uv_work_t work;
  reg_call_t *r;
  gemmd_weight_t *w;
  int code;
  char msg[512];
} reg_make_t;

static void reg_make_work(uv_work_t *req) {
  reg_make_t *m = req->data;
  m->code = gemmd_weight_upload_finish(&m->r->up, &m->r->base.rpc->srv->weight_quantizer, &m->w, m->msg,
                                       sizeof m->msg);
}

/* Loop thread: the weight goes to the registry (reg_done answers and takes the call's
 * reference), or the call fails with m's code (status: the work was cancelled). */
static void reg_make_done(uv_work_t *req, int status) {
  reg_make_t *m = req->data;
  reg_call_t *r = m->r;
  if (status != 0) {
    if (m->code == GEMMD_CODE_OK && m->w != NULL) gemmd_weight_free(m->w);
    m->code = GEMMD_CODE_UNAVAILABLE;
    snprintf(m->msg, sizeof m->msg, "gemmd is stopping");
  }
  if (m->code == GEMMD_CODE_OK) {
    gemmd_server_register_weight(r->base.rpc->srv, m->w, reg_done, r);
  } else {
    reg_fail(r, m->code, m->msg);
    rpc_call_unref(&r->base);
  }
  free(m);
}

static void reg_make(gemmd_server_t *srv, void *arg) {
  reg_make_t *m = arg;
  m->work.data = m;
  if (uv_queue_work(&srv->loop, &m->work, reg_make_work, reg_make_done) != 0) reg_make_done(&m->work, UV_ECANCELED);
}

/* The whole weight is here: the weight is made on the uv pool, then registered. */
static void reg_complete(reg_call_t *r) {
  reg_make_t *m = calloc(1, sizeof *m);
  if (m == NULL) {
    reg_fail(r, GEMMD_CODE_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  m->r = r;
  rpc_call_ref(&r->base);
  gemmd_server_post(r->base.rpc->srv, reg_make, m);
}

/* The upload's admission: one of --max-registrations, and room in the weight budget beside
 * the registered weights and the other uploads, so that no stream is read to its end only
 * to be refused, and uploads together never hold more than the budget. */
static int reg_admit(void *ctx, const char *name, uint64_t stored, char *msg, size_t n) {
  reg_call_t *r = ctx;
  gemmd_rpc_t *rpc = r->base.rpc;
  gemmd_server_t *srv = rpc->srv;
  const int64_t limit = srv->cfg->max_registrations;
  if (atomic_fetch_add(&rpc->registrations, 1) >= limit) {
    atomic_fetch_sub(&rpc->registrations, 1);
    snprintf(msg, n, "%" PRId64 " weights are being registered already (--max-registrations); retry "
             "when one is done", limit);
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  r->counted = 1;
  const uint64_t budget = srv->cfg->weight_memory_bytes;
  const uint64_t held = gemmd_weights_bytes_shared(&srv->weights);
  const uint64_t others = atomic_fetch_add(&rpc->uploading_bytes, stored);
  if (held + others + stored > budget) {
    atomic_fetch_sub(&rpc->uploading_bytes, stored);
    const uint64_t used = held + others;
    snprintf(msg, n, "weight '%s' needs %" PRIu64 " bytes but only %" PRIu64 " of the %" PRIu64
             "-byte budget are free (%" PRIu64 " held by weights, %" PRIu64
             " by registrations in progress; --weight-memory-bytes)",
             name, stored, used < budget ? budget - used : 0, budget, held, others);
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  atomic_store(&r->uploading, stored);
  return GEMMD_CODE_OK;
}

/* First message: name and header. Returns a gRPC code. */
static int reg_start(reg_call_t *r, const Gemmd__V1__RegisterWeightRequest *m, char *msg,
                     size_t n) {
  const gemmd_server_t *srv = r->base.rpc->srv;
  return gemmd_weight_upload_start(&r->up, m, &srv->limits, srv->cfg->weight_memory_bytes, reg_admit, r,
                                   msg, n);
}

static void reg_recv(reg_call_t *r);

/* One message of the stream, read from gRPC's slices as they are: weight.data is copied
 * once, into the weight's buffer (register_wire.h); protobuf-c unpacks the rest. */
static int reg_take(reg_call_t *r, grpc_byte_buffer *bb, char *msg, size_t n) {
  grpc_byte_buffer_reader reader;
  if (!grpc_byte_buffer_reader_init(&reader, bb)) {
    snprintf(msg, n, "a message could not be read (is its compression one gRPC knows?)");
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  gemmd_piece_t *pieces = NULL;
  size_t n_pieces = 0, cap = 0;
  int code = GEMMD_CODE_OK;
  grpc_slice *slice;
  while (code == GEMMD_CODE_OK && grpc_byte_buffer_reader_peek(&reader, &slice)) {
    if (n_pieces == cap) {
      cap = cap ? 2 * cap : 64;
      gemmd_piece_t *grown = realloc(pieces, cap * sizeof *pieces);
      if (grown == NULL) {
        code = GEMMD_CODE_RESOURCE_EXHAUSTED;
        break;
      }
      pieces = grown;
    }
    pieces[n_pieces++] = (gemmd_piece_t){GRPC_SLICE_START_PTR(*slice), GRPC_SLICE_LENGTH(*slice)};
  }
  uint8_t *rest = NULL;
  size_t rest_len = 0;
  gemmd_piece_range_t data;
  if (code == GEMMD_CODE_OK) {
    const int rc = gemmd_register_split(pieces, n_pieces, &rest, &rest_len, &data);
    code = rc == 0 ? GEMMD_CODE_OK : rc == -1 ? GEMMD_CODE_INVALID_ARGUMENT : GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  Gemmd__V1__RegisterWeightRequest *m =
      code == GEMMD_CODE_OK ? gemmd__v1__register_weight_request__unpack(NULL, rest_len, rest) : NULL;
  free(rest);
  if (code == GEMMD_CODE_RESOURCE_EXHAUSTED) {
    snprintf(msg, n, "out of memory reading a RegisterWeightRequest");
  } else if (m == NULL) {
    snprintf(msg, n, "a message is not a valid gemmd.v1.RegisterWeightRequest");
    code = GEMMD_CODE_INVALID_ARGUMENT;
  } else {
    if (!r->up.started) code = reg_start(r, m, msg, n);
    if (code == GEMMD_CODE_OK) code = gemmd_weight_upload_append(&r->up, m, &data, msg, n);
    gemmd__v1__register_weight_request__free_unpacked(m, NULL);
  }
  grpc_byte_buffer_reader_destroy(&reader);
  free(pieces);
  return code;
}

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
  char msg[512];
  const int code = reg_take(r, r->recv_buf, msg, sizeof msg);
  grpc_byte_buffer_destroy(r->recv_buf);
  r->recv_buf = NULL;
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
  rpc_message_t in;
  if (rpc_read_message(c->payload, &in) != GEMMD_OK) {
    rpc_finish(c, NULL, 0, GEMMD_CODE_INVALID_ARGUMENT, "the request carried no message");
    return;
  }
  Gemmd__V1__UnregisterWeightRequest *m =
      gemmd__v1__unregister_weight_request__unpack(NULL, in.len, in.data);
  rpc_message_release(&in);
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
  fill_info(info, w);
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
  rpc_message_t in;
  if (rpc_read_message(c->payload, &in) != GEMMD_OK) {
    rpc_finish(c, NULL, 0, GEMMD_CODE_INVALID_ARGUMENT, "the request carried no message");
    return;
  }
  Gemmd__V1__ListWeightsRequest *m = gemmd__v1__list_weights_request__unpack(NULL, in.len, in.data);
  rpc_message_release(&in);
  if (m == NULL) {
    rpc_finish(c, NULL, 0, GEMMD_CODE_INVALID_ARGUMENT,
               "the request is not a valid gemmd.v1.ListWeightsRequest message");
    return;
  }
  gemmd__v1__list_weights_request__free_unpacked(m, NULL);
  rpc_call_ref(c);
  gemmd_server_post(c->rpc->srv, list_on_loop, c);
}
