/* Abseil's mutex deadlock detection, which gRPC's mutexes run through.
 *
 * Debian builds Abseil without NDEBUG, so every absl::Mutex lock also records the lock order
 * in one process-wide graph behind a global spin lock: a release build of Abseil skips
 * that. gRPC takes several mutexes per call, so gemmd's completion-queue threads spent about
 * a quarter of their time there, its spin lock included (docs/bench/serving.md,
 * session 46).
 * gemmd and libgemmclient switch it off before their first grpc_init. */
#ifndef GEMMD_THIRD_PARTY_SYSTEM_ABSL_DEADLOCK_DETECTION_H_
#define GEMMD_THIRD_PARTY_SYSTEM_ABSL_DEADLOCK_DETECTION_H_

#ifdef __cplusplus
extern "C" {
#endif

/* absl::SetMutexDeadlockDetectionMode(kIgnore), for the whole process. Safe to call from
 * any thread, any number of times. */
void gemmd_absl_deadlock_detection_off(void);

#ifdef __cplusplus
}
#endif

#endif
