/* The shared-memory transport (docs/shm-protocol.md): a Unix socket for the handshake,
 * a sealed memfd arena per client with submission and completion rings, eventfd
 * doorbells. Runs on the loop thread: sockets and doorbells are uv_poll handles.
 *
 * Each client is held to its in-flight limit (entries beyond it wait in its ring), its
 * descriptors are validated against its own arena, and when it goes away (socket EOF or
 * a protocol violation) what it had in flight finishes, the answers are dropped and the
 * arena is unmapped with the last of them. */
#ifndef GEMMD_DAEMON_SHM_SERVER_H_
#define GEMMD_DAEMON_SHM_SERVER_H_

#include <stddef.h>

#include "daemon/server.h"

typedef struct gemmd_shm_server_s gemmd_shm_server_t;

/* Listens on --shm-socket. Returns 0, or GEMMD_EIO / GEMMD_EINVAL with err set. */
int gemmd_shm_start(gemmd_server_t *srv, gemmd_shm_server_t **out, char *err, size_t errlen);

/* Stops taking connections and new entries; clients are closed once their in-flight
 * requests are answered; done(srv) runs on the loop when everything is freed. */
void gemmd_shm_stop(gemmd_shm_server_t *ss, void (*done)(gemmd_server_t *srv));

/* Connected clients (gemmd_shm_clients). */
unsigned gemmd_shm_clients(const gemmd_shm_server_t *ss);

/* Bytes of the clients' arenas registered with the engine (--shm-pin-arenas). */
uint64_t gemmd_shm_pinned_bytes(const gemmd_shm_server_t *ss);

#endif /* GEMMD_DAEMON_SHM_SERVER_H_ */
