/* Scalar number formats: FP8 (E4M3, E5M2), BF16 and FP16 to and from FP32.
 *
 * Header-only, callable from C and from CUDA (host and device). Every conversion is
 * bit-exact with CUDA's own in cuda_fp8.h / cuda_bf16.h / cuda_fp16.h (checked over all
 * codes and millions of floats by kernels/fp8_test.cc):
 *
 *   FP32 -> FP8, round to nearest even.
 *     E4M3 (bias 7, max 448, no Inf, NaN = S.1111.111):
 *       saturating (GEMMD_SAT, CUDA's __NV_SATFINITE): |x| > 464 and +-Inf -> +-448.
 *       non-saturating (GEMMD_NOSAT): |x| > 464 and +-Inf -> S.1111.111 (NaN).
 *     E5M2 (bias 15, max 57344, IEEE-like Inf and NaN):
 *       saturating: |x| >= 61440 and +-Inf -> +-57344.
 *       non-saturating: |x| >= 61440 and +-Inf -> +-Inf (S.11111.00).
 *     Any NaN -> 0x7F (positive NaN in both formats).
 *     |x| <= half the smallest subnormal -> +-0.
 *   FP32 -> BF16 / FP16, round to nearest even; overflow -> +-Inf; NaN -> 0x7FFF.
 *   Every decode to FP32 is exact.
 */
#ifndef GEMMD_KERNELS_FP8_H_
#define GEMMD_KERNELS_FP8_H_

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define GEMMD_HD static inline __host__ __device__
#else
#define GEMMD_HD static inline
#endif

#define GEMMD_E4M3_MAX 448.0f
#define GEMMD_E5M2_MAX 57344.0f

enum { GEMMD_NOSAT = 0, GEMMD_SAT = 1 };

GEMMD_HD uint32_t gemmd_f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

GEMMD_HD float gemmd_f32_from_bits(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* FP32 -> an 8-bit float with `mbits` mantissa bits and exponent bias `bias`.
 * max_code is the largest finite code, overflow_code what a non-saturating overflow
 * gives. Shared by the two FP8 formats below. */
GEMMD_HD uint8_t gemmd_fp8_encode_(float x, int mbits, int bias, uint32_t max_code,
                                   uint32_t inf_code, uint32_t overflow_code, int sat) {
  const uint32_t u = gemmd_f32_bits(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F; /* NaN */
  if (a == 0x7F800000u) return (uint8_t)(sign | (sat ? max_code : inf_code));

  int fexp = (int)(a >> 23); /* biased FP32 exponent */
  uint32_t mant = a & 0x7FFFFFu;
  if (fexp != 0) {
    mant |= 0x800000u;
  } else {
    fexp = 1; /* FP32 subnormal */
  }
  const int e8 = fexp - 127 + bias; /* biased FP8 exponent, may be out of range */
  /* Bits of `mant` to drop: the FP32 fraction beyond mbits, plus denormalisation. */
  const int shift = 23 - mbits + (e8 < 1 ? 1 - e8 : 0);
  uint32_t q;
  if (shift >= 25) {
    q = 0; /* below half the smallest subnormal */
  } else {
    q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
  }
  /* Normal: q holds the implicit bit, and a carry out of the mantissa moves into the
   * exponent by plain addition. Subnormal: q is the code itself. */
  const uint32_t code = e8 < 1 ? q : ((uint32_t)e8 << mbits) + q - (1u << mbits);
  if (code > max_code) return (uint8_t)(sign | (sat ? max_code : overflow_code));
  return (uint8_t)(sign | code);
}

GEMMD_HD uint8_t gemmd_e4m3_from_f32(float x, int sat) {
  return gemmd_fp8_encode_(x, 3, 7, 0x7E, 0x7F, 0x7F, sat);
}

GEMMD_HD uint8_t gemmd_e5m2_from_f32(float x, int sat) {
  return gemmd_fp8_encode_(x, 2, 15, 0x7B, 0x7C, 0x7C, sat);
}

GEMMD_HD float gemmd_e4m3_to_f32(uint8_t c) {
  const uint32_t sign = (uint32_t)(c & 0x80u) << 24;
  const uint32_t e = (c >> 3) & 0xFu, m = c & 0x7u;
  if ((c & 0x7Fu) == 0x7Fu) return gemmd_f32_from_bits(sign | 0x7FC00000u);
  if (e == 0) {
    const float v = (float)m * 0.001953125f; /* m * 2^-9, exact */
    return sign ? -v : v;
  }
  return gemmd_f32_from_bits(sign | ((e + 120u) << 23) | (m << 20));
}

GEMMD_HD float gemmd_e5m2_to_f32(uint8_t c) {
  const uint32_t sign = (uint32_t)(c & 0x80u) << 24;
  const uint32_t e = (c >> 2) & 0x1Fu, m = c & 0x3u;
  if (e == 31) return gemmd_f32_from_bits(sign | 0x7F800000u | (m ? 0x400000u : 0u));
  if (e == 0) {
    const float v = (float)m * 1.52587890625e-05f; /* m * 2^-16, exact */
    return sign ? -v : v;
  }
  return gemmd_f32_from_bits(sign | ((e + 112u) << 23) | (m << 21));
}

GEMMD_HD uint16_t gemmd_bf16_from_f32(float x) {
  const uint32_t u = gemmd_f32_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
  const uint32_t lsb = (u >> 16) & 1u;
  return (uint16_t)((u + 0x7FFFu + lsb) >> 16);
}

GEMMD_HD float gemmd_bf16_to_f32(uint16_t h) { return gemmd_f32_from_bits((uint32_t)h << 16); }

GEMMD_HD uint16_t gemmd_fp16_from_f32(float x) {
  const uint32_t u = gemmd_f32_bits(x);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7FFF;
  if (a == 0x7F800000u) return (uint16_t)(sign | 0x7C00u);
  int fexp = (int)(a >> 23);
  uint32_t mant = a & 0x7FFFFFu;
  if (fexp != 0) {
    mant |= 0x800000u;
  } else {
    fexp = 1;
  }
  const int e16 = fexp - 127 + 15;
  const int shift = 13 + (e16 < 1 ? 1 - e16 : 0);
  uint32_t q;
  if (shift >= 25) {
    q = 0;
  } else {
    q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
  }
  uint32_t code = e16 < 1 ? q : ((uint32_t)e16 << 10) + q - (1u << 10);
  if (code > 0x7C00u) code = 0x7C00u; /* overflow -> Inf */
  return (uint16_t)(sign | code);
}

GEMMD_HD float gemmd_fp16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 31) return gemmd_f32_from_bits(sign | 0x7F800000u | (m << 13));
  if (e == 0) {
    const float v = (float)m * 5.9604644775390625e-08f; /* m * 2^-24, exact */
    return sign ? -v : v;
  }
  return gemmd_f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

#endif /* GEMMD_KERNELS_FP8_H_ */
