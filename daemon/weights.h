/* The weight registry: registered weights by id and by name, the memory budget, and
 * the reference counts that make unregistering wait for in-flight users.
 *
 * Loop thread only. A weight being registered is first reserved (its name is taken,
 * nothing can use it yet), then activated once its files are written and the engine has
 * its copy. Unregistering unlinks it at once (new requests get NOT_FOUND); its memory is
 * freed when the last in-flight request lets go. */
#ifndef GEMMD_DAEMON_WEIGHTS_H_
#define GEMMD_DAEMON_WEIGHTS_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/hashmap.h"
#include "daemon/weight.h"

typedef struct gemmd_weights_s {
  gemmd_map_t by_id;   /* active weights */
  gemmd_map_t by_name; /* active and reserved weights */
  uint64_t next_id;
  uint64_t budget;     /* bytes; 0 = none allowed */
  uint64_t bytes;      /* held by registered or reserved weights, and removed ones in use */
  /* bytes, for threads other than the loop: the gRPC threads refuse an upload that cannot
   * fit before its data comes (the loop's reservation stays the final check). */
  _Atomic uint64_t bytes_shared;
  uint32_t active;
} gemmd_weights_t;

void gemmd_weights_init(gemmd_weights_t *ws, uint64_t budget_bytes);
/* Frees every weight still held (shutdown; nothing may be in flight). */
void gemmd_weights_close(gemmd_weights_t *ws);

/* Active weights only. */
gemmd_weight_t *gemmd_weights_find_id(const gemmd_weights_t *ws, uint64_t id);
gemmd_weight_t *gemmd_weights_find_name(const gemmd_weights_t *ws, const char *name);

/* Takes the name, an id (a new one when w->id is 0, else the restored one) and the bytes
 * for w (name set).
 * Returns 0, or a gRPC code with a message: ALREADY_EXISTS (name taken),
 * RESOURCE_EXHAUSTED (over the budget), INVALID_ARGUMENT (restored id in use). */
int gemmd_weights_reserve(gemmd_weights_t *ws, gemmd_weight_t *w, char *msg, size_t n);
/* Makes a reserved weight usable. */
void gemmd_weights_activate(gemmd_weights_t *ws, gemmd_weight_t *w);
/* Drops a reservation that failed (files, engine); frees w. */
void gemmd_weights_unreserve(gemmd_weights_t *ws, gemmd_weight_t *w);

/* Unlinks w; returns 1 when it can be freed now (no users), 0 when users remain. */
int gemmd_weights_remove(gemmd_weights_t *ws, gemmd_weight_t *w);

static inline void gemmd_weights_acquire(gemmd_weight_t *w) { w->refs++; }
/* Returns 1 when w was removed and this was the last reference: the caller frees it
 * (after the engine drops its copy) with gemmd_weights_forget. */
int gemmd_weights_release(gemmd_weight_t *w);
/* Returns a removed weight's bytes to the budget and frees it. */
void gemmd_weights_forget(gemmd_weights_t *ws, gemmd_weight_t *w);

/* ws->bytes as last published by the loop; any thread. */
static inline uint64_t gemmd_weights_bytes_shared(gemmd_weights_t *ws) {
  return atomic_load_explicit(&ws->bytes_shared, memory_order_relaxed);
}

/* Visits the active weights. */
void gemmd_weights_each(const gemmd_weights_t *ws, void (*fn)(void *ctx, gemmd_weight_t *w),
                        void *ctx);

#endif /* GEMMD_DAEMON_WEIGHTS_H_ */
