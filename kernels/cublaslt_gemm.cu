// cuBLASLt FP8 GEMM with gemmd's conventions (cublaslt_gemm.h).
//
// cuBLASLt is column-major. gemmd's D (M×N row-major) is cuBLASLt's N×M column-major
// D = op(X)·op(Y) with X = gemmd's B (N×K row-major = K×N column-major, transposed: the
// "T" of FP8's required TN form) and Y = gemmd's A (K×M column-major, not transposed).
// So cuBLASLt's "A" is gemmd's B and cuBLASLt's "B" is gemmd's A, scales included.
#include <cublasLt.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "kernels/cublaslt_gemm.h"
#include "kernels/errors.h"

struct gemmd_cublaslt_s {
  cublasLtHandle_t handle;
  void *workspace;
  size_t workspace_bytes;
  const float *one; /* device 1.0f for SCALE_NONE */
  std::mutex mu;
  // Heuristic choices per problem, so that replays (and graph captures) skip the search.
  std::map<std::tuple<uint32_t, uint32_t, uint32_t, int, int, int, int, uint32_t, uint32_t>,
           cublasLtMatmulAlgo_t>
      algos;
};

namespace {

cudaDataType_t cuda_type(gemmd_dtype_t t) {
  switch (t) {
    case GEMMD_DTYPE_FP8_E4M3:
      return CUDA_R_8F_E4M3;
    case GEMMD_DTYPE_FP8_E5M2:
      return CUDA_R_8F_E5M2;
    case GEMMD_DTYPE_BF16:
      return CUDA_R_16BF;
    case GEMMD_DTYPE_FP16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

__global__ void a_scales_kernel(const float *src, uint32_t m, uint32_t kb, float *dst) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<uint64_t>(m) * kb) return;
  const uint32_t row = static_cast<uint32_t>(i / kb), b = static_cast<uint32_t>(i % kb);
  dst[static_cast<uint64_t>(b) * m + row] = src[i];
}

__global__ void b_scales_kernel(const float *src, uint32_t nb, uint32_t kb, uint32_t kb4, float *dst) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<uint64_t>(nb) * kb4) return;
  const uint32_t r = static_cast<uint32_t>(i / kb4), b = static_cast<uint32_t>(i % kb4);
  dst[i] = b < kb ? src[static_cast<uint64_t>(r) * kb + b] : 0.0f;
}

}  // namespace

extern "C" size_t gemmd_cublaslt_b_scale_count(uint32_t n, uint32_t k) {
  const size_t kb = (k + 127) / 128, nb = (n + 127) / 128;
  return nb * ((kb + 3) / 4 * 4);
}

extern "C" int gemmd_cublaslt_convert_a_scales(const float *src, uint32_t m, uint32_t k, float *dst,
                                               cudaStream_t stream) {
  const uint32_t kb = (k + 127) / 128;
  const uint64_t n = static_cast<uint64_t>(m) * kb;
  if (n == 0) return GEMMD_OK;
  a_scales_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(src, m, kb, dst);
  return cudaGetLastError() == cudaSuccess ? GEMMD_OK : GEMMD_EDEVICE;
}

extern "C" int gemmd_cublaslt_convert_b_scales(const float *src, uint32_t n, uint32_t k, float *dst,
                                               cudaStream_t stream) {
  const uint32_t kb = (k + 127) / 128, nb = (n + 127) / 128, kb4 = (kb + 3) / 4 * 4;
  const uint64_t total = static_cast<uint64_t>(nb) * kb4;
  if (total == 0) return GEMMD_OK;
  b_scales_kernel<<<static_cast<unsigned>((total + 255) / 256), 256, 0, stream>>>(src, nb, kb, kb4, dst);
  return cudaGetLastError() == cudaSuccess ? GEMMD_OK : GEMMD_EDEVICE;
}

extern "C" int gemmd_cublaslt_create(size_t workspace_bytes, gemmd_cublaslt_t **out) {
  auto *h = new (std::nothrow) gemmd_cublaslt_s();
  if (h == nullptr) return GEMMD_ENOMEM;
  h->workspace_bytes = workspace_bytes;
  float *one = nullptr;
  const float host_one = 1.0f;
  if (cublasLtCreate(&h->handle) != CUBLAS_STATUS_SUCCESS ||
      cudaMalloc(&h->workspace, workspace_bytes) != cudaSuccess ||
      cudaMalloc(reinterpret_cast<void **>(&one), sizeof(float)) != cudaSuccess ||
      cudaMemcpy(one, &host_one, sizeof host_one, cudaMemcpyHostToDevice) != cudaSuccess) {
    delete h;
    return GEMMD_EDEVICE;
  }
  h->one = one;
  *out = h;
  return GEMMD_OK;
}

