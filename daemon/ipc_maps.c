#include "daemon/ipc_maps.h"

#include <stdlib.h>
#include <string.h>

struct gemmd_ipc_map_s {
  uint8_t handle[GEMMD_IPC_HANDLE_BYTES];
  void *p;
  uint32_t holders;
};

void gemmd_ipc_maps_init(gemmd_ipc_maps_t *m, gemmd_ipc_open_fn open, gemmd_ipc_close_fn close, void *ctx) {
  memset(m, 0, sizeof *m);
  pthread_mutex_init(&m->mu, NULL);
  m->open = open;
  m->close = close;
  m->ctx = ctx;
}

void gemmd_ipc_maps_destroy(gemmd_ipc_maps_t *m) {
  for (uint32_t i = 0; i < m->n; i++) m->close(m->ctx, m->maps[i].p);
  free(m->maps);
  pthread_mutex_destroy(&m->mu);
  memset(m, 0, sizeof *m);
}

int gemmd_ipc_maps_acquire(gemmd_ipc_maps_t *m, const uint8_t handle[GEMMD_IPC_HANDLE_BYTES], void **p) {
  pthread_mutex_lock(&m->mu);
  for (uint32_t i = 0; i < m->n; i++) {
    if (memcmp(m->maps[i].handle, handle, GEMMD_IPC_HANDLE_BYTES) == 0) {
      m->maps[i].holders++;
      *p = m->maps[i].p;
      pthread_mutex_unlock(&m->mu);
      return 0;
    }
  }
  int rc = 0;
  if (m->n == m->cap) {
    const uint32_t cap = m->cap ? 2 * m->cap : 16;
    gemmd_ipc_map_t *grown = realloc(m->maps, (size_t)cap * sizeof *grown);
    if (grown == NULL) rc = GEMMD_IPC_NO_MEMORY;
    else {
      m->maps = grown;
      m->cap = cap;
    }
  }
  /* opened under the lock, so that two regions of one handle never both open it */
  if (rc == 0) rc = m->open(m->ctx, handle, p);
  if (rc == 0) {
    gemmd_ipc_map_t *e = &m->maps[m->n++];
    memcpy(e->handle, handle, GEMMD_IPC_HANDLE_BYTES);
    e->p = *p;
    e->holders = 1;
  }
  pthread_mutex_unlock(&m->mu);
  return rc;
}

int gemmd_ipc_maps_release(gemmd_ipc_maps_t *m, void *p) {
  pthread_mutex_lock(&m->mu);
  for (uint32_t i = 0; i < m->n; i++) {
    if (m->maps[i].p != p) continue;
    if (--m->maps[i].holders == 0) {
      m->close(m->ctx, p);
      m->maps[i] = m->maps[--m->n];
    }
    pthread_mutex_unlock(&m->mu);
    return 0;
  }
  pthread_mutex_unlock(&m->mu);
  return -1;
}

uint32_t gemmd_ipc_maps_count(gemmd_ipc_maps_t *m) {
  pthread_mutex_lock(&m->mu);
  const uint32_t n = m->n;
  pthread_mutex_unlock(&m->mu);
  return n;
}
