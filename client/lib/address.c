/* Address -> transport. Issue 4 adds the shared-memory transport behind "unix:". */
#include "client/lib/address.h"

#include <string.h>

#include "client/lib/status.h"

static int has_prefix(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

int gemmd_address_parse(const char *address, gemmd_address_t *out, gemmd_status_t *status) {
  if (address == NULL || address[0] == '\0') {
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT,
                            "empty address: want HOST:PORT or unix:///PATH");
  }
  if (has_prefix(address, "unix:")) {
    const char *path = address + strlen("unix:");
    if (has_prefix(path, "//")) path += 2; /* unix:///abs/path */
    if (path[0] == '\0') {
      return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT,
                              "address '%s' has no socket path", address);
    }
    out->transport = GEMMD_TRANSPORT_SHM;
    out->target = path;
  } else {
    out->transport = GEMMD_TRANSPORT_GRPC;
    out->target = address;
  }
  gemmd_status_clear(status);
  return GEMMD_STATUS_OK;
}

const char *gemmd_transport_name(gemmd_transport_t t) {
  return t == GEMMD_TRANSPORT_SHM ? "shm" : "grpc";
}
