/* The JSON reader: values of every type, escapes, safetensors-shaped headers, and the
 * malformed inputs it must refuse. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/json.h"

#define CHECK(c)                                                        \
  do {                                                                  \
    if (!(c)) {                                                         \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
      exit(1);                                                          \
    }                                                                   \
  } while (0)

static gemmd_json_value_t *parse(const char *s) {
  char err[128];
  return gemmd_json_parse(s, strlen(s), err, sizeof err);
}

int main(void) {
  const char *hdr =
      "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[2,3],"
      "\"data_offsets\":[0,6]},\"w_scale_inv\":{\"dtype\":\"F32\",\"shape\":[1,1],"
      "\"data_offsets\":[6,10]}}    ";
  gemmd_json_value_t *v = parse(hdr);
  CHECK(v != NULL && v->type == GEMMD_JSON_OBJECT && v->n == 3);
  const gemmd_json_value_t *w = gemmd_json_get(v, "w");
  CHECK(w != NULL && strcmp(gemmd_json_get(w, "dtype")->string, "F8_E4M3") == 0);
  const gemmd_json_value_t *shape = gemmd_json_get(w, "shape");
  CHECK(shape->type == GEMMD_JSON_ARRAY && shape->n == 2 && shape->items[1]->integer == 3);
  CHECK(gemmd_json_get(v, "missing") == NULL);
  gemmd_json_free(v);

  v = parse("[true, false, null, -1.5e2, 12345678901234, \"a\\\"b\\\\c\\u00e9\\ud83d\\ude00\", {}, []]");
  CHECK(v != NULL && v->n == 8);
  CHECK(v->items[0]->type == GEMMD_JSON_BOOL && v->items[0]->boolean == 1);
  CHECK(v->items[1]->boolean == 0 && v->items[2]->type == GEMMD_JSON_NULL);
  CHECK(v->items[3]->number == -150.0 && v->items[3]->is_integer);
  CHECK(v->items[4]->integer == 12345678901234ll);
  CHECK(strcmp(v->items[5]->string, "a\"b\\c\xc3\xa9\xf0\x9f\x98\x80") == 0);
  CHECK(v->items[6]->type == GEMMD_JSON_OBJECT && v->items[6]->n == 0);
  gemmd_json_free(v);

  const char *bad[] = {"", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "\"abc", "[1] x", "tru",
                       "{\"a\":\"\\q\"}", "[\"\x01\"]", "{1:2}", "-", "[1 2]"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char err[128] = "";
    gemmd_json_value_t *b = gemmd_json_parse(bad[i], strlen(bad[i]), err, sizeof err);
    if (b != NULL) {
      fprintf(stderr, "accepted malformed input #%zu: %s\n", i, bad[i]);
      return 1;
    }
    CHECK(err[0] != '\0');
  }
  /* Nesting beyond the limit is refused, not a stack overflow. */
  char deep[2000];
  memset(deep, '[', sizeof deep - 1);
  deep[sizeof deep - 1] = '\0';
  CHECK(parse(deep) == NULL);
  printf("json_test: passed\n");
  return 0;
}
