/* Cache-blocked FP32 GEMM with dequantizing packers (see cpu_gemm.h).
 *
 * Loop nest (GotoBLAS / BLIS order), per thread over its own slice of D:
 *   jc: NC columns of D  ->  pc: KC of K  ->  pack B[jc.., pc..] once (KC×NC in L3)
 *     ic: MC rows of D  ->  pack A[ic.., pc..] (MC×KC in L2)
 *       jr: NR, ir: MR  ->  micro-kernel: MR×NR tile of D in registers over KC.
 * Packing reads the operands in their stored dtype and applies their scales, so every
 * element of B is dequantized once per call. Up to SMALL_M rows of A there is no packing:
 * each row of B is dequantized into a buffer and dotted with the rows of A
 * (slice_run_small_m), since a B element used that few times costs more to pack than to
 * use.
 */
#include "kernels/cpu_gemm.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/errors.h"

enum {
  KC = 384,  /* K per packed panel: A micro-panel MR×KC stays in L1 */
  MC = 168,  /* rows of A per packed block (multiple of every MR) */
  NC = 3072, /* columns of D per packed B panel */
  MAX_MR = 14,
  MAX_NR = 32,
  /* Up to this many rows of A, no packing (slice_run_small_m): measured faster for M ≤ 16
   * at N=K=4096 and N=K=128, about even at M = 32 (docs/bench/cpu_reference.md). */
  SMALL_M = 16,
};

/* A micro-kernel: tile[MR×NR] (row stride ldc) = or += Σ_k ap[k][0..MR) ⊗ bp[k][0..NR). */
typedef void (*micro_kernel_fn)(int kc, const float *ap, const float *bp, float *c, size_t ldc,
                                int accumulate);

typedef struct {
  int mr, nr;
  micro_kernel_fn fn;
} micro_kernel_t;

/* Small M: out[i] = dot(row i of a (stride lda), b) over k, for m rows sharing one
 * decoded row of B (no packing: see slice_run_small_m). */
typedef void (*dot_rows_fn)(const float *restrict a, size_t lda, int m, const float *restrict b, uint32_t k,
                            float *restrict out);

typedef struct {
  const char *name;
  micro_kernel_t big, mid, thin; /* for M >= big.mr, M in [mid.mr, big.mr), M < mid.mr */
  dot_rows_fn dot_rows;          /* M ≤ SMALL_M */
} kernel_set_t;

/* ---- Micro-kernels ------------------------------------------------------------------ */

#if defined(__x86_64__)

#define DEFINE_AVX512_KERNEL(MR)                                                          \
  __attribute__((target("avx512f"))) static void avx512_##MR##x32(                        \
      int kc, const float *restrict ap, const float *restrict bp, float *restrict c,     \
      size_t ldc, int accumulate) {                                                       \
    __m512 acc0[MR], acc1[MR];                                                            \
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                               \
      acc0[i] = _mm512_setzero_ps();                                                      \
      acc1[i] = _mm512_setzero_ps();                                                      \
    }                                                                                     \
    for (int k = 0; k < kc; k++) {                                                        \
      const __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);                \
      _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                             \
        const __m512 a = _mm512_set1_ps(ap[i]);                                           \
        acc0[i] = _mm512_fmadd_ps(a, b0, acc0[i]);                                        \
        acc1[i] = _mm512_fmadd_ps(a, b1, acc1[i]);                                        \
      }                                                                                   \
      ap += MR;                                                                           \
      bp += 32;                                                                           \
    }                                                                                     \
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                               \
      float *row = c + (size_t)i * ldc;                                                   \
      if (accumulate) {                                                                   \
        acc0[i] = _mm512_add_ps(acc0[i], _mm512_loadu_ps(row));                           \
        acc1[i] = _mm512_add_ps(acc1[i], _mm512_loadu_ps(row + 16));                      \
      }                                                                                   \
      _mm512_storeu_ps(row, acc0[i]);                                                     \
      _mm512_storeu_ps(row + 16, acc1[i]);                                                \
    }                                                                                     \
  }

DEFINE_AVX512_KERNEL(14)
DEFINE_AVX512_KERNEL(4)
DEFINE_AVX512_KERNEL(1)

