/* Internal: a small JSON writer into a growable string (compact output). Commas are
 * placed by the writer; values after a key need no separator. Memory failures are
 * remembered and reported once, by gemmd_json_finish. */
#ifndef GEMMD_CLIENT_LIB_JSON_WRITER_H_
#define GEMMD_CLIENT_LIB_JSON_WRITER_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GEMMD_JSON_MAX_DEPTH 32

typedef struct gemmd_json_writer_s {
  char *buf;
  size_t len, cap;
  int failed;
  int depth;
  int after_key;                   /* a key was written; its value comes next */
  int count[GEMMD_JSON_MAX_DEPTH]; /* values written at each open level */
} gemmd_json_writer_t;

void gemmd_json_init(gemmd_json_writer_t *j);
void gemmd_json_begin_object(gemmd_json_writer_t *j);
void gemmd_json_end_object(gemmd_json_writer_t *j);
void gemmd_json_begin_array(gemmd_json_writer_t *j);
void gemmd_json_end_array(gemmd_json_writer_t *j);
void gemmd_json_key(gemmd_json_writer_t *j, const char *key);
void gemmd_json_string(gemmd_json_writer_t *j, const char *s); /* NULL is written as "" */
void gemmd_json_u64(gemmd_json_writer_t *j, uint64_t v);
void gemmd_json_i64(gemmd_json_writer_t *j, int64_t v);
/* Whole numbers below 1e15 as integers, else the shortest %g text that reads back as the
 * same double; "NaN", "Infinity", "-Infinity" as
 * strings (proto3 JSON). */
void gemmd_json_double(gemmd_json_writer_t *j, double v);
void gemmd_json_bool(gemmd_json_writer_t *j, int v);

/* Hands over the text (malloc'd, NUL-terminated) and returns 0; or frees everything and
 * returns -1 after a memory failure or unbalanced nesting. */
int gemmd_json_finish(gemmd_json_writer_t *j, char **out);
void gemmd_json_discard(gemmd_json_writer_t *j);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_LIB_JSON_WRITER_H_ */
