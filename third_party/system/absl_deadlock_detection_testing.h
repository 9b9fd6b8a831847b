/* For tests of gemmd_absl_deadlock_detection_off: two of gRPC's mutexes (Abseil's underneath)
 * taken in one order, then in the other. On one thread that is harmless, but it closes a
 * cycle in the lock-order graph, on which Debian's Abseil, tracking, aborts the process. */
#ifndef GEMMD_THIRD_PARTY_SYSTEM_ABSL_DEADLOCK_DETECTION_TESTING_H_
#define GEMMD_THIRD_PARTY_SYSTEM_ABSL_DEADLOCK_DETECTION_TESTING_H_

#include <grpc/support/sync.h>

static inline void gemmd_invert_grpc_lock_order(void) {
  gpr_mu a, b;
  gpr_mu_init(&a);
  gpr_mu_init(&b);
  gpr_mu_lock(&a);
  gpr_mu_lock(&b);
  gpr_mu_unlock(&b);
  gpr_mu_unlock(&a);
  gpr_mu_lock(&b);
  gpr_mu_lock(&a);
  gpr_mu_unlock(&a);
  gpr_mu_unlock(&b);
  gpr_mu_destroy(&a);
  gpr_mu_destroy(&b);
}

#endif
