/* Small open-addressing hash maps for the loop thread: string keys (weight names,
 * connection peers) and 64-bit keys (weight ids). Keys are copied (strings) or stored
 * (u64); values are opaque pointers. Not thread-safe. */
#ifndef GEMMD_DAEMON_HASHMAP_H_
#define GEMMD_DAEMON_HASHMAP_H_

#include <stddef.h>
#include <stdint.h>

typedef struct gemmd_map_entry_s {
  uint64_t hash; /* 0: empty; 1: deleted; else the key's hash | 2 */
  uint64_t key;  /* u64 key, or (char *) for string maps */
  void *value;
} gemmd_map_entry_t;

typedef struct gemmd_map_s {
  gemmd_map_entry_t *slots;
  size_t cap, count, used; /* used counts deleted slots too */
  int string_keys;
} gemmd_map_t;

void gemmd_map_init(gemmd_map_t *m, int string_keys);
void gemmd_map_free(gemmd_map_t *m);

/* Returns 0, GEMMD_EEXIST (key present; nothing changed) or GEMMD_ENOMEM. */
int gemmd_map_put_str(gemmd_map_t *m, const char *key, void *value);
int gemmd_map_put_u64(gemmd_map_t *m, uint64_t key, void *value);
void *gemmd_map_get_str(const gemmd_map_t *m, const char *key);
void *gemmd_map_get_u64(const gemmd_map_t *m, uint64_t key);
/* Returns the removed value, or NULL. */
void *gemmd_map_del_str(gemmd_map_t *m, const char *key);
void *gemmd_map_del_u64(gemmd_map_t *m, uint64_t key);

/* Visits every live entry (do not modify the map inside). */
void gemmd_map_each(const gemmd_map_t *m, void (*fn)(void *ctx, void *value), void *ctx);

#endif /* GEMMD_DAEMON_HASHMAP_H_ */
