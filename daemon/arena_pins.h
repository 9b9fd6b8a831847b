/* Which parts of a shared-memory arena are registered with the engine (pinned), and the
 * uv pool jobs that register them.
 *
 * The arena is cut into pieces at GEMMD_PIN_CHUNK-aligned addresses (engine.h). The loop
 * asks, for each operand of a request, whether its bytes are pinned: if they are, the
 * engine moves them by DMA straight from and into the arena; if not, the request takes
 * the copying path, and its pieces are queued for a pool job that populates and registers
 * them. So only what requests use gets pinned, once, in the background, and a client that
 * connects and leaves without sending costs nothing (registration holds every CUDA call of
 * the process while it runs, docs/bench/serving.md).
 *
 * Every function runs on the loop thread except gemmd_arena_pins_unregister (pool). */
#ifndef GEMMD_DAEMON_ARENA_PINS_H_
#define GEMMD_DAEMON_ARENA_PINS_H_

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "daemon/engine.h"

typedef struct {
  uv_loop_t *loop;
  gemmd_engine_t *engine; /* NULL: nothing is ever pinned */
  uint8_t *base;
  size_t bytes;
  uint32_t n_pieces;
  uint8_t *state; /* per piece: arena_pins.c's PIECE_* */
  uint32_t n_queued, n_pinned;
  uint64_t pinned_bytes;
  uint64_t *pinned_total; /* the server's sum over all arenas (loop thread), kept up to date */
  int64_t delay_us; /* tests: each job takes this much longer, as registration does on a GPU */
  /* A job holds its owner (the client, and with it the arena) from start to end. */
  void (*hold)(void *ctx);
  void (*release)(void *ctx);
  void *ctx;
  uint32_t client_id; /* for the log */
  /* the job in flight, if any */
  uv_work_t work;
  int working;
  uint32_t *job_pieces;
  uint8_t *job_ok;
  uint32_t job_n;
  uint64_t job_started_ns;
} gemmd_arena_pins_t;

/* Sets p up for the arena [base, base + bytes). engine may be NULL, or one without
 * arena_register: then nothing is pinned (except that a test delay still runs its jobs).
 * Returns 0 or GEMMD_ENOMEM. */
int gemmd_arena_pins_init(gemmd_arena_pins_t *p, uv_loop_t *loop, gemmd_engine_t *engine, uint8_t *base,
                          size_t bytes, int64_t delay_us, void (*hold)(void *), void (*release)(void *),
                          void *ctx, uint32_t client_id, uint64_t *pinned_total);

/* 1 when every byte of [offset, offset + len) (arena offsets, already validated) is
 * registered; else 0, and the pieces not yet asked for are queued for pinning. */
int gemmd_arena_pins_ready(gemmd_arena_pins_t *p, uint64_t offset, uint64_t len);

/* Queues every piece of the arena (--shm-pin-arenas all). */
void gemmd_arena_pins_want_all(gemmd_arena_pins_t *p);

/* Whether any piece is registered (then the arena must be unregistered before unmapping).
 * Loop thread, when the client is gone: takes the arena's pinned bytes out of the
 * server's total, as gemmd_arena_pins_unregister will unpin them. */
int gemmd_arena_pins_retire(gemmd_arena_pins_t *p);

/* Pool thread, when no request uses the arena and no job runs: takes back every
 * registration. */
void gemmd_arena_pins_unregister(gemmd_arena_pins_t *p);

/* Frees p's own memory. */
void gemmd_arena_pins_free(gemmd_arena_pins_t *p);

#endif /* GEMMD_DAEMON_ARENA_PINS_H_ */
