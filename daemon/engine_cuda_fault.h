/* Tests only: makes the GPU fail the way a broken kernel would (an illegal address, a
 * sticky error), for --test-fault-after-batches. */
#ifndef GEMMD_DAEMON_ENGINE_CUDA_FAULT_H_
#define GEMMD_DAEMON_ENGINE_CUDA_FAULT_H_

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

int gemmd_cuda_inject_fault(cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_DAEMON_ENGINE_CUDA_FAULT_H_ */
