/* Requests built from gemmd_gemm_call_t decode to the right GemmRequest (each way of
 * naming B, strided operands sent densely, scales as the layout needs); bad calls are
 * refused before anything is sent; responses decode into results, malformed ones are
 * INTERNAL; weight chunks carry the header only in the first message. */
#include "client/lib/wire.h"

#include <string.h>

#include "client/testing/testing.h"

static Gemmd__V1__GemmRequest *roundtrip(const gemmd_gemm_call_t *call) {
  uint8_t *buf = NULL;
  size_t len = 0;
  gemmd_status_t st;
  const int rc = gemmd_wire_encode_gemm(call, &buf, &len, &st);
  CHECK(rc == 0, "encode: %d %s", rc, st.message);
  Gemmd__V1__GemmRequest *req = gemmd__v1__gemm_request__unpack(NULL, len, buf);
  CHECK(req != NULL, "unpack");
  free(buf);
  return req;
}

static void expect_refused(const gemmd_gemm_call_t *call, const char *what) {
  uint8_t *buf = NULL;
  size_t len = 0;
  gemmd_status_t st;
  memset(&st, 0, sizeof st);
  const int rc = gemmd_wire_encode_gemm(call, &buf, &len, &st);
  CHECK(rc == GEMMD_STATUS_INVALID_ARGUMENT && st.code == rc, "%s: rc %d", what, rc);
  CHECK(strstr(st.message, what) != NULL, "message '%s' does not mention '%s'", st.message, what);
  CHECK(buf == NULL, "%s: a buffer was returned", what);
}

/* A: 2×3 E4M3 stored with ld 4 and row scales; B: 2×3 BF16 with a tensor scale. */
static uint8_t a_store[8] = {1, 2, 3, 0xEE, 4, 5, 6, 0xEE};
static float a_scales[2] = {0.5f, 2.0f};
static uint16_t b_store[6] = {10, 11, 12, 13, 14, 15};
static float b_scale[1] = {4.0f};

static gemmd_gemm_call_t base_call(void) {
  gemmd_gemm_call_t call;
  memset(&call, 0, sizeof call);
  call.request_id = 42;
  call.a = (gemmd_operand_t){2, 3, 4, GEMMD_DTYPE_FP8_E4M3, a_store, GEMMD_SCALE_ROW, a_scales};
  call.out_dtype = GEMMD_DTYPE_FP32;
  return call;
}

static void check_encode(void) {
  gemmd_gemm_call_t call = base_call();
  call.weight_id = 7;
  Gemmd__V1__GemmRequest *req = roundtrip(&call);
  CHECK(req->request_id == 42 && req->out_dtype == GEMMD__V1__DTYPE__DTYPE_FP32, "header");
  CHECK(req->rhs_case == GEMMD__V1__GEMM_REQUEST__RHS_WEIGHT_ID && req->weight_id == 7, "id");
  CHECK(req->a->rows == 2 && req->a->cols == 3, "a shape");
  CHECK(req->a->dtype == GEMMD__V1__DTYPE__DTYPE_FP8_E4M3, "a dtype");
  static const uint8_t dense_a[6] = {1, 2, 3, 4, 5, 6};
  CHECK(req->a->data.len == 6 && memcmp(req->a->data.data, dense_a, 6) == 0,
        "a packed densely (%zu bytes)", req->a->data.len);
  CHECK(req->a->scale_layout == GEMMD__V1__SCALE_LAYOUT__SCALE_LAYOUT_ROW, "a layout");
  CHECK(req->a->n_scales == 2 && req->a->scales[1] == 2.0f, "a scales");
  gemmd__v1__gemm_request__free_unpacked(req, NULL);

  call = base_call();
  call.weight_name = "w0";
  req = roundtrip(&call);
  CHECK(req->rhs_case == GEMMD__V1__GEMM_REQUEST__RHS_WEIGHT_NAME, "by name");
  CHECK(strcmp(req->weight_name, "w0") == 0, "name %s", req->weight_name);
  gemmd__v1__gemm_request__free_unpacked(req, NULL);

  const gemmd_operand_t b = {2, 3, 3, GEMMD_DTYPE_BF16, b_store, GEMMD_SCALE_TENSOR, b_scale};
  call = base_call();
  call.b = &b;
  call.out_dtype = GEMMD_DTYPE_UNSPECIFIED;
  req = roundtrip(&call);
  CHECK(req->rhs_case == GEMMD__V1__GEMM_REQUEST__RHS_B && req->b != NULL, "inline b");
  CHECK(req->b->rows == 2 && req->b->cols == 3 && req->b->data.len == 12, "b shape");
  CHECK(memcmp(req->b->data.data, b_store, 12) == 0, "b bytes");
  CHECK(req->b->n_scales == 1 && req->b->scales[0] == 4.0f, "b scale");
  CHECK(req->out_dtype == GEMMD__V1__DTYPE__DTYPE_UNSPECIFIED, "out dtype left to the server");
  gemmd__v1__gemm_request__free_unpacked(req, NULL);

  /* 1×128 scales on a 2×300 A: 2 × 3 floats. */
  static uint8_t wide[600];
  static float wide_scales[6] = {1, 2, 3, 4, 5, 6};
  call = base_call();
  call.weight_id = 1;
  call.a = (gemmd_operand_t){
      2, 300, 300, GEMMD_DTYPE_FP8_E5M2, wide, GEMMD_SCALE_BLOCK_1X128, wide_scales};
  req = roundtrip(&call);
  CHECK(req->a->n_scales == 6 && req->a->scales[5] == 6.0f, "1x128 scales %zu", req->a->n_scales);
  gemmd__v1__gemm_request__free_unpacked(req, NULL);
}

