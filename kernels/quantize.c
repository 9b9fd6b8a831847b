#include "kernels/quantize.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/errors.h"

float gemmd_fp8_max(gemmd_dtype_t fp8) {
  switch (fp8) {
    case GEMMD_DTYPE_FP8_E4M3:
      return GEMMD_E4M3_MAX;
    case GEMMD_DTYPE_FP8_E5M2:
      return GEMMD_E5M2_MAX;
    default:
      return 0.0f;
  }
}

/* Row r of src, columns [c0, c0 + n), as real values (stored × scale). */
static void load_span(const gemmd_operand_t *src, uint32_t r, uint32_t c0, uint32_t n, float *out) {
  const size_t esz = gemmd_dtype_size(src->dtype);
  gemmd_decode_row(src->dtype, (const char *)src->data + ((size_t)r * src->ld + c0) * esz, n, out);
  if (src->scale_layout == GEMMD_SCALE_NONE) return;
  for (uint32_t c = 0; c < n; c++) out[c] *= gemmd_operand_scale(src, r, c0 + c);
}

static void load_row(const gemmd_operand_t *src, uint32_t r, float *out) { load_span(src, r, 0, src->cols, out); }

/* The largest finite |v[i]|. On the bits: a non-negative float orders as its bits do, and
 * the finite ones are those below Inf's, so it is an integer maximum (AVX2 where the CPU
 * has it). */
static uint32_t finite_abs_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  u &= 0x7FFFFFFFu;
  return u < 0x7F800000u ? u : 0u;
}

#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx2"))) static uint32_t finite_amax_bits_avx2(const float *v, size_t n, size_t *done) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
  __m256i m = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(v + i)), abs_mask);
    const __m256i finite = _mm256_cmpgt_epi32(inf, u); /* both non-negative: signed compare is fine */
    m = _mm256_max_epu32(m, _mm256_and_si256(u, finite));
  }
  uint32_t lanes[8];
  _mm256_storeu_si256((__m256i *)lanes, m);
  uint32_t r = 0;
  for (int k = 0; k < 8; k++) r = lanes[k] > r ? lanes[k] : r;
  *done = i;
  return r;
}
#endif

static float finite_amax(const float *v, size_t n) {
  uint32_t m = 0;
  size_t i = 0;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) m = finite_amax_bits_avx2(v, n, &i);
#endif
  for (; i < n; i++) {
    const uint32_t u = finite_abs_bits(v[i]);
    m = u > m ? u : m;
  }
  float f;
  memcpy(&f, &m, sizeof f);
  return f;
}

/* gemmd_quantize_value by table: an FP8 code is decided by the sign, the exponent, the
 * mantissa bits it keeps, the next one (round) and whether any lower bit is set (sticky),
 * also for its subnormals (whose round bit lies higher), Inf and NaN. The table, indexed
 * by those bits, is filled by the scalar encoder itself, so the two agree bit for bit;
 * a lookup is a few instructions instead of the encoder's branches. */
enum { E4M3_SHIFT = 19, E5M2_SHIFT = 20 }; /* the FP32 bits below the round bit */
static uint8_t e4m3_codes[1u << (32 - E4M3_SHIFT + 1)];
static uint8_t e5m2_codes[1u << (32 - E5M2_SHIFT + 1)];
static pthread_once_t codes_once = PTHREAD_ONCE_INIT;

static void fill_codes(gemmd_dtype_t fp8, int shift, uint8_t *codes) {
  for (uint32_t i = 0; i < (1u << (32 - shift + 1)); i++) {
    const uint32_t u = (i >> 1) << shift | (i & 1u); /* sticky: the lowest bit stands for all */
    float v;
    memcpy(&v, &u, sizeof v);
    codes[i] = gemmd_quantize_value(fp8, v);
  }
}

static void fill_tables(void) {
  fill_codes(GEMMD_DTYPE_FP8_E4M3, E4M3_SHIFT, e4m3_codes);
  fill_codes(GEMMD_DTYPE_FP8_E5M2, E5M2_SHIFT, e5m2_codes);
}

/* The table indices of v[i] / scale, CHUNK at a time: the divisions and bit tests in
 * vector registers (an AVX2 build of the loop where the CPU has it, chosen at run time:
 * ifunc-based target_clones do not start under the sanitizers), the lookups after. */
