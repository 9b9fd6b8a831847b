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
 * "[::1]:p", or several of them separated by commas). Empty or NULL addresses, and
 * "unix:" with no path, are INVALID_ARGUMENT. */
int gemmd_address_parse(const char *address, gemmd_address_t *out, gemmd_status_t *status);

/* The most gRPC endpoints one client balances over. */
enum { GEMMD_MAX_ENDPOINTS = 16 };

/* A gRPC target of several endpoints, "host1:port1,host2:port2": each one into
 * out[0..*n) (malloc'd copies; free each). One endpoint without a comma is the common case;
 * gRPC's own "ipv4:" and "ipv6:" lists stay one target (gRPC picks among them).
 * Empty endpoints, more than GEMMD_MAX_ENDPOINTS, and a shared-memory address among them
 * are INVALID_ARGUMENT. */
int gemmd_address_endpoints(const char *target, char *out[GEMMD_MAX_ENDPOINTS], size_t *n,
                            gemmd_status_t *status);

/* "grpc" or "shm". */
const char *gemmd_transport_name(gemmd_transport_t t);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_LIB_ADDRESS_H_ */
