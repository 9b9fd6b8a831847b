// kernels/fp8.h against CUDA's own host-side conversions (cuda_fp8.h, cuda_bf16.h,
// cuda_fp16.h), a reference no one here wrote:
//   - decode: all 256 codes of E4M3 and E5M2, all 65536 of BF16 and FP16;
//   - encode: every format and saturation mode over several million floats: random bit
//     patterns (NaN, Inf, subnormals of every size), random values in each format's
//     range, every exact tie between neighbouring codes and its two float neighbours,
//     the overflow thresholds, ±0, ±Inf and NaN.
// Results must agree bit for bit (NaN with NaN, whatever its payload).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/fp8.h"

namespace {

int g_failures = 0;

void fail(const char *what, float x, unsigned got, unsigned want) {
  if (++g_failures <= 20) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    std::fprintf(stderr, "MISMATCH %s: x=%a (0x%08x) gemmd=0x%x cuda=0x%x\n", what, x, bits,
                 got, want);
  }
}

bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

void check_decode() {
  for (int c = 0; c < 256; c++) {
    __nv_fp8_e4m3 a;
    a.__x = static_cast<__nv_fp8_storage_t>(c);
    __nv_fp8_e5m2 b;
    b.__x = static_cast<__nv_fp8_storage_t>(c);
    const float ra = static_cast<float>(a), rb = static_cast<float>(b);
    if (!same_float(gemmd_e4m3_to_f32(static_cast<uint8_t>(c)), ra))
      fail("e4m3 decode", ra, bits_of(gemmd_e4m3_to_f32(static_cast<uint8_t>(c))), bits_of(ra));
    if (!same_float(gemmd_e5m2_to_f32(static_cast<uint8_t>(c)), rb))
      fail("e5m2 decode", rb, bits_of(gemmd_e5m2_to_f32(static_cast<uint8_t>(c))), bits_of(rb));
  }
  for (int c = 0; c < 65536; c++) {
    __nv_bfloat16_raw br;
    br.x = static_cast<unsigned short>(c);
    __half_raw hr;
    hr.x = static_cast<unsigned short>(c);
    const float rb = __bfloat162float(__nv_bfloat16(br));
    const float rh = __half2float(__half(hr));
    if (!same_float(gemmd_bf16_to_f32(static_cast<uint16_t>(c)), rb))
      fail("bf16 decode", rb, bits_of(gemmd_bf16_to_f32(static_cast<uint16_t>(c))), bits_of(rb));
    if (!same_float(gemmd_fp16_to_f32(static_cast<uint16_t>(c)), rh))
      fail("fp16 decode", rh, bits_of(gemmd_fp16_to_f32(static_cast<uint16_t>(c))), bits_of(rh));
  }
}

// One float through every encoder, compared with CUDA's.
void check_encode(float x) {
  for (int sat = 0; sat <= 1; sat++) {
    const __nv_saturation_t mode = sat ? __NV_SATFINITE : __NV_NOSAT;
    const unsigned want4 = __nv_cvt_float_to_fp8(x, mode, __NV_E4M3);
    const unsigned got4 = gemmd_e4m3_from_f32(x, sat);
    if (got4 != want4) fail(sat ? "e4m3 encode satfinite" : "e4m3 encode nosat", x, got4, want4);
    const unsigned want5 = __nv_cvt_float_to_fp8(x, mode, __NV_E5M2);
    const unsigned got5 = gemmd_e5m2_from_f32(x, sat);
    if (got5 != want5) fail(sat ? "e5m2 encode satfinite" : "e5m2 encode nosat", x, got5, want5);
  }
  const unsigned wantb = __nv_bfloat16_raw(__float2bfloat16_rn(x)).x;
  const unsigned gotb = gemmd_bf16_from_f32(x);
  if (gotb != wantb) fail("bf16 encode", x, gotb, wantb);
  const unsigned wanth = __half_raw(__float2half_rn(x)).x;
  const unsigned goth = gemmd_fp16_from_f32(x);
  if (goth != wanth) fail("fp16 encode", x, goth, wanth);
}

uint64_t g_rng = 0x243F6A8885A308D3ull;
uint64_t next_rand() {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// Every tie between neighbouring finite codes of a decoder's format, and the floats
// right beside it; returns how many floats were checked.
template <typename Decode>
long check_ties(Decode decode, int ncodes) {
  long n = 0;
  std::vector<float> vals;
  for (int c = 0; c < ncodes; c++) {
    const float v = decode(c);
    if (std::isfinite(v) && v >= 0.0f) vals.push_back(v);
  }
  std::sort(vals.begin(), vals.end());
  for (size_t i = 0; i + 1 < vals.size(); i++) {
    const float mid = static_cast<float>((static_cast<double>(vals[i]) + vals[i + 1]) / 2);
    const float around[] = {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY),
                            vals[i], vals[i + 1]};
    for (float x : around) {
      check_encode(x);
      check_encode(-x);
      n += 2;
    }
  }
  // Beyond the largest finite value: one step up is the overflow tie.
  const float top = vals.back();
  const float step = top - vals[vals.size() - 2];
  for (float x : {top + step / 2, std::nextafter(top + step / 2, 0.0f),
                  std::nextafter(top + step / 2, INFINITY), top + step, top * 2}) {
    check_encode(x);
    check_encode(-x);
    n += 2;
  }
  return n;
}

}  // namespace

int main() {
  long checked = 0;
  check_decode();

  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN,
                            float_of(0x7FC00001u), float_of(0xFF800001u), float_of(1u),
                            float_of(0x80000001u), float_of(0x007FFFFFu), float_of(0x00800000u),
                            448.0f, 464.0f, 480.0f, 57344.0f, 61440.0f, 65504.0f, 65520.0f,
                            3.4028235e38f};
  for (float x : specials) {
    check_encode(x);
    check_encode(-x);
    checked += 2;
  }

  checked += check_ties([](int c) { return gemmd_e4m3_to_f32(static_cast<uint8_t>(c)); }, 256);
  checked += check_ties([](int c) { return gemmd_e5m2_to_f32(static_cast<uint8_t>(c)); }, 256);
  checked += check_ties([](int c) { return gemmd_fp16_to_f32(static_cast<uint16_t>(c)); }, 65536);
  checked += check_ties([](int c) { return gemmd_bf16_to_f32(static_cast<uint16_t>(c)); }, 65536);

  // Random bit patterns: every exponent, NaN payloads, Inf, subnormals.
  for (int i = 0; i < 2000000; i++) {
    check_encode(float_of(static_cast<uint32_t>(next_rand())));
    checked++;
  }
  // Random values spread over each format's range, where rounding matters most.
  for (int i = 0; i < 2000000; i++) {
    const uint64_t r = next_rand();
    const int e = static_cast<int>(r % 48) - 30;  // 2^-30 .. 2^17
    const float x = std::ldexp(1.0f + static_cast<float>((r >> 8) & 0xFFFFFF) / 16777216.0f, e);
    check_encode((r >> 40) & 1 ? -x : x);
    checked++;
  }

  std::printf("fp8_test: %ld floats encoded, %d codes decoded, %d failures\n", checked,
              2 * 256 + 2 * 65536, g_failures);
  return g_failures == 0 ? 0 : 1;
}
