/* Internal: the client object, shared by the files that implement gemmclient.h. */
#ifndef GEMMD_CLIENT_LIB_CLIENT_IMPL_H_
#define GEMMD_CLIENT_LIB_CLIENT_IMPL_H_

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>
#include <pthread.h>
#include <stdatomic.h>

#include "client/lib/address.h"
#include "client/lib/completion_queues.h"
#include "client/lib/gemmclient.h"
#include "client/lib/rpc.h"
#include "client/lib/shm_client.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One weight's id on each endpoint (endpoints.h); per_endpoint[0] is the caller's. */
typedef struct gemmd_weight_ids_s {
  uint64_t per_endpoint[GEMMD_MAX_ENDPOINTS];
} gemmd_weight_ids_t;

struct gemmd_client_s {
  gemmd_transport_t transport;
  /* gRPC: a channel per endpoint of the address (endpoints.h) */
  grpc_channel *channels[GEMMD_MAX_ENDPOINTS];
  char *endpoints[GEMMD_MAX_ENDPOINTS];
  size_t n_channels;
  atomic_size_t next_endpoint;
  pthread_mutex_t ids_mu;
  gemmd_weight_ids_t *ids; /* weights registered through this client, when several endpoints */
  size_t n_ids, cap_ids;
  int64_t timeout_ms;
  gemmd_cq_pool_t cqs;
  gemmd_rpc_wait_t wait;   /* how synchronous calls wait for their answers (rpc.h) */
  gemmd_async_loop_t async;
  gemmd_shm_client_t *shm; /* the shared-memory transport (NULL on gRPC) */
  int has_auth;            /* options.bearer_token given: auth_md goes with every call */
  grpc_metadata auth_md;   /* authorization: Bearer <token> */
};

/* The metadata every call sends (the bearer token), or NULL. */
static inline const grpc_metadata *gemmd_client_auth(const gemmd_client_t *c) {
  return c->has_auth ? &c->auth_md : NULL;
}

/* Refuses an operation the shared-memory transport does not carry. */
int gemmd_client_not_over_shm(const char *what, gemmd_status_t *status);

/* gemmd.v1.GemmService and grpc.health.v1.Health method paths. */
#define GEMMD_METHOD_GEMM "/gemmd.v1.GemmService/Gemm"
#define GEMMD_METHOD_GEMM_STREAM "/gemmd.v1.GemmService/GemmStream"
#define GEMMD_METHOD_REGISTER_WEIGHT "/gemmd.v1.GemmService/RegisterWeight"
#define GEMMD_METHOD_UNREGISTER_WEIGHT "/gemmd.v1.GemmService/UnregisterWeight"
#define GEMMD_METHOD_LIST_WEIGHTS "/gemmd.v1.GemmService/ListWeights"
#define GEMMD_METHOD_GET_STATS "/gemmd.v1.GemmService/GetStats"
#define GEMMD_METHOD_HEALTH_CHECK "/grpc.health.v1.Health/Check"

/* The deadline in ms for a call: its own when non-zero, else the client's. */
int64_t gemmd_client_timeout(const gemmd_client_t *c, int64_t call_timeout_ms);

/* Monotonic nanoseconds. */
uint64_t gemmd_client_now_ns(void);

/* A unary call with message types to endpoint ep: packs req, calls, unpacks *resp (free it
 * with protobuf_c_message_free_unpacked). */
int gemmd_client_call_message_on(gemmd_client_t *c, size_t ep, const char *method,
                                 const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
                                 ProtobufCMessage **resp, gemmd_status_t *status);

/* The same to the first endpoint that answers (the others while one is UNAVAILABLE). */
int gemmd_client_call_message(gemmd_client_t *c, const char *method, const ProtobufCMessage *req,
                              const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                              gemmd_status_t *status);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_LIB_CLIENT_IMPL_H_ */
