/* Helpers of the fuzz targets: reading what a parser says is in bounds (so that the
 * sanitizers see it), marking memory out of bounds, and invariants that abort. */
#ifndef GEMMD_FUZZ_FUZZ_UTIL_H_
#define GEMMD_FUZZ_FUZZ_UTIL_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/operand.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_ASAN 1
#endif

#ifdef FUZZ_ASAN
#include <sanitizer/asan_interface.h>
#define FUZZ_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define FUZZ_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define FUZZ_POISON(p, n) ((void)(p), (void)(n))
#define FUZZ_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* An invariant of the code under test: a failure is a bug, reported like a crash. */
#define fuzz_check(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "%s:%d: fuzz_check failed: %s\n", __FILE__, __LINE__, #cond);   \
      abort();                                                                        \
    }                                                                                 \
  } while (0)

/* Reads every byte of [p, p + n), as a consumer of the memory would. */
static inline void fuzz_touch(const void *p, size_t n) {
  const volatile uint8_t *b = p;
  uint8_t sum = 0;
  for (size_t i = 0; i < n; i++) sum ^= b[i];
  (void)sum;
}

/* Reads an operand's bytes and scales as the engines do (scales as floats). */
static inline void fuzz_touch_operand(const gemmd_operand_t *op) {
  fuzz_check(op->ld >= op->cols);
  const size_t esz = gemmd_dtype_size(op->dtype);
  if (op->rows > 0) fuzz_touch(op->data, ((size_t)(op->rows - 1) * op->ld + op->cols) * esz);
  const size_t ns = gemmd_scale_count(op->scale_layout, op->rows, op->cols);
  fuzz_check(ns == 0 || op->scales != NULL);
  volatile float sum = 0.0f;
  for (size_t i = 0; i < ns; i++) sum += op->scales[i];
  (void)sum;
}

/* A message a check wrote: NUL-terminated inside its buffer. */
static inline void fuzz_check_message(const char *msg, size_t n) { fuzz_check(memchr(msg, '\0', n) != NULL); }

#endif /* GEMMD_FUZZ_FUZZ_UTIL_H_ */
