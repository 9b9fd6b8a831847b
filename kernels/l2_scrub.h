// The benchmark's "clean" L2 flush (gemm_bench --flush clean): reads a buffer larger than
// L2, so L2 ends holding only clean lines of it (no write-back owed when the timed kernel
// brings its own data in).
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Reads `bytes` (a multiple of 16) at `buf` on `stream`; nothing is written but a word no
// one reads.
cudaError_t gemmd_l2_read_all(const void *buf, size_t bytes, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
