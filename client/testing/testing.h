/* Test-only: CHECK(cond, fmt, ...) prints where and why, then exits 1. */
#ifndef GEMMD_CLIENT_TESTING_TESTING_H_
#define GEMMD_CLIENT_TESTING_TESTING_H_

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                         \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: check failed: %s\n  ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                              \
      fprintf(stderr, "\n");                                                     \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

#endif /* GEMMD_CLIENT_TESTING_TESTING_H_ */
