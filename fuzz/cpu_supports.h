/* clang 14 (Debian 12) does not know __builtin_cpu_supports("f16c"), which
 * kernels/operand.c asks; build_libfuzzer.sh force-includes this there so that clang builds
 * it unchanged: the same question answered with cpuid. */
#ifndef GEMMD_FUZZ_CPU_SUPPORTS_H_
#define GEMMD_FUZZ_CPU_SUPPORTS_H_

#include <cpuid.h>
#include <string.h>

static inline int gemmd_fuzz_cpu_supports(const char *feature) {
  unsigned a, b, c, d;
  if (strcmp(feature, "f16c") == 0) return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
  if (strcmp(feature, "avx2") == 0) return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2) != 0;
  return 0;
}

#define __builtin_cpu_supports(feature) gemmd_fuzz_cpu_supports(feature)

#endif /* GEMMD_FUZZ_CPU_SUPPORTS_H_ */
