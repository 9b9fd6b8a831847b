/* Internal: a gRPC client of several gemmd (address "host1:port1,host2:port2", e.g. one
 * gemmd per GPU). GEMMs go to the endpoints in turn and move on to the next one when an
 * endpoint answers UNAVAILABLE (down, or draining); weights are registered on every
 * endpoint, and since each gemmd numbers its weights itself, the client keeps each
 * weight's id on every endpoint and sends the one that endpoint knows. Admin calls (list,
 * stats, health) go to the first endpoint that answers. */
#ifndef GEMMD_CLIENT_LIB_ENDPOINTS_H_
#define GEMMD_CLIENT_LIB_ENDPOINTS_H_

#include <stddef.h>
#include <stdint.h>

#include "client/lib/client_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The endpoint for the next GEMM or stream: round-robin. */
size_t gemmd_endpoint_pick(gemmd_client_t *c);

/* Whether a call that ended with `code` on one endpoint should be tried on the next. */
int gemmd_endpoint_retryable(int code);

/* The id endpoint `ep` knows for weight `id` (the id this client returned when it
 * registered it; ids it did not register pass unchanged). */
uint64_t gemmd_endpoint_weight_id(gemmd_client_t *c, uint64_t id, size_t ep);

/* After a registration on every endpoint: ids[ep] is the weight's id there; ids[0] is the
 * one the caller sees. 0, or -1 out of memory. */
int gemmd_endpoint_ids_add(gemmd_client_t *c, const uint64_t *ids);

/* After an unregistration: forgets weight `id` (as the caller knows it). */
void gemmd_endpoint_ids_remove(gemmd_client_t *c, uint64_t id);

/* Frees the id table. */
void gemmd_endpoint_ids_free(gemmd_client_t *c);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_LIB_ENDPOINTS_H_ */
