/* Times the CPU fast path: D = A·Bᵀ for M×N×K given on the command line (default
 * 512×4096×4096), FP8 E4M3 A with 1×128 scales and B with 128×128 scales, BF16 output.
 * Checks 16 rows of D against the FP64 reference first, then prints the median and the
 * best of the timed runs.
 *
 *   bazel run -c opt //kernels:cpu_gemm_bench -- [M N K [runs [threads]]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/cpu_gemm.h"
#include "kernels/ref_gemm.h"
#include "kernels/testutil.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *x, const void *y) {
  const double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

int main(int argc, char **argv) {
  const uint32_t M = argc > 3 ? (uint32_t)atoi(argv[1]) : 512;
  const uint32_t N = argc > 3 ? (uint32_t)atoi(argv[2]) : 4096;
  const uint32_t K = argc > 3 ? (uint32_t)atoi(argv[3]) : 4096;
  const int runs = argc > 4 ? atoi(argv[4]) : 5;
  const int threads = argc > 5 ? atoi(argv[5]) : 0;
  if (M == 0 || N == 0 || K == 0 || runs < 1 || runs > 1000) {
    fprintf(stderr, "usage: cpu_gemm_bench [M N K [runs [threads]]]\n");
    return 2;
  }
  test_rng_t rng = {test_seed("cpu_gemm_bench")};
  test_matrix_t a, b;
  test_matrix_random(&a, &rng, M, K, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_1X128, 1.0);
  test_matrix_random(&b, &rng, N, K, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_128X128, 1.0);
  uint16_t *d = malloc(sizeof(uint16_t) * (size_t)M * N);

  /* Correctness first: the first rows of D against FP64. */
  if (gemmd_cpu_gemm(&a.op, &b.op, GEMMD_DTYPE_BF16, d, N, threads) != 0) {
    fprintf(stderr, "cpu_gemm failed\n");
    return 1;
  }
  gemmd_operand_t a_top = a.op;
  a_top.rows = M < 16 ? M : 16;
  double *ref = malloc(sizeof(double) * (size_t)a_top.rows * N);
  gemmd_ref_gemm_f64(&a_top, &b.op, ref);
  const double err = gemmd_rel_frobenius_error(ref, d, GEMMD_DTYPE_BF16, (size_t)a_top.rows * N);
  printf("check: first %u rows vs FP64, relative Frobenius error %.3g (%s)\n", a_top.rows, err,
         err <= 1e-2 ? "ok" : "FAIL");
  if (!(err <= 1e-2)) return 1;

  double *t = malloc(sizeof(double) * (size_t)runs);
  for (int i = 0; i < runs; i++) {
    const double t0 = now_s();
    gemmd_cpu_gemm(&a.op, &b.op, GEMMD_DTYPE_BF16, d, N, threads);
    t[i] = now_s() - t0;
  }
  qsort(t, (size_t)runs, sizeof(double), cmp_double);
  const double flops = 2.0 * M * N * K;
  printf("cpu_gemm %ux%ux%u e4m3 1x128 x e4m3 128x128 -> bf16, kernel %s, threads %d\n", M, N, K,
         gemmd_cpu_gemm_kernel_name(), threads);
  printf("runs %d  median %.3f ms (%.1f GFLOP/s)  best %.3f ms (%.1f GFLOP/s)\n", runs,
         t[runs / 2] * 1e3, flops / t[runs / 2] * 1e-9, t[0] * 1e3, flops / t[0] * 1e-9);
  free(t);
  free(ref);
  free(d);
  test_matrix_free(&a);
  test_matrix_free(&b);
  return 0;
}
