#include "kernels/operand.h"

#include <pthread.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

size_t gemmd_dtype_size(gemmd_dtype_t dtype) {
  switch (dtype) {
    case GEMMD_DTYPE_FP8_E4M3:
    case GEMMD_DTYPE_FP8_E5M2:
      return 1;
    case GEMMD_DTYPE_BF16:
    case GEMMD_DTYPE_FP16:
      return 2;
    case GEMMD_DTYPE_FP32:
      return 4;
    case GEMMD_DTYPE_UNSPECIFIED:
    default:
      return 0;
  }
}

int gemmd_dtype_is_fp8(gemmd_dtype_t dtype) {
  return dtype == GEMMD_DTYPE_FP8_E4M3 || dtype == GEMMD_DTYPE_FP8_E5M2;
}

int gemmd_dtype_is_valid(int dtype) {
  return dtype >= GEMMD_DTYPE_FP8_E4M3 && dtype <= GEMMD_DTYPE_FP32;
}

int gemmd_scale_layout_is_valid(int layout) {
  return layout >= GEMMD_SCALE_NONE && layout <= GEMMD_SCALE_BLOCK_128X128;
}

const char *gemmd_dtype_name(gemmd_dtype_t dtype) {
  switch (dtype) {
    case GEMMD_DTYPE_UNSPECIFIED:
      return "DTYPE_UNSPECIFIED";
    case GEMMD_DTYPE_FP8_E4M3:
      return "DTYPE_FP8_E4M3";
    case GEMMD_DTYPE_FP8_E5M2:
      return "DTYPE_FP8_E5M2";
    case GEMMD_DTYPE_BF16:
      return "DTYPE_BF16";
    case GEMMD_DTYPE_FP16:
      return "DTYPE_FP16";
    case GEMMD_DTYPE_FP32:
      return "DTYPE_FP32";
  }
  return "DTYPE_UNKNOWN";
}

const char *gemmd_scale_layout_name(gemmd_scale_layout_t l) {
  switch (l) {
    case GEMMD_SCALE_NONE:
      return "SCALE_LAYOUT_NONE";
    case GEMMD_SCALE_TENSOR:
      return "SCALE_LAYOUT_TENSOR";
    case GEMMD_SCALE_ROW:
      return "SCALE_LAYOUT_ROW";
    case GEMMD_SCALE_BLOCK_1X128:
      return "SCALE_LAYOUT_BLOCK_1X128";
    case GEMMD_SCALE_BLOCK_128X128:
      return "SCALE_LAYOUT_BLOCK_128X128";
  }
  return "SCALE_LAYOUT_UNKNOWN";
}

size_t gemmd_scale_count(gemmd_scale_layout_t layout, uint32_t rows, uint32_t cols) {
  const size_t col_blocks = ((size_t)cols + 127u) / 128u;
  switch (layout) {
    case GEMMD_SCALE_NONE:
      return 0;
    case GEMMD_SCALE_TENSOR:
      return 1;
    case GEMMD_SCALE_ROW:
      return rows;
    case GEMMD_SCALE_BLOCK_1X128:
      return (size_t)rows * col_blocks;
    case GEMMD_SCALE_BLOCK_128X128:
      return (((size_t)rows + 127u) / 128u) * col_blocks;
  }
  return 0;
}

int gemmd_scale_layout_allowed(gemmd_scale_layout_t layout, gemmd_operand_role_t role) {
  switch (layout) {
    case GEMMD_SCALE_NONE:
    case GEMMD_SCALE_TENSOR:
    case GEMMD_SCALE_ROW:
      return 1;
    case GEMMD_SCALE_BLOCK_1X128:
      return role == GEMMD_OPERAND_A;
    case GEMMD_SCALE_BLOCK_128X128:
      return role == GEMMD_OPERAND_B;
  }
  return 0;
}

/* FP8 decode tables, filled once, and whether this CPU has F16C + AVX2 for the vector
 * decode below. */
static float e4m3_table[256];
static float e5m2_table[256];
static int have_f16c;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_init(void) {
  for (int c = 0; c < 256; c++) {
    e4m3_table[c] = gemmd_e4m3_to_f32((uint8_t)c);
    e5m2_table[c] = gemmd_e5m2_to_f32((uint8_t)c);
  }
#if defined(__x86_64__)
  __builtin_cpu_init();
  have_f16c = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#endif
}

