#include "daemon/weights.h"

#include <stdio.h>
#include <stdlib.h>

#include "daemon/status.h"
#include "kernels/errors.h"


static void add_bytes(gemmd_weights_t *ws, uint64_t plus, uint64_t minus) {
  ws->bytes = ws->bytes + plus - minus;
  atomic_store_explicit(&ws->bytes_shared, ws->bytes, memory_order_relaxed);
}

void gemmd_weights_init(gemmd_weights_t *ws, uint64_t budget_bytes) {
  gemmd_map_init(&ws->by_id, 0);
  gemmd_map_init(&ws->by_name, 1);
  ws->next_id = 1;
  ws->budget = budget_bytes;
  ws->bytes = 0;
  atomic_init(&ws->bytes_shared, 0);
  ws->active = 0;
}

static void free_weight(void *ctx, void *value) {
  (void)ctx;
  gemmd_weight_free(value);
}

void gemmd_weights_close(gemmd_weights_t *ws) {
  gemmd_map_each(&ws->by_name, free_weight, NULL); /* every weight has a name entry */
  gemmd_map_free(&ws->by_id);
  gemmd_map_free(&ws->by_name);
}

gemmd_weight_t *gemmd_weights_find_id(const gemmd_weights_t *ws, uint64_t id) {
  return gemmd_map_get_u64(&ws->by_id, id);
}

gemmd_weight_t *gemmd_weights_find_name(const gemmd_weights_t *ws, const char *name) {
  gemmd_weight_t *w = gemmd_map_get_str(&ws->by_name, name);
  return (w != NULL && w->id != 0 && gemmd_map_get_u64(&ws->by_id, w->id) == w) ? w : NULL;
}

int gemmd_weights_reserve(gemmd_weights_t *ws, gemmd_weight_t *w, char *msg, size_t n) {
  if (gemmd_map_get_str(&ws->by_name, w->name) != NULL) {
    snprintf(msg, n, "a weight named '%s' already exists; unregister it first or pick another name",
             w->name);
    return GEMMD_CODE_ALREADY_EXISTS;
  }
  if (w->id != 0 && gemmd_map_get_u64(&ws->by_id, w->id) != NULL) {
    snprintf(msg, n, "weight id %llu is already in use", (unsigned long long)w->id);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (ws->bytes + w->bytes > ws->budget) {
    snprintf(msg, n,
             "weight '%s' needs %llu bytes but only %llu of the %llu-byte budget are free "
             "(--weight-memory-bytes)",
             w->name, (unsigned long long)w->bytes,
             (unsigned long long)(ws->budget > ws->bytes ? ws->budget - ws->bytes : 0),
             (unsigned long long)ws->budget);
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  if (gemmd_map_put_str(&ws->by_name, w->name, w) != GEMMD_OK) {
    snprintf(msg, n, "out of memory registering '%s'", w->name);
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  add_bytes(ws, w->bytes, 0);
  if (w->id == 0) w->id = ws->next_id;
  if (w->id >= ws->next_id) ws->next_id = w->id + 1;
  return 0;
}

void gemmd_weights_activate(gemmd_weights_t *ws, gemmd_weight_t *w) {
  gemmd_map_put_u64(&ws->by_id, w->id, w);
  ws->active++;
}

void gemmd_weights_unreserve(gemmd_weights_t *ws, gemmd_weight_t *w) {
  gemmd_map_del_str(&ws->by_name, w->name);
  add_bytes(ws, 0, w->bytes);
  gemmd_weight_free(w);
}

int gemmd_weights_remove(gemmd_weights_t *ws, gemmd_weight_t *w) {
  gemmd_map_del_u64(&ws->by_id, w->id);
  gemmd_map_del_str(&ws->by_name, w->name);
  ws->active--;
  w->removed = 1;
  return gemmd_weights_release(w);
}

int gemmd_weights_release(gemmd_weight_t *w) {
  w->refs--;
  return w->removed && w->refs == 0;
}

void gemmd_weights_forget(gemmd_weights_t *ws, gemmd_weight_t *w) {
  add_bytes(ws, 0, w->bytes);
  gemmd_weight_free(w);
}

typedef struct {
  void (*fn)(void *ctx, gemmd_weight_t *w);
  void *ctx;
} each_ctx_t;

static void each_one(void *ctx, void *value) {
  each_ctx_t *e = ctx;
  e->fn(e->ctx, value);
}

void gemmd_weights_each(const gemmd_weights_t *ws, void (*fn)(void *ctx, gemmd_weight_t *w),
                        void *ctx) {
  each_ctx_t e = {fn, ctx};
  gemmd_map_each(&ws->by_id, each_one, &e);
}