#define DEFINE_AVX2_KERNEL(MR)                                                            \
  __attribute__((target("avx2,fma"))) static void avx2_##MR##x16(                         \
      int kc, const float *restrict ap, const float *restrict bp, float *restrict c,     \
      size_t ldc, int accumulate) {                                                       \
    __m256 acc0[MR], acc1[MR];                                                            \
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                               \
      acc0[i] = _mm256_setzero_ps();                                                      \
      acc1[i] = _mm256_setzero_ps();                                                      \
    }                                                                                     \
    for (int k = 0; k < kc; k++) {                                                        \
      const __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);                 \
      _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                             \
        const __m256 a = _mm256_broadcast_ss(ap + i);                                     \
        acc0[i] = _mm256_fmadd_ps(a, b0, acc0[i]);                                        \
        acc1[i] = _mm256_fmadd_ps(a, b1, acc1[i]);                                        \
      }                                                                                   \
      ap += MR;                                                                           \
      bp += 16;                                                                           \
    }                                                                                     \
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                               \
      float *row = c + (size_t)i * ldc;                                                   \
      if (accumulate) {                                                                   \
        acc0[i] = _mm256_add_ps(acc0[i], _mm256_loadu_ps(row));                           \
        acc1[i] = _mm256_add_ps(acc1[i], _mm256_loadu_ps(row + 8));                       \
      }                                                                                   \
      _mm256_storeu_ps(row, acc0[i]);                                                     \
      _mm256_storeu_ps(row + 8, acc1[i]);                                                 \
    }                                                                                     \
  }

DEFINE_AVX2_KERNEL(6)
DEFINE_AVX2_KERNEL(4)
DEFINE_AVX2_KERNEL(1)

#endif /* __x86_64__ */

#define DEFINE_PORTABLE_KERNEL(MR)                                                        \
  static void portable_##MR##x8(int kc, const float *restrict ap, const float *restrict bp, \
                                float *restrict c, size_t ldc, int accumulate) {          \
    float acc[MR][8] = {{0}};                                                             \
    for (int k = 0; k < kc; k++) {                                                        \
      for (int i = 0; i < MR; i++) {                                                      \
        for (int j = 0; j < 8; j++) acc[i][j] += ap[i] * bp[j];                           \
      }                                                                                   \
      ap += MR;                                                                           \
      bp += 8;                                                                            \
    }                                                                                     \
    for (int i = 0; i < MR; i++) {                                                        \
      for (int j = 0; j < 8; j++) {                                                       \
        c[(size_t)i * ldc + j] = accumulate ? c[(size_t)i * ldc + j] + acc[i][j] : acc[i][j]; \
      }                                                                                   \
    }                                                                                     \
  }

DEFINE_PORTABLE_KERNEL(4)
DEFINE_PORTABLE_KERNEL(2)
DEFINE_PORTABLE_KERNEL(1)

static void portable_dot_rows(const float *restrict a, size_t lda, int m, const float *restrict b, uint32_t k,
                              float *restrict out) {
  for (int i = 0; i < m; i++) {
    const float *ai = a + (size_t)i * lda;
    float acc[8] = {0};
    uint32_t kk = 0;
    for (; kk + 8 <= k; kk += 8) {
      for (int j = 0; j < 8; j++) acc[j] += ai[kk + j] * b[kk + j];
    }
    float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; kk < k; kk++) sum += ai[kk] * b[kk];
    out[i] = sum;
  }
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) static void avx2_dot_rows(const float *restrict a, size_t lda, int m,
                                                              const float *restrict b, uint32_t k,
                                                              float *restrict out) {
  for (int i = 0; i < m; i++) {
    const float *ai = a + (size_t)i * lda;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    uint32_t kk = 0;
    for (; kk + 16 <= k; kk += 16) {
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(ai + kk), _mm256_loadu_ps(b + kk), s0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(ai + kk + 8), _mm256_loadu_ps(b + kk + 8), s1);
    }
    const __m256 s = _mm256_add_ps(s0, s1);
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    float sum = _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)));
    for (; kk < k; kk++) sum += ai[kk] * b[kk];
    out[i] = sum;
  }
}
#endif

