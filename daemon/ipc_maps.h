/* One mapping per CUDA IPC handle for the whole process.
 *
 * A process may open a CUDA IPC handle only once (a second cudaIpcOpenMemHandle of it gives
 * "resource already mapped"), but several clients' regions may name one allocation: two
 * connections of one model worker whose tensors torch's caching allocator put in the same
 * block. So each handle is opened at its first region and closed with its last; each
 * region still belongs to its own connection (shm_server.c checks region ids per
 * connection). Sharing the mapping grants a client nothing new: an IPC handle is a
 * capability, and whoever holds its bytes can open it in a process of its own.
 * Thread-safe: regions are opened on the uv pool and closed on the loop or the pool. The
 * opening and closing are the engine's (functions given at init), so that this
 * bookkeeping builds and is tested without CUDA. */
#ifndef GEMMD_DAEMON_IPC_MAPS_H_
#define GEMMD_DAEMON_IPC_MAPS_H_

#include <pthread.h>
#include <stdint.h>

enum { GEMMD_IPC_HANDLE_BYTES = 64 };

/* 0 and *p mapped, or the opener's own non-zero error (left for the caller to report). */
typedef int (*gemmd_ipc_open_fn)(void *ctx, const uint8_t handle[GEMMD_IPC_HANDLE_BYTES], void **p);
typedef void (*gemmd_ipc_close_fn)(void *ctx, void *p);

typedef struct gemmd_ipc_map_s gemmd_ipc_map_t;

typedef struct {
  pthread_mutex_t mu;
  gemmd_ipc_map_t *maps;
  uint32_t n, cap;
  gemmd_ipc_open_fn open;
  gemmd_ipc_close_fn close;
  void *ctx;
} gemmd_ipc_maps_t;

void gemmd_ipc_maps_init(gemmd_ipc_maps_t *m, gemmd_ipc_open_fn open, gemmd_ipc_close_fn close, void *ctx);
/* Closes whatever is still mapped. */
void gemmd_ipc_maps_destroy(gemmd_ipc_maps_t *m);

/* The handle's mapping, opened now or shared with the regions that hold it already: 0, the
 * opener's error, or GEMMD_IPC_NO_MEMORY. */
#define GEMMD_IPC_NO_MEMORY (-1)
int gemmd_ipc_maps_acquire(gemmd_ipc_maps_t *m, const uint8_t handle[GEMMD_IPC_HANDLE_BYTES], void **p);

/* One holder of the mapping at p lets go; the last closes it. -1 if p is not mapped here. */
int gemmd_ipc_maps_release(gemmd_ipc_maps_t *m, void *p);

/* Handles mapped now (for tests). */
uint32_t gemmd_ipc_maps_count(gemmd_ipc_maps_t *m);

#endif /* GEMMD_DAEMON_IPC_MAPS_H_ */
