/* Status names match the gRPC codes on the wire; the setter formats, truncates, and
 * tolerates a NULL status. */
#include <string.h>

#include "client/lib/gemmclient.h"
#include "client/lib/status.h"
#include "client/testing/testing.h"

int main(void) {
  static const char *const want[] = {"OK",
                                     "CANCELLED",
                                     "UNKNOWN",
                                     "INVALID_ARGUMENT",
                                     "DEADLINE_EXCEEDED",
                                     "NOT_FOUND",
                                     "ALREADY_EXISTS",
                                     "PERMISSION_DENIED",
                                     "RESOURCE_EXHAUSTED",
                                     "FAILED_PRECONDITION",
                                     "ABORTED",
                                     "OUT_OF_RANGE",
                                     "UNIMPLEMENTED",
                                     "INTERNAL",
                                     "UNAVAILABLE",
                                     "DATA_LOSS",
                                     "UNAUTHENTICATED"};
  for (int code = 0; code <= 16; code++) {
    CHECK(strcmp(gemmd_status_name(code), want[code]) == 0, "code %d: %s", code,
          gemmd_status_name(code));
  }
  CHECK(strcmp(gemmd_status_name(GEMMD_STATUS_NOT_FOUND), "NOT_FOUND") == 0, "enum value");
  CHECK(strcmp(gemmd_status_name(14), "UNAVAILABLE") == 0, "14");
  CHECK(strcmp(gemmd_status_name(-1), "UNKNOWN_CODE") == 0, "-1");
  CHECK(strcmp(gemmd_status_name(17), "UNKNOWN_CODE") == 0, "17");

  gemmd_status_t st;
  CHECK(gemmd_status_set(&st, 5, "no weight named '%s'", "x") == 5, "returns the code");
  CHECK(st.code == 5 && strcmp(st.message, "no weight named 'x'") == 0, "%s", st.message);

  char long_msg[2000];
  memset(long_msg, 'a', sizeof long_msg - 1);
  long_msg[sizeof long_msg - 1] = '\0';
  gemmd_status_set(&st, 3, "%s", long_msg);
  CHECK(strlen(st.message) == sizeof st.message - 1, "truncated to %zu", strlen(st.message));

  CHECK(gemmd_status_set(NULL, 8, "ignored") == 8, "NULL status");
  gemmd_status_clear(&st);
  CHECK(st.code == 0 && st.message[0] == '\0', "clear");
  gemmd_status_clear(NULL);
  printf("status_test: ok\n");
  return 0;
}