#if defined(__x86_64__)
/* FP8 → FP32 eight codes at a time through the FP16 converter, bit-identical to the
 * tables (and to gemmd_e4m3_to_f32 / gemmd_e5m2_to_f32):
 *   E5M2 is FP16 without its low 8 bits: code << 8 converts exactly (infinities too);
 *   E4M3's exponent and mantissa placed under an FP16 exponent (bias 15, 10-bit mantissa)
 *     convert exactly, subnormals included, then × 2^8 rebiases to E4M3's bias 7;
 *   NaN codes become sign | 0x7FC00000, as the tables have them.
 * Returns how many codes it decoded (a multiple of 8); the caller does the rest. */
__attribute__((target("avx2,f16c"))) static size_t decode_fp8_f16c(int e4m3, const uint8_t *s, size_t n,
                                                                   float *dst) {
  const __m128i low7 = _mm_set1_epi16(0x7F), sign8 = _mm_set1_epi16(0x80);
  const __m256i qnan = _mm256_set1_epi32(0x7FC00000);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i x = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(s + i)));
    const __m128i mag = _mm_and_si128(x, low7);
    __m256 f;
    __m128i is_nan;
    if (e4m3) {
      const __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(x, sign8), 8), _mm_slli_epi16(mag, 7));
      f = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
      is_nan = _mm_cmpeq_epi16(mag, low7);
    } else {
      f = _mm256_cvtph_ps(_mm_slli_epi16(x, 8));
      is_nan = _mm_cmpgt_epi16(mag, _mm_set1_epi16(0x7C));
    }
    const __m256i sign = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_and_si128(x, sign8)), 24);
    const __m256 nan = _mm256_castsi256_ps(_mm256_or_si256(sign, qnan));
    f = _mm256_blendv_ps(f, nan, _mm256_castsi256_ps(_mm256_cvtepi16_epi32(is_nan)));
    _mm256_storeu_ps(dst + i, f);
  }
  return i;
}
#endif

void gemmd_decode_row(gemmd_dtype_t dtype, const void *src, size_t n, float *dst) {
  switch (dtype) {
    case GEMMD_DTYPE_FP8_E4M3:
    case GEMMD_DTYPE_FP8_E5M2: {
      pthread_once(&tables_once, tables_init);
      const float *t = dtype == GEMMD_DTYPE_FP8_E4M3 ? e4m3_table : e5m2_table;
      const uint8_t *s = (const uint8_t *)src;
      size_t i = 0;
#if defined(__x86_64__)
      if (have_f16c) i = decode_fp8_f16c(dtype == GEMMD_DTYPE_FP8_E4M3, s, n, dst);
#endif
      for (; i < n; i++) dst[i] = t[s[i]];
      return;
    }
    case GEMMD_DTYPE_BF16: {
      const uint16_t *s = (const uint16_t *)src;
      for (size_t i = 0; i < n; i++) dst[i] = gemmd_bf16_to_f32(s[i]);
      return;
    }
    case GEMMD_DTYPE_FP16: {
      const uint16_t *s = (const uint16_t *)src;
      for (size_t i = 0; i < n; i++) dst[i] = gemmd_fp16_to_f32(s[i]);
      return;
    }
    case GEMMD_DTYPE_FP32: {
      const float *s = (const float *)src;
      for (size_t i = 0; i < n; i++) dst[i] = s[i];
      return;
    }
    case GEMMD_DTYPE_UNSPECIFIED:
    default:
      for (size_t i = 0; i < n; i++) dst[i] = 0.0f;
      return;
  }
}

void gemmd_encode_row(gemmd_dtype_t dtype, const float *src, size_t n, void *dst) {
  switch (dtype) {
    case GEMMD_DTYPE_BF16: {
      uint16_t *d = (uint16_t *)dst;
      for (size_t i = 0; i < n; i++) d[i] = gemmd_bf16_from_f32(src[i]);
      return;
    }
    case GEMMD_DTYPE_FP16: {
      uint16_t *d = (uint16_t *)dst;
      for (size_t i = 0; i < n; i++) d[i] = gemmd_fp16_from_f32(src[i]);
      return;
    }
    case GEMMD_DTYPE_FP32: {
      float *d = (float *)dst;
      for (size_t i = 0; i < n; i++) d[i] = src[i];
      return;
    }
    case GEMMD_DTYPE_FP8_E4M3: {
      uint8_t *d = (uint8_t *)dst;
      for (size_t i = 0; i < n; i++) d[i] = gemmd_e4m3_from_f32(src[i], GEMMD_SAT);
      return;
    }
    case GEMMD_DTYPE_FP8_E5M2: {
      uint8_t *d = (uint8_t *)dst;
      for (size_t i = 0; i < n; i++) d[i] = gemmd_e5m2_from_f32(src[i], GEMMD_SAT);
      return;
    }
    case GEMMD_DTYPE_UNSPECIFIED:
    default:
      return;
  }
}
