/* libgemmclient's shared-memory transport (docs/shm-protocol.md), behind gemmclient.h:
 * gemmd_client_open("unix:///run/gemmd/gemmd.sock") lands here.
 *
 * Operands given in ordinary memory are copied into the arena (one copy) and D copied
 * out; operands already in the arena (gemmd_client_shm_alloc) are used in place, and D
 * is written in place when call->d_out points into the arena. Safe for many threads:
 * submissions take a lock; each waiter consumes completions itself (spinning briefly,
 * then sleeping on the futex); async callbacks run on one client thread. */
#ifndef GEMMD_CLIENT_LIB_SHM_CLIENT_H_
#define GEMMD_CLIENT_LIB_SHM_CLIENT_H_

#include <stddef.h>
#include <stdint.h>

#include "client/lib/gemmclient.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gemmd_shm_client_s gemmd_shm_client_t;

int gemmd_shm_connect(const char *path, const gemmd_client_options_t *o, gemmd_shm_client_t **out,
                      gemmd_status_t *status);
void gemmd_shm_close(gemmd_shm_client_t *s);

int gemmd_shm_gemm(gemmd_shm_client_t *s, const gemmd_gemm_call_t *call,
                   gemmd_gemm_result_t *result, gemmd_status_t *status);
int gemmd_shm_gemm_async(gemmd_shm_client_t *s, const gemmd_gemm_call_t *call,
                         gemmd_gemm_done_fn done, void *user, gemmd_status_t *status);
void gemmd_shm_drain(gemmd_shm_client_t *s);

int gemmd_shm_register_weight(gemmd_shm_client_t *s, const char *name, const gemmd_operand_t *w,
                              gemmd_weight_info_t *info, gemmd_status_t *status);
/* By id, or by name when weight_id is 0. */
int gemmd_shm_unregister_weight(gemmd_shm_client_t *s, uint64_t weight_id, const char *name,
                                gemmd_status_t *status);

/* Regions (version 2): one control message and its reply at a time. A region is opened
 * by its CUDA IPC handle (64 bytes) when handle is not NULL, else by fd. */
int gemmd_shm_region_open(gemmd_shm_client_t *s, int fd, const void *handle, uint64_t bytes,
                          uint32_t *region_id, gemmd_status_t *status);
int gemmd_shm_region_close(gemmd_shm_client_t *s, uint32_t region_id, gemmd_status_t *status);

void *gemmd_shm_alloc(gemmd_shm_client_t *s, size_t bytes);
void gemmd_shm_free(gemmd_shm_client_t *s, void *p);

/* How a waiter sleeps once its spin budget is spent: "futex" (default) or "eventfd";
 * spin_us is the budget (default 200; docs/bench/shm_cpu.md has the measurements). While
 * answers take longer than the budget on average (a loaded gemmd), waiters sleep at once
 * instead: spinning clients would take the cores that gemmd needs (docs/bench/serving.md).
 * For measurements (GEMMD_SHM_WAIT, GEMMD_SHM_SPIN_US set the same at connect time). */
int gemmd_shm_set_wait(gemmd_shm_client_t *s, const char *mode, unsigned spin_us);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_LIB_SHM_CLIENT_H_ */
