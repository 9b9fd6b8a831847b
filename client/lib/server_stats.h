/* Internal: ServerStats (protobuf-c) -> gemmd_server_stats_t. */
#ifndef GEMMD_CLIENT_LIB_SERVER_STATS_H_
#define GEMMD_CLIENT_LIB_SERVER_STATS_H_

#include "client/lib/gemmclient.h"
#include "gemmd/v1/gemm.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Deep copy; RESOURCE_EXHAUSTED (and *out freed) when memory runs out. */
int gemmd_server_stats_from_pb(const Gemmd__V1__ServerStats *pb, gemmd_server_stats_t *out,
                               gemmd_status_t *status);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_LIB_SERVER_STATS_H_ */
