/* gemmd's process: creates the server (server.h) and its engine, restores and preloads
 * weights, starts the HTTP, gRPC and shared-memory listeners, serves the HTTP endpoints,
 * runs the loop, and on SIGTERM/SIGINT drains and stops it. */
#ifndef GEMMD_DAEMON_LIFECYCLE_H_
#define GEMMD_DAEMON_LIFECYCLE_H_

#include "daemon/config.h"

/* Runs gemmd until it is drained and stopped; returns the exit code. */
int gemmd_run(const gemmd_config_t *cfg);

#endif /* GEMMD_DAEMON_LIFECYCLE_H_ */