static kernel_set_t kernels;
static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__)
static const kernel_set_t avx512_set = {"avx512 14x32", {14, 32, avx512_14x32}, {4, 32, avx512_4x32},
                                         {1, 32, avx512_1x32}, avx2_dot_rows};
static const kernel_set_t avx2_set = {"avx2 6x16", {6, 16, avx2_6x16}, {4, 16, avx2_4x16}, {1, 16, avx2_1x16},
                                      avx2_dot_rows};
#endif
static const kernel_set_t portable_set = {"portable 4x8", {4, 8, portable_4x8}, {2, 8, portable_2x8},
                                          {1, 8, portable_1x8}, portable_dot_rows};

static int have_avx512(void) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
#else
  return 0;
#endif
}

static int have_avx2(void) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return 0;
#endif
}

static void kernels_pick(void) {
#if defined(__x86_64__)
  if (have_avx512()) {
    kernels = avx512_set;
    return;
  }
  if (have_avx2()) {
    kernels = avx2_set;
    return;
  }
#endif
  kernels = portable_set;
}

const char *gemmd_cpu_gemm_kernel_name(void) {
  pthread_once(&kernels_once, kernels_pick);
  return kernels.name;
}

int gemmd_cpu_gemm_use_kernel(const char *isa) {
  pthread_once(&kernels_once, kernels_pick);
  if (isa == NULL) return GEMMD_EINVAL;
  if (strcmp(isa, "auto") == 0) {
    kernels_pick();
  } else if (strcmp(isa, "portable") == 0) {
    kernels = portable_set;
#if defined(__x86_64__)
  } else if (strcmp(isa, "avx512") == 0) {
    if (!have_avx512()) return GEMMD_ENOTSUP;
    kernels = avx512_set;
  } else if (strcmp(isa, "avx2") == 0) {
    if (!have_avx2()) return GEMMD_ENOTSUP;
    kernels = avx2_set;
#endif
  } else {
    return strcmp(isa, "avx512") == 0 || strcmp(isa, "avx2") == 0 ? GEMMD_ENOTSUP : GEMMD_EINVAL;
  }
  return GEMMD_OK;
}

/* ---- Packing: dequantize rows of an operand into micro-panels ------------------------ */

/* Real values of row r, columns [k0, k0+n): stored value × scale. */
static void load_scaled(const gemmd_operand_t *op, uint32_t r, uint32_t k0, uint32_t n,
                        float *out) {
  const size_t esz = gemmd_dtype_size(op->dtype);
  gemmd_decode_row(op->dtype, (const char *)op->data + ((size_t)r * op->ld + k0) * esz, n, out);
  switch (op->scale_layout) {
    case GEMMD_SCALE_NONE:
      return;
    case GEMMD_SCALE_TENSOR:
    case GEMMD_SCALE_ROW: {
      const float s = gemmd_operand_scale(op, r, 0);
      for (uint32_t i = 0; i < n; i++) out[i] *= s;
      return;
    }
    case GEMMD_SCALE_BLOCK_1X128:
    case GEMMD_SCALE_BLOCK_128X128: {
      uint32_t i = 0;
      while (i < n) {
        const uint32_t k = k0 + i;
        const uint32_t end = ((k / 128u) + 1u) * 128u - k0;
        const uint32_t stop = end < n ? end : n;
        const float s = gemmd_operand_scale(op, r, k);
        for (; i < stop; i++) out[i] *= s;
      }
      return;
    }
  }
}

/* Packs rows [r0, r0+nrows) × columns [k0, k0+kc) into panels of R rows:
 * out[(p*kc + k)*R + i] = value(r0 + p*R + i, k0 + k); rows past nrows are zero. */