extern "C" void gemmd_cublaslt_destroy(gemmd_cublaslt_t *h) {
  if (h == nullptr) return;
  cudaFree(h->workspace);
  cudaFree(const_cast<float *>(h->one));
  cublasLtDestroy(h->handle);
  delete h;
}

// Finds (and remembers) cuBLASLt's algorithm for the call, then queues it unless `plan_only`.
static int lt_gemm(gemmd_cublaslt_t *h, const gemmd_cublaslt_call_t *c, cudaStream_t stream, bool plan_only) {
  const bool block = c->a_layout == GEMMD_SCALE_BLOCK_1X128 && c->b_layout == GEMMD_SCALE_BLOCK_128X128;
  const bool scalar = (c->a_layout == GEMMD_SCALE_NONE || c->a_layout == GEMMD_SCALE_TENSOR) &&
                      (c->b_layout == GEMMD_SCALE_NONE || c->b_layout == GEMMD_SCALE_TENSOR);
  if (!block && !scalar) return GEMMD_ENOTSUP;
  if (c->lda % 16 != 0 || c->ldb % 16 != 0 || c->m == 0 || c->n == 0 || c->k == 0) return GEMMD_EINVAL;
  // cuBLASLt "A" = gemmd B (transposed), cuBLASLt "B" = gemmd A.
  const float *scale_x = c->b_layout == GEMMD_SCALE_NONE ? h->one : c->b_scales;
  const float *scale_y = c->a_layout == GEMMD_SCALE_NONE ? h->one : c->a_scales;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t lx = nullptr, ly = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  int rc = GEMMD_EDEVICE;
  const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
  if (cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return rc;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_x, sizeof scale_x);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_y, sizeof scale_y);
  if (block) {
    const cublasLtMatmulMatrixScale_t mx = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    const cublasLtMatmulMatrixScale_t my = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mx, sizeof mx);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &my, sizeof my);
  }
  const cudaDataType_t dt = cuda_type(c->out_dtype);
  if (cublasLtMatrixLayoutCreate(&lx, cuda_type(c->b_dtype), c->k, c->n, c->ldb) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatrixLayoutCreate(&ly, cuda_type(c->a_dtype), c->k, c->m, c->lda) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatrixLayoutCreate(&ld, dt, c->n, c->m, c->n) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) {
    goto out;
  }
  {
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &h->workspace_bytes,
                                         sizeof h->workspace_bytes);
    const auto key = std::make_tuple(c->m, c->n, c->k, (int)c->a_dtype, (int)c->b_dtype, (int)c->out_dtype,
                                     block ? 1 : 0, c->lda, c->ldb);
    cublasLtMatmulAlgo_t algo;
    {
      std::lock_guard<std::mutex> lock(h->mu);
      auto it = h->algos.find(key);
      if (it != h->algos.end()) {
        algo = it->second;
      } else {
        cublasLtMatmulHeuristicResult_t res;
        int found = 0;
        if (cublasLtMatmulAlgoGetHeuristic(h->handle, desc, lx, ly, ld, ld, pref, 1, &res, &found) !=
                CUBLAS_STATUS_SUCCESS ||
            found == 0) {
          rc = GEMMD_ENOTSUP;
          goto out;
        }
        algo = res.algo;
        h->algos.emplace(key, algo);
      }
    }
    const float alpha = 1.0f, beta = 0.0f;
    if (plan_only || cublasLtMatmul(h->handle, desc, &alpha, c->b, lx, c->a, ly, &beta, c->d, ld, c->d, ld, &algo,
                                    h->workspace, h->workspace_bytes, stream) == CUBLAS_STATUS_SUCCESS) {
      rc = GEMMD_OK;
    }
  }
out:
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (ld) cublasLtMatrixLayoutDestroy(ld);
  if (ly) cublasLtMatrixLayoutDestroy(ly);
  if (lx) cublasLtMatrixLayoutDestroy(lx);
  cublasLtMatmulDescDestroy(desc);
  return rc;
}

extern "C" int gemmd_cublaslt_gemm(gemmd_cublaslt_t *h, const gemmd_cublaslt_call_t *c, cudaStream_t stream) {
  return lt_gemm(h, c, stream, false);
}

extern "C" int gemmd_cublaslt_supported(gemmd_cublaslt_t *h, const gemmd_cublaslt_call_t *c) {
  /* The question is asked before the batch has device memory: every operand and scale
   * pointer is the workspace (aligned, never read), as a null scale pointer under the
   * block-scale modes may be refused where the real call would not be. */
  gemmd_cublaslt_call_t q = *c;
  q.a = q.b = q.d = h->workspace;
  q.a_scales = q.b_scales = static_cast<const float *>(h->workspace);
  return lt_gemm(h, &q, nullptr, true);
}
