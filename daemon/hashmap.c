#include "daemon/hashmap.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/errors.h"

enum { EMPTY = 0, DELETED = 1 };

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x | 2u;
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return mix(h);
}

void gemmd_map_init(gemmd_map_t *m, int string_keys) {
  memset(m, 0, sizeof *m);
  m->string_keys = string_keys;
}

void gemmd_map_free(gemmd_map_t *m) {
  if (m->string_keys) {
    for (size_t i = 0; i < m->cap; i++) {
      if (m->slots[i].hash > DELETED) free((char *)(uintptr_t)m->slots[i].key);
    }
  }
  free(m->slots);
  memset(m, 0, sizeof *m);
}

static int key_eq(const gemmd_map_t *m, const gemmd_map_entry_t *e, uint64_t key) {
  if (m->string_keys) return strcmp((const char *)(uintptr_t)e->key, (const char *)(uintptr_t)key) == 0;
  return e->key == key;
}

/* Slot holding key, or NULL. */
static gemmd_map_entry_t *find(const gemmd_map_t *m, uint64_t h, uint64_t key) {
  if (m->cap == 0) return NULL;
  for (size_t i = h & (m->cap - 1), probes = 0; probes < m->cap; i = (i + 1) & (m->cap - 1), probes++) {
    gemmd_map_entry_t *e = &m->slots[i];
    if (e->hash == EMPTY) return NULL;
    if (e->hash == h && key_eq(m, e, key)) return e;
  }
  return NULL;
}

static int grow(gemmd_map_t *m) {
  const size_t cap = m->cap ? m->cap * 2 : 16;
  gemmd_map_entry_t *slots = calloc(cap, sizeof *slots);
  if (slots == NULL) return GEMMD_ENOMEM;
  for (size_t i = 0; i < m->cap; i++) {
    const gemmd_map_entry_t *e = &m->slots[i];
    if (e->hash <= DELETED) continue;
    size_t j = e->hash & (cap - 1);
    while (slots[j].hash != EMPTY) j = (j + 1) & (cap - 1);
    slots[j] = *e;
  }
  free(m->slots);
  m->slots = slots;
  m->cap = cap;
  m->used = m->count;
  return GEMMD_OK;
}

static int put(gemmd_map_t *m, uint64_t h, uint64_t key, void *value) {
  if (find(m, h, key) != NULL) return GEMMD_EEXIST;
  if ((m->used + 1) * 4 > m->cap * 3 && grow(m) != GEMMD_OK) return GEMMD_ENOMEM;
  size_t i = h & (m->cap - 1);
  while (m->slots[i].hash > DELETED) i = (i + 1) & (m->cap - 1);
  if (m->slots[i].hash == EMPTY) m->used++;
  m->slots[i] = (gemmd_map_entry_t){h, key, value};
  m->count++;
  return GEMMD_OK;
}

int gemmd_map_put_str(gemmd_map_t *m, const char *key, void *value) {
  const uint64_t h = hash_str(key);
  if (find(m, h, (uint64_t)(uintptr_t)key) != NULL) return GEMMD_EEXIST;
  char *copy = strdup(key);
  if (copy == NULL) return GEMMD_ENOMEM;
  const int rc = put(m, h, (uint64_t)(uintptr_t)copy, value);
  if (rc != GEMMD_OK) free(copy);
  return rc;
}

int gemmd_map_put_u64(gemmd_map_t *m, uint64_t key, void *value) {
  return put(m, mix(key), key, value);
}

void *gemmd_map_get_str(const gemmd_map_t *m, const char *key) {
  const gemmd_map_entry_t *e = find(m, hash_str(key), (uint64_t)(uintptr_t)key);
  return e ? e->value : NULL;
}

void *gemmd_map_get_u64(const gemmd_map_t *m, uint64_t key) {
  const gemmd_map_entry_t *e = find(m, mix(key), key);
  return e ? e->value : NULL;
}

static void *del(gemmd_map_t *m, gemmd_map_entry_t *e) {
  if (e == NULL) return NULL;
  void *v = e->value;
  if (m->string_keys) free((char *)(uintptr_t)e->key);
  e->hash = DELETED;
  e->key = 0;
  e->value = NULL;
  m->count--;
  return v;
}

void *gemmd_map_del_str(gemmd_map_t *m, const char *key) {
  return del(m, find(m, hash_str(key), (uint64_t)(uintptr_t)key));
}

void *gemmd_map_del_u64(gemmd_map_t *m, uint64_t key) { return del(m, find(m, mix(key), key)); }

void gemmd_map_each(const gemmd_map_t *m, void (*fn)(void *ctx, void *value), void *ctx) {
  for (size_t i = 0; i < m->cap; i++) {
    if (m->slots[i].hash > DELETED) fn(ctx, m->slots[i].value);
  }
}