static void pack_panels(const gemmd_operand_t *op, uint32_t r0, uint32_t nrows, uint32_t k0,
                        uint32_t kc, int R, float *out, float *rowbuf) {
  const uint32_t npanels = (nrows + (uint32_t)R - 1) / (uint32_t)R;
  for (uint32_t p = 0; p < npanels; p++) {
    float *panel = out + (size_t)p * kc * (size_t)R;
    for (int i = 0; i < R; i++) {
      const uint32_t r = p * (uint32_t)R + (uint32_t)i;
      if (r < nrows) {
        load_scaled(op, r0 + r, k0, kc, rowbuf);
        for (uint32_t k = 0; k < kc; k++) panel[(size_t)k * R + i] = rowbuf[k];
      } else {
        for (uint32_t k = 0; k < kc; k++) panel[(size_t)k * R + i] = 0.0f;
      }
    }
  }
}

/* ---- The blocked product over one slice of D ----------------------------------------- */

typedef struct {
  const gemmd_operand_t *a, *b;
  float *c; /* FP32 D, row stride ldc */
  size_t ldc;
  uint32_t m0, m1, n0, n1; /* this slice */
  micro_kernel_t kern;
  dot_rows_fn dot_rows; /* non-null: the small-M path (slice_run_small_m) */
  int status;
} slice_t;

static void run_tile(const micro_kernel_t *kern, int kc, const float *ap, const float *bp,
                     float *c, size_t ldc, int mr_eff, int nr_eff, int accumulate) {
  if (mr_eff == kern->mr && nr_eff == kern->nr) {
    kern->fn(kc, ap, bp, c, ldc, accumulate);
    return;
  }
  float tile[MAX_MR * MAX_NR];
  kern->fn(kc, ap, bp, tile, (size_t)kern->nr, 0);
  for (int i = 0; i < mr_eff; i++) {
    float *row = c + (size_t)i * ldc;
    const float *t = tile + (size_t)i * kern->nr;
    for (int j = 0; j < nr_eff; j++) row[j] = accumulate ? row[j] + t[j] : t[j];
  }
}

/* Packing buffers of this thread, kept between calls: a fresh multi-megabyte buffer per
 * call would go to mmap and fault in page by page every time. */
typedef struct {
  float *ap, *bp, *rowbuf;
  size_t ap_bytes, bp_bytes, rowbuf_bytes;
} pack_buffers_t;

static pthread_key_t buffers_key;
static pthread_once_t buffers_once = PTHREAD_ONCE_INIT;

static void buffers_free(void *p) {
  pack_buffers_t *b = p;
  free(b->ap);
  free(b->bp);
  free(b->rowbuf);
  free(b);
}

static void buffers_key_init(void) { pthread_key_create(&buffers_key, buffers_free); }

/* A buffer of at least `bytes` (64-byte aligned) in *slot, grown when too small. */
static float *ensure(float **slot, size_t *have, size_t bytes) {
  if (*have >= bytes) return *slot;
  free(*slot);
  bytes = (bytes + 63) / 64 * 64;
  *slot = aligned_alloc(64, bytes);
  *have = *slot ? bytes : 0;
  return *slot;
}

static pack_buffers_t *thread_buffers(void) {
  pthread_once(&buffers_once, buffers_key_init);
  pack_buffers_t *b = pthread_getspecific(buffers_key);
  if (b == NULL) {
    b = calloc(1, sizeof *b);
    if (b != NULL && pthread_setspecific(buffers_key, b) != 0) {
      free(b);
      b = NULL;
    }
  }
  return b;
}

/* Small M (up to SMALL_M rows): packing B would cost more than the product, since each
 * B element is used only M times. Instead the slice's A rows are decoded and scaled once,
 * and each row of B is decoded and scaled into a row buffer and dotted with them: B is
 * read once, in its stored dtype, with no panel in between. */
static void slice_run_small_m(slice_t *s, pack_buffers_t *pb) {
  const uint32_t K = s->a->cols, M = s->m1 - s->m0;
  float *ar = ensure(&pb->ap, &pb->ap_bytes, sizeof(float) * (size_t)M * K);
  float *br = ensure(&pb->rowbuf, &pb->rowbuf_bytes, sizeof(float) * (size_t)K);
  if (ar == NULL || br == NULL) {
    s->status = GEMMD_ENOMEM;
    return;
  }
  for (uint32_t i = 0; i < M; i++) load_scaled(s->a, s->m0 + i, 0, K, ar + (size_t)i * K);
  float out[MAX_MR];
  for (uint32_t n = s->n0; n < s->n1; n++) {
    load_scaled(s->b, n, 0, K, br);
    for (uint32_t i0 = 0; i0 < M; i0 += MAX_MR) {
      const uint32_t rows = M - i0 < MAX_MR ? M - i0 : MAX_MR;
      s->dot_rows(ar + (size_t)i0 * K, K, (int)rows, br, K, out);
      for (uint32_t i = 0; i < rows; i++) s->c[(size_t)(s->m0 + i0 + i) * s->ldc + n] = out[i];
    }
  }
  s->status = GEMMD_OK;
}

