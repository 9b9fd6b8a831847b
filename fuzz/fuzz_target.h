/* What every fuzz target defines: libFuzzer's entry point. The same file links either with
 * libFuzzer (fuzz/build_libfuzzer.sh) or with replay_main.c, which runs the corpus,
 * the regressions and mutations of them under `bazel test`. */
#ifndef GEMMD_FUZZ_FUZZ_TARGET_H_
#define GEMMD_FUZZ_FUZZ_TARGET_H_

#include <stddef.h>
#include <stdint.h>

/* One input. Returns 0; a bug aborts (a sanitizer's report, or fuzz_check). Must free what
 * it allocates and keep nothing from one input to the next. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* GEMMD_FUZZ_FUZZ_TARGET_H_ */
