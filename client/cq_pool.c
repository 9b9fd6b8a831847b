/* Pool of pluck completion queues for synchronous calls. */
#include "client/cq_pool.h"

#include <stdlib.h>
#include <string.h>

static void destroy_cq(grpc_completion_queue *cq) {
  grpc_completion_queue_shutdown(cq);
  /* With nothing pending the queue is shut down at once; a pluck sees it. */
  (void)grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  grpc_completion_queue_destroy(cq);
}

void gemmd_cq_pool_init(gemmd_cq_pool_t *p) {
  memset(p, 0, sizeof *p);
  pthread_mutex_init(&p->mu, NULL);
}

grpc_completion_queue *gemmd_cq_pool_get(gemmd_cq_pool_t *p) {
  grpc_completion_queue *cq = NULL;
  pthread_mutex_lock(&p->mu);
  if (p->n > 0) cq = p->idle[--p->n];
  pthread_mutex_unlock(&p->mu);
  return cq != NULL ? cq : grpc_completion_queue_create_for_pluck(NULL);
}

void gemmd_cq_pool_put(gemmd_cq_pool_t *p, grpc_completion_queue *cq) {
  pthread_mutex_lock(&p->mu);
  if (p->n == p->cap) {
    const size_t cap = p->cap ? 2 * p->cap : 8;
    grpc_completion_queue **idle = realloc(p->idle, cap * sizeof *idle);
    if (idle != NULL) {
      p->idle = idle;
      p->cap = cap;
    }
  }
  const int kept = p->n < p->cap;
  if (kept) p->idle[p->n++] = cq;
  pthread_mutex_unlock(&p->mu);
  if (!kept) destroy_cq(cq);
}

void gemmd_cq_pool_destroy(gemmd_cq_pool_t *p) {
  for (size_t i = 0; i < p->n; i++) destroy_cq(p->idle[i]);
  free(p->idle);
  pthread_mutex_destroy(&p->mu);
  memset(p, 0, sizeof *p);
}
