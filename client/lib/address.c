/* Address -> transport, and a gRPC target -> its endpoints. */
#include "client/lib/address.h"

#include <stdlib.h>
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

int gemmd_address_endpoints(const char *target, char *out[GEMMD_MAX_ENDPOINTS], size_t *n,
                            gemmd_status_t *status) {
  *n = 0;
  if (has_prefix(target, "ipv4:") || has_prefix(target, "ipv6:")) { /* gRPC's own address lists */
    out[0] = strdup(target);
    if (out[0] == NULL) return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "no memory");
    *n = 1;
    gemmd_status_clear(status);
    return GEMMD_STATUS_OK;
  }
  for (const char *p = target;;) {
    const char *comma = strchr(p, ',');
    const size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
    const char *why = len == 0                      ? "an empty endpoint"
                      : *n == GEMMD_MAX_ENDPOINTS   ? "more endpoints than the client balances over"
                      : has_prefix(p, "unix:")      ? "a shared-memory address among gRPC endpoints"
                                                    : NULL;
    char *copy = why == NULL ? malloc(len + 1) : NULL;
    if (why == NULL && copy == NULL) {
      for (size_t i = 0; i < *n; i++) free(out[i]);
      *n = 0;
      return gemmd_status_set(status, GEMMD_STATUS_RESOURCE_EXHAUSTED, "no memory");
    }
    if (why != NULL) {
      for (size_t i = 0; i < *n; i++) free(out[i]);
      *n = 0;
      return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT, "address '%s' has %s (at most %d, "
                              "comma-separated HOST:PORT)", target, why, GEMMD_MAX_ENDPOINTS);
    }
    memcpy(copy, p, len);
    copy[len] = '\0';
    out[(*n)++] = copy;
    if (comma == NULL) break;
    p = comma + 1;
  }
  gemmd_status_clear(status);
  return GEMMD_STATUS_OK;
}

const char *gemmd_transport_name(gemmd_transport_t t) {
  return t == GEMMD_TRANSPORT_SHM ? "shm" : "grpc";
}
