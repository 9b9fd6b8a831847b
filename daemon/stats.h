/* ServerStats (gemm.proto): what GetStats and GET /stats report, built on the loop
 * thread from the server's state and metrics. */
#ifndef GEMMD_DAEMON_STATS_H_
#define GEMMD_DAEMON_STATS_H_

#include "daemon/server.h"
#include "gemmd/v1/gemm.pb-c.h"

/* Copies the current gauges (queue depth, in flight, weights, memory) into metrics. */
void gemmd_stats_refresh_gauges(gemmd_server_t *srv);

/* A packed ServerStats message (malloc'd; *len bytes), or NULL when out of memory. */
uint8_t *gemmd_stats_pack(gemmd_server_t *srv, size_t *len);

/* ServerStats as JSON (malloc'd, NUL-terminated; field names as in gemm.proto), or NULL. */
char *gemmd_stats_json(gemmd_server_t *srv);

#endif /* GEMMD_DAEMON_STATS_H_ */