static void check_refusals(void) {
  const gemmd_operand_t b = {2, 3, 3, GEMMD_DTYPE_BF16, b_store, GEMMD_SCALE_NONE, NULL};
  gemmd_gemm_call_t call = base_call();
  expect_refused(&call, "exactly once");
  call.weight_id = 1;
  call.weight_name = "x";
  expect_refused(&call, "exactly once");
  call = base_call();
  call.weight_id = 1;
  call.b = &b;
  expect_refused(&call, "exactly once");

  call = base_call();
  call.weight_id = 1;
  call.a.dtype = (gemmd_dtype_t)9;
  expect_refused(&call, "a.dtype");
  call.a.dtype = GEMMD_DTYPE_UNSPECIFIED;
  expect_refused(&call, "a.dtype");
  call = base_call();
  call.weight_id = 1;
  call.a.scale_layout = (gemmd_scale_layout_t)5;
  expect_refused(&call, "a.scale_layout");
  call = base_call();
  call.weight_id = 1;
  call.a.scales = NULL;
  expect_refused(&call, "a.scales");
  call = base_call();
  call.weight_id = 1;
  call.a.data = NULL;
  expect_refused(&call, "a.data");
  call = base_call();
  call.weight_id = 1;
  call.a.ld = 2;
  expect_refused(&call, "a.ld");
  call = base_call();
  call.weight_id = 1;
  call.d_region = (gemmd_region_ref_t){3, 0};
  expect_refused(&call, "only the shared-memory transport");
  const gemmd_operand_t bad_b = {2, 3, 3, GEMMD_DTYPE_BF16, NULL, GEMMD_SCALE_NONE, NULL};
  call = base_call();
  call.b = &bad_b;
  expect_refused(&call, "b.data");
}

static size_t pack_response(const Gemmd__V1__GemmResponse *resp, uint8_t *buf) {
  CHECK(gemmd__v1__gemm_response__get_packed_size(resp) <= 256, "test buffer");
  return gemmd__v1__gemm_response__pack(resp, buf);
}

static void check_decode(void) {
  uint16_t d_bytes[6] = {1, 2, 3, 4, 5, 6};
  Gemmd__V1__Matrix d = GEMMD__V1__MATRIX__INIT;
  d.rows = 2;
  d.cols = 3;
  d.dtype = GEMMD__V1__DTYPE__DTYPE_BF16;
  d.data.data = (uint8_t *)d_bytes;
  d.data.len = 12;
  Gemmd__V1__RequestStats stats = GEMMD__V1__REQUEST_STATS__INIT;
  stats.queue_ns = 11;
  stats.compute_ns = 22;
  stats.total_ns = 33;
  stats.batch_requests = 4;
  stats.batch_groups = 2;
  stats.batch_id = 99;
  Gemmd__V1__GemmResponse resp = GEMMD__V1__GEMM_RESPONSE__INIT;
  resp.request_id = 42;
  resp.d = &d;
  resp.stats = &stats;
  uint8_t buf[256];
  size_t n = pack_response(&resp, buf);

  gemmd_gemm_result_t r;
  gemmd_status_t st;
  memset(&r, 0, sizeof r);
  int rc = gemmd_wire_decode_gemm(buf, n, &r, &st);
  CHECK(rc == 0, "decode: %s", st.message);
  CHECK(r.request_id == 42 && r.rows == 2 && r.cols == 3 && r.dtype == GEMMD_DTYPE_BF16, "header");
  CHECK(r.data_bytes == 12 && memcmp(r.data, d_bytes, 12) == 0, "data");
  CHECK(r.stats.queue_ns == 11 && r.stats.compute_ns == 22 && r.stats.total_ns == 33, "times");
  CHECK(r.stats.batch_requests == 4 && r.stats.batch_groups == 2 && r.stats.batch_id == 99,
        "batch");
  gemmd_gemm_result_free(&r);
  CHECK(r.data == NULL, "freed");

  d.data.len = 10; /* 2×3 BF16 needs 12 */
  n = pack_response(&resp, buf);
  rc = gemmd_wire_decode_gemm(buf, n, &r, &st);
  CHECK(rc == GEMMD_STATUS_INTERNAL && strstr(st.message, "10 bytes") != NULL, "%d %s", rc,
        st.message);
  CHECK(r.data == NULL, "no data on failure");

  resp.d = NULL;
  n = pack_response(&resp, buf);
  rc = gemmd_wire_decode_gemm(buf, n, &r, &st);
  CHECK(rc == GEMMD_STATUS_INTERNAL && strstr(st.message, "no d") != NULL, "%s", st.message);

  static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff};
  rc = gemmd_wire_decode_gemm(garbage, sizeof garbage, &r, &st);
  CHECK(rc == GEMMD_STATUS_INTERNAL && strstr(st.message, "cannot parse") != NULL, "%s",
        st.message);
}

