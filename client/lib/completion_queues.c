/* Completion queues: the pool for synchronous calls, the async loop and its thread. */
#include "client/lib/completion_queues.h"

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

static void *loop_main(void *arg) {
  gemmd_async_loop_t *l = arg;
  for (;;) {
    const grpc_event ev =
        grpc_completion_queue_next(l->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
    if (ev.type != GRPC_OP_COMPLETE) continue;
    /* The tag was filled in before its batch started, by a thread that then counted the
     * call in under mu (gemmd_async_loop_begin). gRPC's queue orders that before this
     * event; taking mu here orders it for tools that see only our own locks (TSan). */
    pthread_mutex_lock(&l->mu);
    pthread_mutex_unlock(&l->mu);
    gemmd_async_tag_t *tag = ev.tag;
    tag->complete(tag, ev.success);
    gemmd_async_loop_end(l);
  }
  return NULL;
}

int gemmd_async_loop_start(gemmd_async_loop_t *l) {
  memset(l, 0, sizeof *l);
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->idle, NULL);
  l->initialized = 1;
  l->cq = grpc_completion_queue_create_for_next(NULL);
  if (l->cq == NULL) return -1;
  if (pthread_create(&l->thread, NULL, loop_main, l) != 0) {
    grpc_completion_queue_shutdown(l->cq);
    grpc_completion_queue_destroy(l->cq);
    l->cq = NULL;
    return -1;
  }
  l->running = 1;
  return 0;
}

void gemmd_async_loop_begin(gemmd_async_loop_t *l) {
  pthread_mutex_lock(&l->mu);
  l->outstanding++;
  pthread_mutex_unlock(&l->mu);
}

void gemmd_async_loop_end(gemmd_async_loop_t *l) {
  pthread_mutex_lock(&l->mu);
  if (--l->outstanding == 0) pthread_cond_broadcast(&l->idle);
  pthread_mutex_unlock(&l->mu);
}

void gemmd_async_loop_drain(gemmd_async_loop_t *l) {
  pthread_mutex_lock(&l->mu);
  while (l->outstanding > 0) pthread_cond_wait(&l->idle, &l->mu);
  pthread_mutex_unlock(&l->mu);
}

void gemmd_async_loop_stop(gemmd_async_loop_t *l) {
  if (!l->initialized) return;
  if (l->running) {
    gemmd_async_loop_drain(l);
    grpc_completion_queue_shutdown(l->cq);
    pthread_join(l->thread, NULL);
    grpc_completion_queue_destroy(l->cq);
  }
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->idle);
  memset(l, 0, sizeof *l);
}
