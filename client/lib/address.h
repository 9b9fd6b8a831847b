/* Internal: which transport an address names (the one place that decides it). */
#ifndef GEMMD_CLIENT_LIB_ADDRESS_H_
#define GEMMD_CLIENT_LIB_ADDRESS_H_

#include "client/lib/gemmclient.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { GEMMD_TRANSPORT_GRPC = 0, GEMMD_TRANSPORT_SHM = 1 } gemmd_transport_t;

typedef struct gemmd_address_s {
  gemmd_transport_t transport;
  const char *target; /* points into the address: the gRPC target, or the socket path */
} gemmd_address_t;

/* "unix:///abs/path" or "unix:path" -> SHM with the path; anything else non-empty ->
 * GRPC with the whole address as target ("host:port", "dns:///h:p", "ipv4:...",
 * "[::1]:p"). Empty or NULL addresses, and "unix:" with no path, are INVALID_ARGUMENT. */
int gemmd_address_parse(const char *address, gemmd_address_t *out, gemmd_status_t *status);

/* "grpc" or "shm". */
const char *gemmd_transport_name(gemmd_transport_t t);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_LIB_ADDRESS_H_ */
