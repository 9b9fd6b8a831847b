/* The generated protobuf-c code speaks docs/api.md §2's wire format: messages packed here are
 * compared byte for byte with encodings written out by hand from the field numbers of
 * docs/api.md, and hand-written bytes unpack into the right fields. Garbage is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemmd/v1/gemm.pb-c.h"
#include "grpc/health/v1/health.pb-c.h"

#define CHECK(cond)                                                  \
  do {                                                               \
    if (!(cond)) {                                                   \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                       \
    }                                                                \
  } while (0)

static void check_bytes(const char *what, const uint8_t *got, size_t n, const uint8_t *want,
                        size_t wn) {
  if (n != wn || memcmp(got, want, n) != 0) {
    fprintf(stderr, "%s: encoding differs\n  got: ", what);
    for (size_t i = 0; i < n; i++) fprintf(stderr, "%02x ", got[i]);
    fprintf(stderr, "\n want: ");
    for (size_t i = 0; i < wn; i++) fprintf(stderr, "%02x ", want[i]);
    fprintf(stderr, "\n");
    exit(1);
  }
}

int main(void) {
  /* GemmRequest{request_id=7, weight_id=3, a={rows=2, cols=1, dtype=E5M2, data="\x01\x02",
   * scale_layout=ROW, scales=[1.0, 2.0]}, out_dtype=FP32} */
  Gemmd__V1__Matrix a = GEMMD__V1__MATRIX__INIT;
  uint8_t data[2] = {1, 2};
  float scales[2] = {1.0f, 2.0f};
  a.rows = 2;
  a.cols = 1;
  a.dtype = GEMMD__V1__DTYPE__DTYPE_FP8_E5M2;
  a.data.len = 2;
  a.data.data = data;
  a.scale_layout = GEMMD__V1__SCALE_LAYOUT__SCALE_LAYOUT_ROW;
  a.n_scales = 2;
  a.scales = scales;
  Gemmd__V1__GemmRequest req = GEMMD__V1__GEMM_REQUEST__INIT;
  req.request_id = 7;
  req.rhs_case = GEMMD__V1__GEMM_REQUEST__RHS_WEIGHT_ID;
  req.weight_id = 3;
  req.a = &a;
  req.out_dtype = GEMMD__V1__DTYPE__DTYPE_FP32;

  static const uint8_t want_req[] = {
      0x08, 0x07,                   /* 1: request_id = 7 (varint) */
      0x10, 0x03,                   /* 2: weight_id = 3 */
      0x2a, 0x16,                   /* 5: a, 22 bytes */
      0x08, 0x02,                   /*   1: rows = 2 */
      0x10, 0x01,                   /*   2: cols = 1 */
      0x18, 0x02,                   /*   3: dtype = DTYPE_FP8_E5M2 */
      0x22, 0x02, 0x01, 0x02,       /*   4: data */
      0x28, 0x02,                   /*   5: scale_layout = ROW */
      0x32, 0x08, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, /* 6: packed scales */
      0x30, 0x05,                   /* 6: out_dtype = DTYPE_FP32 */
  };
  uint8_t buf[256];
  size_t n = gemmd__v1__gemm_request__pack(&req, buf);
  check_bytes("GemmRequest", buf, n, want_req, sizeof want_req);

  Gemmd__V1__GemmRequest *back = gemmd__v1__gemm_request__unpack(NULL, n, buf);
  CHECK(back != NULL);
  CHECK(back->request_id == 7 && back->rhs_case == GEMMD__V1__GEMM_REQUEST__RHS_WEIGHT_ID);
  CHECK(back->a != NULL && back->a->n_scales == 2 && back->a->scales[1] == 2.0f);
  gemmd__v1__gemm_request__free_unpacked(back, NULL);

  /* The other two arms of the rhs oneof: weight_name = 3, b = 4. */
  static const uint8_t named[] = {0x1a, 0x02, 'w', '1'};
  back = gemmd__v1__gemm_request__unpack(NULL, sizeof named, named);
  CHECK(back != NULL && back->rhs_case == GEMMD__V1__GEMM_REQUEST__RHS_WEIGHT_NAME);
  CHECK(strcmp(back->weight_name, "w1") == 0);
  gemmd__v1__gemm_request__free_unpacked(back, NULL);
  static const uint8_t inline_b[] = {0x22, 0x02, 0x08, 0x05};
  back = gemmd__v1__gemm_request__unpack(NULL, sizeof inline_b, inline_b);
  CHECK(back != NULL && back->rhs_case == GEMMD__V1__GEMM_REQUEST__RHS_B && back->b->rows == 5);
  gemmd__v1__gemm_request__free_unpacked(back, NULL);

  /* GemmResponse{request_id=1, stats={queue_ns=1, compute_ns=2, total_ns=3,
   * batch_requests=4, batch_groups=5, batch_id=6}, error_code=3, error_message="x"} */
  Gemmd__V1__RequestStats st = GEMMD__V1__REQUEST_STATS__INIT;
  st.queue_ns = 1, st.compute_ns = 2, st.total_ns = 3;
  st.batch_requests = 4, st.batch_groups = 5, st.batch_id = 6;
  Gemmd__V1__GemmResponse resp = GEMMD__V1__GEMM_RESPONSE__INIT;
  resp.request_id = 1;
  resp.stats = &st;
  resp.error_code = 3;
  resp.error_message = "x";
  static const uint8_t want_resp[] = {0x08, 0x01, 0x1a, 0x0c, 0x08, 0x01, 0x10, 0x02,
                                      0x18, 0x03, 0x20, 0x04, 0x28, 0x05, 0x30, 0x06,
                                      0x20, 0x03, 0x2a, 0x01, 'x'};
  n = gemmd__v1__gemm_response__pack(&resp, buf);
  check_bytes("GemmResponse", buf, n, want_resp, sizeof want_resp);

  /* WeightInfo and the streamed RegisterWeightRequest. */
  Gemmd__V1__WeightInfo wi = GEMMD__V1__WEIGHT_INFO__INIT;
  wi.weight_id = 9, wi.name = "w", wi.n = 1, wi.k = 2;
  wi.dtype = GEMMD__V1__DTYPE__DTYPE_BF16;
  wi.scale_layout = GEMMD__V1__SCALE_LAYOUT__SCALE_LAYOUT_BLOCK_128X128;
  wi.bytes = 4;
  static const uint8_t want_wi[] = {0x08, 0x09, 0x12, 0x01, 'w', 0x18, 0x01, 0x20, 0x02,
                                    0x28, 0x03, 0x30, 0x04, 0x38, 0x04};
  n = gemmd__v1__weight_info__pack(&wi, buf);
  check_bytes("WeightInfo", buf, n, want_wi, sizeof want_wi);
  static const uint8_t reg[] = {0x0a, 0x01, 'w', 0x12, 0x02, 0x08, 0x03};
  Gemmd__V1__RegisterWeightRequest *r =
      gemmd__v1__register_weight_request__unpack(NULL, sizeof reg, reg);
  CHECK(r != NULL && strcmp(r->name, "w") == 0 && r->weight != NULL && r->weight->rows == 3);
  gemmd__v1__register_weight_request__free_unpacked(r, NULL);

  /* UnregisterWeightRequest's oneof: weight_id = 1, name = 2. */
  static const uint8_t unreg[] = {0x12, 0x01, 'w'};
  Gemmd__V1__UnregisterWeightRequest *u =
      gemmd__v1__unregister_weight_request__unpack(NULL, sizeof unreg, unreg);
  CHECK(u != NULL && u->weight_case == GEMMD__V1__UNREGISTER_WEIGHT_REQUEST__WEIGHT_NAME);
  gemmd__v1__unregister_weight_request__free_unpacked(u, NULL);

  /* grpc.health.v1: HealthCheckResponse{status=SERVING}. */
  Grpc__Health__V1__HealthCheckResponse h = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
  h.status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
  static const uint8_t want_h[] = {0x08, 0x01};
  n = grpc__health__v1__health_check_response__pack(&h, buf);
  check_bytes("HealthCheckResponse", buf, n, want_h, sizeof want_h);

  /* Garbage is refused, not misread. */
  static const uint8_t garbage[] = {0x2a, 0x7f, 0x00};
  CHECK(gemmd__v1__gemm_request__unpack(NULL, sizeof garbage, garbage) == NULL);

  printf("wire_test: passed\n");
  return 0;
}
