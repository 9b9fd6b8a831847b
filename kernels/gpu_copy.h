/* Many small copies in one launch: the rows of a batch's operands that lie in clients'
 * device memory (A, its scales) gathered into the batch buffer before the GEMM, and its
 * results scattered back to them after; and a small batch's upload from, and results into,
 * pinned host memory over PCIe (the engine's --engine-copy-kernel-bytes). One
 * cudaMemcpyAsync each would cost a stream operation of a few µs per copy; a batch of 64
 * requests has up to 192 of them.
 *
 * Pointers are device memory (of this context, or opened into it by CUDA IPC) or pinned
 * host memory the device can address by its host pointer (cudaMallocHost; cudaHostRegister
 * where cudaDevAttrCanUseHostPointerForRegisteredMem); work is queued on `stream` and
 * nothing waits for it. Copies must not overlap each other's
 * destinations. Returns 0, GEMMD_EINVAL (a null list, a pitch below the row) or
 * GEMMD_EDEVICE (the launch failed). Never throws, never exits. */
#ifndef GEMMD_KERNELS_GPU_COPY_H_
#define GEMMD_KERNELS_GPU_COPY_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* rows × row_bytes from src (rows src_pitch apart) to dst (rows dst_pitch apart). */
typedef struct {
  uint64_t src, dst;
  uint32_t rows, row_bytes;
  uint32_t src_pitch, dst_pitch;
} gemmd_gpu_copy_t;

/* The n copies of `copies` (host memory, read before the call returns: they travel as the
 * launches' parameters, GEMMD_GPU_COPIES_PER_LAUNCH to a launch). */
int gemmd_gpu_copy_many(const gemmd_gpu_copy_t *copies, uint32_t n, cudaStream_t stream);

#define GEMMD_GPU_COPIES_PER_LAUNCH 120

/* A clock the copy launches of one graph keep on the work between them, so that a graph
 * can time that work (its GEMM) without event nodes around it (each costs about a µs of a
 * small graph), and an end word that tells the host the graph's last node has finished,
 * µs before the stream's event would (docs/bench/serving.md).
 * - The launch before the work (GEMMD_GPU_COPY_CLOCK_BEFORE) notes its start and its end
 *   in dev.
 * - The launch after it (GEMMD_GPU_COPY_CLOCK_AFTER) writes those two and its own start
 *   into host (global timer, ns) and resets dev for the next launch. Once every one of its
 *   blocks has copied, its last block writes its end into host[GEMMD_GPU_COPY_CLOCK_AFTER_END],
 *   after the launch's copies and the other words are visible to the host: a nonzero end
 *   says that all of them may be read.
 * dev: GEMMD_GPU_COPY_CLOCK_DEV_WORDS device words, zeroed before the first use; host:
 * GEMMD_GPU_COPY_CLOCK_HOST_WORDS words of pinned memory, the end zeroed before each
 * launch that is to set it. */
enum { GEMMD_GPU_COPY_CLOCK_OFF = 0, GEMMD_GPU_COPY_CLOCK_BEFORE = 1, GEMMD_GPU_COPY_CLOCK_AFTER = 2 };
enum {
  GEMMD_GPU_COPY_CLOCK_BEFORE_START,
  GEMMD_GPU_COPY_CLOCK_BEFORE_END,
  GEMMD_GPU_COPY_CLOCK_AFTER_START,
  GEMMD_GPU_COPY_CLOCK_AFTER_END,
  GEMMD_GPU_COPY_CLOCK_HOST_WORDS
};
enum { GEMMD_GPU_COPY_CLOCK_DEV_WORDS = 3 };
typedef struct {
  unsigned long long *dev;
  volatile unsigned long long *host;
  uint32_t role; /* GEMMD_GPU_COPY_CLOCK_* */
} gemmd_gpu_copy_clock_t;

/* A copy-kernel launch as a graph kernel node's parameters, for a node captured from
 * gemmd_gpu_copy_many: cudaGraphExecKernelNodeSetParams with them makes the next replay
 * copy copies[0..n) (n ≤ GEMMD_GPU_COPIES_PER_LAUNCH; 0 copies nothing), keeping `clock`
 * (NULL: none). The list is copied into *storage, which `params` points into: keep it until
 * the call that takes `params` returns. Returns 0 or GEMMD_EINVAL (as gemmd_gpu_copy_many,
 * n too large, or a clock with a null pointer or an unknown role). */
typedef struct {
  gemmd_gpu_copy_t c[GEMMD_GPU_COPIES_PER_LAUNCH];
  gemmd_gpu_copy_clock_t clock;
  void *arg; /* kernelParams[0]: &c */
} gemmd_gpu_copy_node_t;
int gemmd_gpu_copy_node_params(const gemmd_gpu_copy_t *copies, uint32_t n, const gemmd_gpu_copy_clock_t *clock,
                               gemmd_gpu_copy_node_t *storage, struct cudaKernelNodeParams *params);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_KERNELS_GPU_COPY_H_ */
