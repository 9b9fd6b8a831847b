/* The async completion queue and its thread. */
#include "client/async_loop.h"

#include <string.h>

static void *loop_main(void *arg) {
  gemmd_async_loop_t *l = arg;
  for (;;) {
    const grpc_event ev =
        grpc_completion_queue_next(l->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
    if (ev.type != GRPC_OP_COMPLETE) continue;
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
