// GPU quantizers against the CPU quantizer, bit for bit: every source dtype, both FP8
// targets, ragged shapes, strided rows; plus argument checks. Needs the H200 (tag gpu).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/errors.h"
#include "kernels/gpu_quantize.h"
#include "kernels/quantize.h"
#include "kernels/testutil.h"

namespace {

int g_cases = 0;

void check(test_rng_t *rng, bool weights, gemmd_dtype_t src_dtype, gemmd_dtype_t fp8,
           uint32_t rows, uint32_t cols, uint32_t pad) {
  test_matrix_t m;
  test_matrix_random(&m, rng, rows, cols + pad, src_dtype, GEMMD_SCALE_NONE, 5.0);
  m.op.cols = cols;
  if (src_dtype == GEMMD_DTYPE_FP32 && rows * cols > 200) {  // non-finite values too
    static_cast<float *>(m.data)[7] = NAN;
    static_cast<float *>(m.data)[9] = -INFINITY;
  }
  const gemmd_scale_layout_t layout = weights ? GEMMD_SCALE_BLOCK_128X128 : GEMMD_SCALE_BLOCK_1X128;
  const size_t ns = gemmd_scale_count(layout, rows, cols);
  std::vector<uint8_t> want_q(static_cast<size_t>(rows) * cols), got_q(want_q.size());
  std::vector<float> want_s(ns), got_s(ns);
  TEST_CHECK(gemmd_quantize(&m.op, fp8, layout, want_q.data(), want_s.data()) == GEMMD_OK, "cpu");

  const size_t src_bytes = static_cast<size_t>(rows) * (cols + pad) * gemmd_dtype_size(src_dtype);
  void *d_src;
  uint8_t *d_q;
  float *d_s;
  CUDA_OK(cudaMalloc(&d_src, src_bytes));
  CUDA_OK(cudaMalloc(reinterpret_cast<void **>(&d_q), want_q.size()));
  CUDA_OK(cudaMalloc(reinterpret_cast<void **>(&d_s), ns * sizeof(float)));
  CUDA_OK(cudaMemcpy(d_src, m.data, src_bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(d_q, 0xA5, want_q.size()));  // poison
  const int rc = weights ? gemmd_gpu_quantize_128x128(d_src, src_dtype, cols + pad, rows, cols,
                                                      fp8, d_q, cols, d_s, 0)
                         : gemmd_gpu_quantize_1x128(d_src, src_dtype, cols + pad, rows, cols,
                                                    fp8, d_q, cols, d_s, 0);
  TEST_CHECK(rc == GEMMD_OK, "launch: %s", gemmd_strerror(rc));
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(got_q.data(), d_q, got_q.size(), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(got_s.data(), d_s, ns * sizeof(float), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < ns; i++) {
    TEST_CHECK(std::memcmp(&got_s[i], &want_s[i], 4) == 0, "%s %s %ux%u scale[%zu] gpu %a cpu %a",
               weights ? "128x128" : "1x128", gemmd_dtype_name(src_dtype), rows, cols, i,
               got_s[i], want_s[i]);
  }
  for (size_t i = 0; i < want_q.size(); i++) {
    TEST_CHECK(got_q[i] == want_q[i], "%s %s %ux%u code[%zu] gpu 0x%02x cpu 0x%02x",
               weights ? "128x128" : "1x128", gemmd_dtype_name(src_dtype), rows, cols, i,
               got_q[i], want_q[i]);
  }
  CUDA_OK(cudaFree(d_src));
  CUDA_OK(cudaFree(d_q));
  CUDA_OK(cudaFree(d_s));
  test_matrix_free(&m);
  g_cases++;
}

}  // namespace

int main() {
  test_rng_t rng = {test_seed("gpu_quantize_test")};
  int ndev = 0;
  CUDA_OK(cudaGetDeviceCount(&ndev));
  TEST_CHECK(ndev > 0, "no GPU");
  const uint32_t shapes[][2] = {{1, 1}, {1, 129}, {7, 128}, {129, 257}, {300, 1000}, {2048, 7168}};
  const gemmd_dtype_t srcs[] = {GEMMD_DTYPE_BF16, GEMMD_DTYPE_FP16, GEMMD_DTYPE_FP32};
  const gemmd_dtype_t fp8s[] = {GEMMD_DTYPE_FP8_E4M3, GEMMD_DTYPE_FP8_E5M2};
  for (int weights = 0; weights <= 1; weights++)
    for (gemmd_dtype_t s : srcs)
      for (gemmd_dtype_t f : fp8s)
        for (const auto &sh : shapes) check(&rng, weights != 0, s, f, sh[0], sh[1], sh[0] % 3 ? 0 : 5);
  uint8_t *q = nullptr;
  TEST_CHECK(gemmd_gpu_quantize_1x128(nullptr, GEMMD_DTYPE_BF16, 4, 1, 4, GEMMD_DTYPE_FP8_E4M3, q,
                                      4, nullptr, 0) == GEMMD_EINVAL, "null pointers");
  std::printf("gpu_quantize_test: %d cases passed\n", g_cases);
  return 0;
}
