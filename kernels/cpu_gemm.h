/* The fast FP32 path on the CPU: D = A·Bᵀ for any operand dtypes and scale layouts.
 *
 * Panels of A and B are dequantized (stored value × scale, in FP32) straight into the
 * packed layout of a cache-blocked product with an AVX-512 / AVX2 / portable micro-kernel
 * chosen at run time, on several threads. Accumulation is FP32; D is written as BF16,
 * FP16 or FP32, rounded to nearest even. This is the daemon's CPU backend and the
 * fast reference that large GPU checks compare against.
 */
#ifndef GEMMD_KERNELS_CPU_GEMM_H_
#define GEMMD_KERNELS_CPU_GEMM_H_

#include <stddef.h>

#include "kernels/operand.h"

#ifdef __cplusplus
extern "C" {
#endif

/* D (M×N, row stride ldd elements of out_dtype) = A (M×K) · B (N×K)ᵀ.
 * threads: how many threads may work on it (0: one per online CPU); small products
 * run on the calling thread alone. Returns 0, GEMMD_EINVAL (shapes disagree, unknown
 * dtype or layout, out_dtype not BF16/FP16/FP32) or GEMMD_ENOMEM. */
int gemmd_cpu_gemm(const gemmd_operand_t *a, const gemmd_operand_t *b, gemmd_dtype_t out_dtype,
                   void *d, size_t ldd, int threads);

/* The micro-kernel in use ("avx512 14x32", "avx2 6x16", "portable 4x8"). */
const char *gemmd_cpu_gemm_kernel_name(void);

/* For tests and benchmarks: use the "avx512", "avx2" or "portable" kernels from now on in
 * this process, or "auto" (the best this CPU has, the default). Not thread-safe against
 * concurrent GEMMs. Returns 0, GEMMD_EINVAL (unknown name) or GEMMD_ENOTSUP (the CPU
 * lacks the instructions). */
int gemmd_cpu_gemm_use_kernel(const char *isa);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_KERNELS_CPU_GEMM_H_ */
