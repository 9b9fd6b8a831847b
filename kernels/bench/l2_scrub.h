// The benchmark's memory helpers (gemm_bench): the "clean" L2 flush (--flush clean), and the
// memory floor of a case (--sol).
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Reads `bytes` (a multiple of 16) at `buf` on `stream`; nothing is written but a word no
// one reads. After it L2 holds only clean lines of `buf` (no write-back owed when the timed
// kernel brings its own data in).
cudaError_t gemmd_l2_read_all(const void *buf, size_t bytes, cudaStream_t stream);

// The memory floor of a GEMM case (gemm_bench --sol): one launch that reads `read_bytes` at
// `src` once and writes `write_bytes` of zeros at `dst` once (both multiples of 16), four
// 512-thread CTAs on each of `sms` SMs with four 16-byte loads in flight per thread, no
// arithmetic. The bytes a GEMM must move (A, B, their scales in, D out) moved as fast as a
// plain kernel moves them, launch and first-byte latency included: a floor one plain kernel
// sets, not a proven bound.
cudaError_t gemmd_stream_floor(const void *src, size_t read_bytes, void *dst, size_t write_bytes, int sms,
                               cudaStream_t stream);

// The SM clock while it runs, in MHz: one thread counts clock64() cycles against the
// %globaltimer nanoseconds over about `spin_ns` (beside the benchmark's figures, since the
// clock under load decides what a kernel can reach). 0 if the launch failed.
double gemmd_sm_clock_mhz(uint64_t spin_ns, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
