/* The daemon's one clock: CLOCK_MONOTONIC in ns, for every time a request or batch
 * carries (the loop and the engines' threads compare each other's marks). */
#ifndef GEMMD_DAEMON_CLOCK_H_
#define GEMMD_DAEMON_CLOCK_H_

#include <stdint.h>
#include <time.h>

static inline uint64_t gemmd_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* GEMMD_DAEMON_CLOCK_H_ */
