/* CHECK for the daemon's C unit tests: a failed condition is printed with its place and
 * counted in check_failures; a test's main returns non-zero when any failed. */
#ifndef GEMMD_DAEMON_TEST_CHECK_H_
#define GEMMD_DAEMON_TEST_CHECK_H_

#include <stdio.h>

static int check_failures;

#define CHECK(cond)                                                                \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);     \
      check_failures++;                                                            \
    }                                                                              \
  } while (0)

#endif /* GEMMD_DAEMON_TEST_CHECK_H_ */
