/* Internal: the client's gRPC completion queues.
 *  - A pool of idle pluck queues, one borrowed per synchronous call, so that concurrent
 *    callers never share one and none is created per call.
 *  - The async loop: one queue for asynchronous calls and the thread that serves it; it
 *    counts calls in flight so that drain can wait for their callbacks. */
#ifndef GEMMD_CLIENT_LIB_COMPLETION_QUEUES_H_
#define GEMMD_CLIENT_LIB_COMPLETION_QUEUES_H_

#include <grpc/grpc.h>
#include <pthread.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gemmd_cq_pool_s {
  pthread_mutex_t mu;
  grpc_completion_queue **idle;
  size_t n, cap;
} gemmd_cq_pool_t;

void gemmd_cq_pool_init(gemmd_cq_pool_t *p);
/* An idle queue, or a new one; NULL when none can be made. */
grpc_completion_queue *gemmd_cq_pool_get(gemmd_cq_pool_t *p);
/* Back to the pool, with no operation pending on it. */
void gemmd_cq_pool_put(gemmd_cq_pool_t *p, grpc_completion_queue *cq);
/* Shuts down and destroys every idle queue (all must have been put back). */
void gemmd_cq_pool_destroy(gemmd_cq_pool_t *p);

/* Every tag given to the loop's queue starts with this; complete() runs on the loop's
 * thread once the batch ends (ok = its success) and may free the tag. */
typedef struct gemmd_async_tag_s {
  void (*complete)(struct gemmd_async_tag_s *self, int ok);
} gemmd_async_tag_t;

typedef struct gemmd_async_loop_s {
  grpc_completion_queue *cq;
  pthread_t thread;
  int initialized; /* mutex and condition exist */
  int running;     /* queue and thread exist */
  pthread_mutex_t mu;
  pthread_cond_t idle;
  size_t outstanding;
} gemmd_async_loop_t;

/* Creates the queue and starts the thread; 0 or -1. */
int gemmd_async_loop_start(gemmd_async_loop_t *l);
/* Counts one call in flight; call before starting its batch. */
void gemmd_async_loop_begin(gemmd_async_loop_t *l);
/* Uncounts one (the loop does this after complete(); callers only when a start failed). */
void gemmd_async_loop_end(gemmd_async_loop_t *l);
/* Waits until nothing is in flight. Must not be called from complete(). */
void gemmd_async_loop_drain(gemmd_async_loop_t *l);
/* Drains, shuts the queue down, joins the thread, destroys the queue. Safe on a loop
 * that is all zeros or whose start failed. */
void gemmd_async_loop_stop(gemmd_async_loop_t *l);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_LIB_COMPLETION_QUEUES_H_ */
