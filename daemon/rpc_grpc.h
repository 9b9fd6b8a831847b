/* The gRPC transport: GemmService and grpc.health.v1.Health on gRPC C core.
 *
 * Completion-queue threads (--grpc-threads) receive calls, decode and validate the
 * protobuf messages, normalize operands, and post the work to the loop thread; the loop
 * answers through the functions in rpc_grpc.c, which start the send batches (gRPC allows
 * that from any thread). Every RPC of docs/api.md §2 is served; unknown methods get
 * UNIMPLEMENTED. */
#ifndef GEMMD_DAEMON_RPC_GRPC_H_
#define GEMMD_DAEMON_RPC_GRPC_H_

#include <stddef.h>

#include "daemon/server.h"

/* Before gemmd starts any thread (setenv): sets $GRPC_POLL_STRATEGY from --grpc-poller
 * (auto: keep it when set, else "poll"), which gRPC core reads at its first grpc_init, and
 * switches off Abseil's lock-order tracking of gRPC's mutexes, which cost the
 * completion-queue threads about a quarter of their time at 32 workers
 * (third_party/system/absl_deadlock_detection.h). */
void gemmd_rpc_process_setup(const gemmd_config_t *cfg);

/* Binds --grpc-listen, starts the threads. *port is the bound port.
 * Returns 0, or GEMMD_EIO / GEMMD_EINVAL with err set. Loop thread. */
int gemmd_rpc_start(gemmd_server_t *srv, gemmd_rpc_t **out, int *port, char *err, size_t errlen);

/* Loop thread, every tick: re-reads --grpc-token-file when it changed. */
void gemmd_rpc_tick(gemmd_rpc_t *rpc);

/* Loop thread: stops accepting calls, cancels the ones left (idle streams, health
 * watches), and once every call is gone and the threads have exited, frees the
 * transport and runs done(srv, arg) on the loop. */
void gemmd_rpc_shutdown(gemmd_rpc_t *rpc, void (*done)(gemmd_server_t *srv, void *arg),
                        void *arg);

#endif /* GEMMD_DAEMON_RPC_GRPC_H_ */