enum { CHUNK = 64 };
#define CODE_INDICES_BODY                                  \
  const uint32_t low = (1u << shift) - 1u;                 \
  for (int i = 0; i < CHUNK; i++) {                        \
    const float q = v[i] / scale;                          \
    uint32_t u;                                            \
    memcpy(&u, &q, sizeof u);                              \
    idx[i] = (u >> shift) << 1 | ((u & low) != 0);         \
  }
static void code_indices_plain(const float *v, float scale, int shift, uint32_t *idx) { CODE_INDICES_BODY }
#if defined(__x86_64__)
__attribute__((target("avx2"))) static void code_indices_avx2(const float *v, float scale, int shift,
                                                              uint32_t *idx) {
  CODE_INDICES_BODY
}
#endif
static void code_indices(const float *v, float scale, int shift, uint32_t *idx) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) {
    code_indices_avx2(v, scale, shift, idx);
    return;
  }
#endif
  code_indices_plain(v, scale, shift, idx);
}

void gemmd_quantize_span(gemmd_dtype_t fp8, const float *v, size_t n, float scale, uint8_t *dst) {
  pthread_once(&codes_once, fill_tables);
  const int shift = fp8 == GEMMD_DTYPE_FP8_E4M3 ? E4M3_SHIFT : E5M2_SHIFT;
  const uint8_t *codes = fp8 == GEMMD_DTYPE_FP8_E4M3 ? e4m3_codes : e5m2_codes;
  size_t i = 0;
  uint32_t idx[CHUNK];
  for (; i + CHUNK <= n; i += CHUNK) {
    code_indices(v + i, scale, shift, idx);
    for (int j = 0; j < CHUNK; j++) dst[i + j] = codes[idx[j]];
  }
  const uint32_t low = (1u << shift) - 1u;
  for (; i < n; i++) {
    const float q = v[i] / scale;
    uint32_t u;
    memcpy(&u, &q, sizeof u);
    dst[i] = codes[(u >> shift) << 1 | ((u & low) != 0)];
  }
}

/* TENSOR and NONE: one scale for the whole matrix, found in a first pass. */
static int quantize_whole(const gemmd_operand_t *src, gemmd_dtype_t fp8,
                          gemmd_scale_layout_t layout, uint8_t *dst, float *scales) {
  float *row = malloc(sizeof(float) * (src->cols ? src->cols : 1));
  if (row == NULL) return GEMMD_ENOMEM;
  float scale = 1.0f;
  if (layout == GEMMD_SCALE_TENSOR) {
    float amax = 0.0f;
    for (uint32_t r = 0; r < src->rows; r++) {
      load_row(src, r, row);
      const float m = finite_amax(row, src->cols);
      if (m > amax) amax = m;
    }
    scale = gemmd_quantize_scale(fp8, amax);
    scales[0] = scale;
  }
  for (uint32_t r = 0; r < src->rows; r++) {
    load_row(src, r, row);
    gemmd_quantize_span(fp8, row, src->cols, scale, dst + (size_t)r * src->cols);
  }
  free(row);
  return GEMMD_OK;
}

/* ROW, 1×128 and 128×128, bands [first, last) of 1 or 128 rows: block by block (a row,
 * 1×128 or 128×128 elements), each decoded into a buffer that stays in cache for its
 * maximum and its encoding. Bands are independent: threads may take disjoint ranges. */
typedef struct {
  const gemmd_operand_t *src;
  gemmd_dtype_t fp8;
  gemmd_scale_layout_t layout;
  uint8_t *dst;
  float *scales;
  uint32_t first, last;
  int rc;
} bands_t;