static void *slice_run(void *arg) {
  slice_t *s = arg;
  if (s->dot_rows != NULL) {
    pack_buffers_t *pb = thread_buffers();
    if (pb == NULL) {
      s->status = GEMMD_ENOMEM;
    } else {
      slice_run_small_m(s, pb);
    }
    return NULL;
  }
  const micro_kernel_t kern = s->kern;
  const uint32_t K = s->a->cols;
  const uint32_t mc_max = (MC / (uint32_t)kern.mr) * (uint32_t)kern.mr;
  /* Packing buffers sized for this slice, so that small products stay small. */
  const size_t kc_max = K < KC ? K : KC;
  const size_t m_span = s->m1 - s->m0 < mc_max ? s->m1 - s->m0 : mc_max;
  const size_t n_span = s->n1 - s->n0 < NC ? s->n1 - s->n0 : NC;
  const size_t a_rows = (m_span + (size_t)kern.mr - 1) / (size_t)kern.mr * (size_t)kern.mr;
  const size_t b_rows = (n_span + (size_t)kern.nr - 1) / (size_t)kern.nr * (size_t)kern.nr;
  pack_buffers_t *pb = thread_buffers();
  float *ap = pb ? ensure(&pb->ap, &pb->ap_bytes, sizeof(float) * a_rows * kc_max) : NULL;
  float *bp = pb ? ensure(&pb->bp, &pb->bp_bytes, sizeof(float) * b_rows * kc_max) : NULL;
  float *rowbuf = pb ? ensure(&pb->rowbuf, &pb->rowbuf_bytes, sizeof(float) * kc_max) : NULL;
  if (ap == NULL || bp == NULL || rowbuf == NULL) {
    s->status = GEMMD_ENOMEM;
    return NULL;
  }
  for (uint32_t jc = s->n0; jc < s->n1; jc += NC) {
    const uint32_t nc = s->n1 - jc < NC ? s->n1 - jc : NC;
    for (uint32_t pc = 0; pc < K; pc += KC) {
      const uint32_t kc = K - pc < KC ? K - pc : KC;
      pack_panels(s->b, jc, nc, pc, kc, kern.nr, bp, rowbuf);
      for (uint32_t ic = s->m0; ic < s->m1; ic += mc_max) {
        const uint32_t mc = s->m1 - ic < mc_max ? s->m1 - ic : mc_max;
        pack_panels(s->a, ic, mc, pc, kc, kern.mr, ap, rowbuf);
        for (uint32_t jr = 0; jr < nc; jr += (uint32_t)kern.nr) {
          const int nr_eff = (int)(nc - jr < (uint32_t)kern.nr ? nc - jr : (uint32_t)kern.nr);
          for (uint32_t ir = 0; ir < mc; ir += (uint32_t)kern.mr) {
            const int mr_eff =
                (int)(mc - ir < (uint32_t)kern.mr ? mc - ir : (uint32_t)kern.mr);
            run_tile(&kern, (int)kc, ap + (size_t)ir * kc, bp + (size_t)jr * kc,
                     s->c + (size_t)(ic + ir) * s->ldc + jc + jr, s->ldc, mr_eff, nr_eff,
                     pc > 0);
          }
        }
      }
    }
  }
  s->status = GEMMD_OK;
  return NULL;
}

static int valid_operand(const gemmd_operand_t *op) {
  return op != NULL && op->data != NULL && gemmd_dtype_is_valid((int)op->dtype) &&
         gemmd_scale_layout_is_valid((int)op->scale_layout) && op->ld >= op->cols &&
         (op->scale_layout == GEMMD_SCALE_NONE || op->scales != NULL);
}

