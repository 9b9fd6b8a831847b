/* Status code names and the status setter. */
#include <stdarg.h>
#include <stdio.h>

#include "client/lib/gemmclient.h"
#include "client/lib/status.h"

static const char *const kStatusNames[] = {
    "OK",
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
    "UNAUTHENTICATED",
};

const char *gemmd_status_name(int code) {
  if (code < 0 || code >= (int)(sizeof kStatusNames / sizeof kStatusNames[0])) {
    return "UNKNOWN_CODE";
  }
  return kStatusNames[code];
}

int gemmd_status_set(gemmd_status_t *st, int code, const char *fmt, ...) {
  if (st == NULL) return code;
  st->code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(st->message, sizeof st->message, fmt, ap);
  va_end(ap);
  return code;
}

void gemmd_status_clear(gemmd_status_t *st) {
  if (st == NULL) return;
  st->code = GEMMD_STATUS_OK;
  st->message[0] = '\0';
}