static void *quantize_bands(void *arg) {
  bands_t *p = arg;
  const gemmd_operand_t *src = p->src;
  const uint32_t rows = src->rows, cols = src->cols;
  const uint32_t band = p->layout == GEMMD_SCALE_BLOCK_128X128 ? GEMMD_SCALE_BLOCK : 1;
  const uint32_t bw = p->layout == GEMMD_SCALE_ROW ? cols : GEMMD_SCALE_BLOCK;
  const uint32_t nbc = cols == 0 ? 0 : (cols + bw - 1) / bw;
  float *tile = malloc(sizeof(float) * (size_t)band * (bw ? bw : 1));
  p->rc = tile != NULL ? GEMMD_OK : GEMMD_ENOMEM;
  if (tile == NULL) return NULL;
  for (uint32_t bi = p->first; bi < p->last; bi++) {
    const uint32_t r0 = bi * band, h = rows - r0 < band ? rows - r0 : band;
    for (uint32_t j = 0; j < nbc; j++) {
      const uint32_t c0 = j * bw, w = cols - c0 < bw ? cols - c0 : bw;
      float amax = 0.0f;
      for (uint32_t i = 0; i < h; i++) {
        load_span(src, r0 + i, c0, w, tile + (size_t)i * w);
        const float m = finite_amax(tile + (size_t)i * w, w);
        if (m > amax) amax = m;
      }
      const float scale = gemmd_quantize_scale(p->fp8, amax);
      p->scales[(size_t)bi * nbc + j] = scale;
      for (uint32_t i = 0; i < h; i++) {
        gemmd_quantize_span(p->fp8, tile + (size_t)i * w, w, scale, p->dst + (size_t)(r0 + i) * cols + c0);
      }
    }
  }
  free(tile);
  return NULL;
}

enum { MAX_THREADS = 8 };

static int quantize_banded(const gemmd_operand_t *src, gemmd_dtype_t fp8, gemmd_scale_layout_t layout,
                           uint8_t *dst, float *scales, unsigned threads) {
  const uint32_t band = layout == GEMMD_SCALE_BLOCK_128X128 ? GEMMD_SCALE_BLOCK : 1;
  const uint32_t n_bands = (src->rows + band - 1) / band;
  if (threads > n_bands) threads = n_bands;
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  if (threads < 1) threads = 1;
  bands_t parts[MAX_THREADS];
  pthread_t tids[MAX_THREADS];
  int started[MAX_THREADS] = {0};
  for (unsigned t = 0; t < threads; t++) {
    parts[t] = (bands_t){src, fp8, layout, dst, scales, (uint32_t)((uint64_t)n_bands * t / threads),
                         (uint32_t)((uint64_t)n_bands * (t + 1) / threads), GEMMD_OK};
  }
  /* The last part on this thread; a part whose thread cannot start runs here too. */
  for (unsigned t = 0; t + 1 < threads; t++) started[t] = pthread_create(&tids[t], NULL, quantize_bands, &parts[t]) == 0;
  quantize_bands(&parts[threads - 1]);
  int rc = parts[threads - 1].rc;
  for (unsigned t = 0; t + 1 < threads; t++) {
    if (started[t]) {
      pthread_join(tids[t], NULL);
    } else {
      quantize_bands(&parts[t]);
    }
    if (parts[t].rc != GEMMD_OK) rc = parts[t].rc;
  }
  return rc;
}

/* Threads for a quantization of n elements: one per 4 Mi elements, at most 4 and the CPUs. */
static unsigned auto_threads(uint64_t n) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  uint64_t t = n >> 22;
  if (t > 4) t = 4;
  if (cpus > 0 && t > (uint64_t)cpus) t = (uint64_t)cpus;
  return t < 1 ? 1 : (unsigned)t;
}

int gemmd_quantize_threads(const gemmd_operand_t *src, gemmd_dtype_t fp8, gemmd_scale_layout_t layout,
                           uint8_t *dst, float *scales, unsigned threads) {
  if (src == NULL || dst == NULL || !gemmd_dtype_is_fp8(fp8) ||
      !gemmd_dtype_is_valid((int)src->dtype) || !gemmd_scale_layout_is_valid((int)layout)) {
    return GEMMD_EINVAL;
  }
  if (layout != GEMMD_SCALE_NONE && scales == NULL) return GEMMD_EINVAL;
  if (layout == GEMMD_SCALE_NONE || layout == GEMMD_SCALE_TENSOR) {
    return quantize_whole(src, fp8, layout, dst, scales);
  }
  if (threads == 0) threads = auto_threads((uint64_t)src->rows * src->cols);
  return quantize_banded(src, fp8, layout, dst, scales, threads);
}

int gemmd_quantize(const gemmd_operand_t *src, gemmd_dtype_t fp8, gemmd_scale_layout_t layout,
                   uint8_t *dst, float *scales) {
  return gemmd_quantize_threads(src, fp8, layout, dst, scales, 0);
}
