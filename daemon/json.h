/* A small JSON reader for configuration-sized documents (safetensors headers): parses
 * the whole text into a tree of values. Numbers are kept as double and, when integral,
 * as int64. Strings are unescaped (\uXXXX included, as UTF-8). Depth is limited. */
#ifndef GEMMD_DAEMON_JSON_H_
#define GEMMD_DAEMON_JSON_H_

#include <stddef.h>
#include <stdint.h>

typedef enum {
  GEMMD_JSON_NULL,
  GEMMD_JSON_BOOL,
  GEMMD_JSON_NUMBER,
  GEMMD_JSON_STRING,
  GEMMD_JSON_ARRAY,
  GEMMD_JSON_OBJECT,
} gemmd_json_value_type_t;

typedef struct gemmd_json_value_s gemmd_json_value_t;
struct gemmd_json_value_s {
  gemmd_json_value_type_t type;
  int boolean;
  double number;
  int64_t integer;
  int is_integer;
  char *string;           /* STRING value */
  char **keys;            /* OBJECT: n keys */
  gemmd_json_value_t **items;   /* ARRAY / OBJECT: n values */
  size_t n;
};

/* Parses text[0..len). Returns NULL with err set on malformed input. */
gemmd_json_value_t *gemmd_json_parse(const char *text, size_t len, char *err, size_t errlen);
void gemmd_json_free(gemmd_json_value_t *v);
/* Member of an object by key, or NULL. */
const gemmd_json_value_t *gemmd_json_get(const gemmd_json_value_t *obj, const char *key);

#endif /* GEMMD_DAEMON_JSON_H_ */
