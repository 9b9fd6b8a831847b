// The benchmark's memory helpers (gemm_bench): the "clean" L2 flush (--flush clean), and the
// memory floor of a case (--sol).
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Reads `bytes` (a multiple of 16) at `buf` on `stream`; nothing is written but a word no
// one reads. After it L2 holds only clean lines of `buf` (no write-back owed when the timed
// kernel brings its own data in).
cudaError_t gemmd_l2_read_all(const void *buf, size_t bytes, cudaStream_t stream);

// The memory floor of a GEMM case (gemm_bench --sol): one launch that reads `read_bytes` at
// `src` once and writes `write_bytes` of zeros at `dst` once (both multiples of 16), every
// SM with as many loads in flight as it holds, no arithmetic. The bytes a GEMM must move
// (A, B, their scales in, D out) moved as fast as a plain kernel moves them, launch and
// first-byte latency included: what no GEMM kernel timed the same way can beat by much.
cudaError_t gemmd_stream_floor(const void *src, size_t read_bytes, void *dst, size_t write_bytes,
                               cudaStream_t stream);

#ifdef __cplusplus
}
#endif
