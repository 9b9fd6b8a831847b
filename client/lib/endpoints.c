/* Several gRPC endpoints: round-robin, retry, and weight ids per endpoint. See endpoints.h. */
#include "client/lib/endpoints.h"

#include <stdlib.h>
#include <string.h>

size_t gemmd_endpoint_pick(gemmd_client_t *c) {
  if (c->n_channels <= 1) return 0;
  return atomic_fetch_add_explicit(&c->next_endpoint, 1, memory_order_relaxed) % c->n_channels;
}

int gemmd_endpoint_retryable(int code) { return code == GEMMD_STATUS_UNAVAILABLE; }

uint64_t gemmd_endpoint_weight_id(gemmd_client_t *c, uint64_t id, size_t ep) {
  if (c->n_channels <= 1 || id == 0) return id;
  uint64_t out = id;
  pthread_mutex_lock(&c->ids_mu);
  for (size_t i = 0; i < c->n_ids; i++) {
    if (c->ids[i].per_endpoint[0] == id) {
      out = c->ids[i].per_endpoint[ep];
      break;
    }
  }
  pthread_mutex_unlock(&c->ids_mu);
  return out;
}

int gemmd_endpoint_ids_add(gemmd_client_t *c, const uint64_t *ids) {
  if (c->n_channels <= 1) return 0;
  pthread_mutex_lock(&c->ids_mu);
  size_t i = 0;
  while (i < c->n_ids && c->ids[i].per_endpoint[0] != ids[0]) i++; /* a re-registration */
  int rc = 0;
  if (i == c->n_ids) {
    if (c->n_ids == c->cap_ids) {
      const size_t cap = c->cap_ids ? 2 * c->cap_ids : 16;
      gemmd_weight_ids_t *grown = realloc(c->ids, cap * sizeof *grown);
      if (grown == NULL) {
        rc = -1;
      } else {
        c->ids = grown;
        c->cap_ids = cap;
      }
    }
    if (rc == 0) c->n_ids++;
  }
  if (rc == 0) {
    memset(&c->ids[i], 0, sizeof c->ids[i]);
    memcpy(c->ids[i].per_endpoint, ids, c->n_channels * sizeof ids[0]);
  }
  pthread_mutex_unlock(&c->ids_mu);
  return rc;
}

void gemmd_endpoint_ids_remove(gemmd_client_t *c, uint64_t id) {
  pthread_mutex_lock(&c->ids_mu);
  for (size_t i = 0; i < c->n_ids; i++) {
    if (c->ids[i].per_endpoint[0] == id) {
      c->ids[i] = c->ids[--c->n_ids];
      break;
    }
  }
  pthread_mutex_unlock(&c->ids_mu);
}

void gemmd_endpoint_ids_free(gemmd_client_t *c) {
  free(c->ids);
  c->ids = NULL;
  c->n_ids = c->cap_ids = 0;
}
