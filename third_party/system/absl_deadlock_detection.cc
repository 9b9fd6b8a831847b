// The one C++ translation unit outside the kernels: Abseil's setting has no C API.
#include "third_party/system/absl_deadlock_detection.h"

#include <absl/synchronization/mutex.h>

extern "C" void gemmd_absl_deadlock_detection_off(void) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}
