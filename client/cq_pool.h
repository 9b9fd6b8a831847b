/* Internal: a stack of idle pluck completion queues, one borrowed per synchronous call, so
 * that concurrent callers never share one and none is created per call. */
#ifndef GEMMD_CLIENT_CQ_POOL_H_
#define GEMMD_CLIENT_CQ_POOL_H_

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

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_CQ_POOL_H_ */
