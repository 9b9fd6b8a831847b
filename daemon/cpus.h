/* The CPUs gemmd may run on: its affinity mask, which a cpuset narrows, else the online
 * CPUs. gemmd's threads that poll instead of sleeping are sized against it. */
#ifndef GEMMD_DAEMON_CPUS_H_
#define GEMMD_DAEMON_CPUS_H_

#include <sched.h>
#include <unistd.h>

/* The threads of gemmd that poll for work while requests come (loop, stager, completer,
 * a finisher), the gRPC completion-queue threads aside. */
enum { GEMMD_POLLING_THREADS = 4 };

static inline long gemmd_cpus_usable(void) {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
}

#endif /* GEMMD_DAEMON_CPUS_H_ */