static void check_weight_chunks(void) {
  const gemmd_operand_t w = {256, 128, 128, GEMMD_DTYPE_FP8_E4M3, NULL, GEMMD_SCALE_BLOCK_128X128,
                             NULL};
  static const uint8_t data[3] = {7, 8, 9};
  static const float scales[2] = {0.25f, 0.5f};
  uint8_t *buf;
  size_t len;
  gemmd_status_t st;
  CHECK(gemmd_wire_encode_weight_chunk("w", &w, 1, data, 3, NULL, 0, &buf, &len, &st) == 0,
        "first");
  Gemmd__V1__RegisterWeightRequest *m = gemmd__v1__register_weight_request__unpack(NULL, len, buf);
  CHECK(m != NULL && strcmp(m->name, "w") == 0 && m->weight != NULL, "first: name");
  CHECK(m->weight->rows == 256 && m->weight->cols == 128, "first: shape");
  CHECK(m->weight->dtype == GEMMD__V1__DTYPE__DTYPE_FP8_E4M3, "first: dtype");
  CHECK(m->weight->scale_layout == GEMMD__V1__SCALE_LAYOUT__SCALE_LAYOUT_BLOCK_128X128, "layout");
  CHECK(m->weight->data.len == 3 && m->weight->data.data[2] == 9 && m->weight->n_scales == 0,
        "first: payload");
  gemmd__v1__register_weight_request__free_unpacked(m, NULL);
  free(buf);

  CHECK(gemmd_wire_encode_weight_chunk("w", &w, 0, NULL, 0, scales, 2, &buf, &len, &st) == 0,
        "later");
  m = gemmd__v1__register_weight_request__unpack(NULL, len, buf);
  CHECK(m != NULL && m->name[0] == '\0' && m->weight != NULL, "later: no name");
  CHECK(m->weight->rows == 0 && m->weight->cols == 0 && m->weight->dtype == 0, "later: no header");
  CHECK(m->weight->data.len == 0 && m->weight->n_scales == 2 && m->weight->scales[1] == 0.5f,
        "later: scales");
  gemmd__v1__register_weight_request__free_unpacked(m, NULL);
  free(buf);

  Gemmd__V1__WeightInfo wi = GEMMD__V1__WEIGHT_INFO__INIT;
  char long_name[400];
  memset(long_name, 'n', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  wi.weight_id = 5;
  wi.name = long_name;
  wi.n = 256;
  wi.k = 128;
  wi.dtype = GEMMD__V1__DTYPE__DTYPE_FP8_E5M2;
  wi.scale_layout = GEMMD__V1__SCALE_LAYOUT__SCALE_LAYOUT_ROW;
  wi.bytes = 32768;
  gemmd_weight_info_t info;
  gemmd_wire_weight_info(&wi, &info);
  CHECK(info.weight_id == 5 && info.n == 256 && info.k == 128 && info.bytes == 32768, "info");
  CHECK(info.dtype == GEMMD_DTYPE_FP8_E5M2 && info.scale_layout == GEMMD_SCALE_ROW, "enums");
  CHECK(strlen(info.name) == sizeof info.name - 1, "long name truncated, terminated");
}

int main(void) {
  check_encode();
  check_refusals();
  check_decode();
  check_weight_chunks();
  printf("wire_test: ok\n");
  return 0;
}