/* CPUs online, read once: sysconf reads /sys each time, tens of microseconds. */
static int n_cpus;
static pthread_once_t cpus_once = PTHREAD_ONCE_INIT;

static void read_cpus(void) {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  n_cpus = n < 1 ? 1 : (n > 64 ? 64 : (int)n);
}

static int online_cpus(void) {
  pthread_once(&cpus_once, read_cpus);
  return n_cpus;
}

int gemmd_cpu_gemm(const gemmd_operand_t *a, const gemmd_operand_t *b, gemmd_dtype_t out_dtype,
                   void *d, size_t ldd, int threads) {
  if (!valid_operand(a) || !valid_operand(b) || d == NULL || a->cols != b->cols ||
      a->rows == 0 || b->rows == 0 || a->cols == 0 || ldd < b->rows ||
      (out_dtype != GEMMD_DTYPE_BF16 && out_dtype != GEMMD_DTYPE_FP16 &&
       out_dtype != GEMMD_DTYPE_FP32)) {
    return GEMMD_EINVAL;
  }
  pthread_once(&kernels_once, kernels_pick);
  const uint32_t M = a->rows, N = b->rows;
  const micro_kernel_t kern =
      M >= (uint32_t)kernels.big.mr ? kernels.big
                                    : (M >= (uint32_t)kernels.mid.mr ? kernels.mid : kernels.thin);
  const int small_m = M <= SMALL_M;

  /* FP32 D is written in place; other outputs go through an FP32 buffer. */
  float *c = out_dtype == GEMMD_DTYPE_FP32 ? (float *)d : malloc(sizeof(float) * (size_t)M * N);
  const size_t ldc = out_dtype == GEMMD_DTYPE_FP32 ? ldd : N;
  if (c == NULL) return GEMMD_ENOMEM;

  /* Threads split the longer side of D; small products stay on this thread. */
  const double work = (double)M * N * a->cols;
  int nt = threads > 0 ? threads : online_cpus();
  if (work < 4.0e6) nt = 1;
  const int split_n = N >= M;
  const uint32_t unit = split_n ? (uint32_t)kern.nr : (uint32_t)kern.mr;
  const uint32_t extent = split_n ? N : M;
  const uint32_t units = (extent + unit - 1) / unit;
  if ((uint32_t)nt > units) nt = (int)units;
  if (nt > 64) nt = 64;

  slice_t slices[64];
  pthread_t tids[64];
  int started[64] = {0};
  for (int t = 0; t < nt; t++) {
    const uint32_t u0 = (uint32_t)((uint64_t)units * t / nt);
    const uint32_t u1 = (uint32_t)((uint64_t)units * (t + 1) / nt);
    const uint32_t lo = u0 * unit, hi = u1 * unit < extent ? u1 * unit : extent;
    slices[t] = (slice_t){a, b, c, ldc, 0, M, 0, N, kern, small_m ? kernels.dot_rows : NULL, GEMMD_EINTERNAL};
    if (split_n) {
      slices[t].n0 = lo;
      slices[t].n1 = hi;
    } else {
      slices[t].m0 = lo;
      slices[t].m1 = hi;
    }
  }
  for (int t = 1; t < nt; t++) {
    started[t] = pthread_create(&tids[t], NULL, slice_run, &slices[t]) == 0;
    if (!started[t]) slice_run(&slices[t]); /* no thread: do it here */
  }
  slice_run(&slices[0]);
  int status = GEMMD_OK;
  for (int t = 0; t < nt; t++) {
    if (t > 0 && started[t]) pthread_join(tids[t], NULL);
    if (slices[t].status != GEMMD_OK) status = slices[t].status;
  }

  if (out_dtype != GEMMD_DTYPE_FP32) {
    const size_t esz = gemmd_dtype_size(out_dtype);
    if (status == GEMMD_OK) {
      for (uint32_t m = 0; m < M; m++) {
        gemmd_encode_row(out_dtype, c + (size_t)m * N, N, (char *)d + (size_t)m * ldd * esz);
      }
    }
    free(c);
  }
  return status;
}
