/* gemmd_register_split against protobuf-c: the rest unpacks to the same message without
 * weight.data, the data range holds the data's bytes, however the message is cut into
 * pieces; truncated and malformed messages are refused where protobuf-c refuses them. */
#include "daemon/register_wire.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/test_check.h"
#include "gemmd/v1/gemm.pb-c.h"

enum { DATA_BYTES = 3000, N_SCALES = 7 };

static uint8_t data_bytes[DATA_BYTES];
static float scales[N_SCALES];

/* A packed RegisterWeightRequest with every field set; *len its size. */
static uint8_t *make_message(size_t *len, const char *name, size_t data_len) {
  Gemmd__V1__Matrix w = GEMMD__V1__MATRIX__INIT;
  w.rows = 30;
  w.cols = 100;
  w.dtype = GEMMD__V1__DTYPE__DTYPE_FP8_E4M3;
  w.data.data = data_bytes;
  w.data.len = data_len;
  w.scale_layout = GEMMD__V1__SCALE_LAYOUT__SCALE_LAYOUT_ROW;
  w.scales = scales;
  w.n_scales = N_SCALES;
  Gemmd__V1__RegisterWeightRequest m = GEMMD__V1__REGISTER_WEIGHT_REQUEST__INIT;
  m.name = (char *)name;
  m.weight = &w;
  *len = gemmd__v1__register_weight_request__get_packed_size(&m);
  uint8_t *buf = malloc(*len);
  gemmd__v1__register_weight_request__pack(&m, buf);
  return buf;
}

/* Splits buf[0..len) cut at the given offsets (sorted, each ≤ len) into pieces; checks the
 * result against protobuf-c's unpack of the whole. Returns the split's result. */
static int split_and_compare(const uint8_t *buf, size_t len, const size_t *cuts, size_t n_cuts) {
  gemmd_piece_t pieces[64];
  size_t n = 0, from = 0;
  for (size_t i = 0; i <= n_cuts; i++) {
    const size_t to = i < n_cuts ? cuts[i] : len;
    pieces[n++] = (gemmd_piece_t){buf + from, to - from};
    from = to;
  }
  uint8_t *rest = NULL;
  size_t rest_len = 0;
  gemmd_piece_range_t data;
  const int rc = gemmd_register_split(pieces, n, &rest, &rest_len, &data);
  Gemmd__V1__RegisterWeightRequest *whole = gemmd__v1__register_weight_request__unpack(NULL, len, buf);
  if (rc != 0) {
    CHECK(rc == -1);
    CHECK(whole == NULL); /* refused only where protobuf-c refuses */
  } else {
    Gemmd__V1__RegisterWeightRequest *part = gemmd__v1__register_weight_request__unpack(NULL, rest_len, rest);
    CHECK((part == NULL) == (whole == NULL));
    if (part != NULL && whole != NULL) {
      CHECK(strcmp(part->name, whole->name) == 0);
      CHECK((part->weight == NULL) == (whole->weight == NULL));
      if (whole->weight != NULL && part->weight != NULL) {
        const Gemmd__V1__Matrix *a = part->weight, *b = whole->weight;
        CHECK(a->rows == b->rows && a->cols == b->cols && a->dtype == b->dtype);
        CHECK(a->scale_layout == b->scale_layout && a->n_scales == b->n_scales);
        CHECK(a->n_scales == 0 || memcmp(a->scales, b->scales, sizeof(float) * a->n_scales) == 0);
        CHECK(a->data.len == 0); /* taken out */
        CHECK(data.len == b->data.len);
        uint8_t *copy = malloc(data.len + 1);
        gemmd_piece_range_copy(&data, copy);
        CHECK(data.len == 0 || memcmp(copy, b->data.data, data.len) == 0);
        free(copy);
      } else {
        CHECK(data.len == 0);
      }
    }
    if (part) gemmd__v1__register_weight_request__free_unpacked(part, NULL);
    free(rest);
  }
  if (whole) gemmd__v1__register_weight_request__free_unpacked(whole, NULL);
  return rc;
}

int main(void) {
  for (size_t i = 0; i < DATA_BYTES; i++) data_bytes[i] = (uint8_t)(i * 7 + 3);
  for (int i = 0; i < N_SCALES; i++) scales[i] = 0.5f + (float)i;

  size_t len;
  uint8_t *msg = make_message(&len, "layer0.w", DATA_BYTES);

  /* Whole, and cut in two at every offset. */
  CHECK(split_and_compare(msg, len, NULL, 0) == 0);
  for (size_t cut = 0; cut <= len; cut++) CHECK(split_and_compare(msg, len, &cut, 1) == 0);
  /* Cut in many pieces, some empty, across every field's key, length and value. */
  size_t cuts[40];
  for (size_t i = 0; i < 40; i++) cuts[i] = i < 20 ? i : (len * (i - 19)) / 21;
  CHECK(split_and_compare(msg, len, cuts, 40) == 0);

  /* Truncated at every length: the split and protobuf-c agree (checked inside). */
  for (size_t l = 0; l < len; l++) {
    const size_t cut = l / 2;
    split_and_compare(msg, l, &cut, 1);
  }

  /* No data; an empty message. */
  size_t len2;
  uint8_t *nodata = make_message(&len2, "x", 0);
  CHECK(split_and_compare(nodata, len2, NULL, 0) == 0);
  CHECK(split_and_compare(nodata, 0, NULL, 0) == 0);

  /* Two messages back to back merge: the last weight.data counts, the header fields merge. */
  size_t len3;
  uint8_t *second = make_message(&len3, "y", 17);
  uint8_t *both = malloc(len + len3);
  memcpy(both, msg, len);
  memcpy(both + len, second, len3);
  const size_t mid = len + 3;
  CHECK(split_and_compare(both, len + len3, &mid, 1) == 0);

  /* Malformed: a group, field 0, a length past the end, an 11-byte varint. */
  const uint8_t group[] = {0x0b, 0x0c};
  const uint8_t field0[] = {0x00, 0x01};
  const uint8_t long_len[] = {0x12, 0x7f, 0x08, 0x01};
  const uint8_t long_varint[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  const uint8_t data_past[] = {0x12, 0x04, 0x22, 0x05, 0x01, 0x02};
  CHECK(split_and_compare(group, sizeof group, NULL, 0) == -1);
  CHECK(split_and_compare(field0, sizeof field0, NULL, 0) == -1);
  CHECK(split_and_compare(long_len, sizeof long_len, NULL, 0) == -1);
  CHECK(split_and_compare(long_varint, sizeof long_varint, NULL, 0) == -1);
  CHECK(split_and_compare(data_past, sizeof data_past, NULL, 0) == -1);

  free(msg);
  free(nodata);
  free(second);
  free(both);
  if (check_failures == 0) printf("register_wire_test: ok\n");
  return check_failures != 0;
}
