/* A safetensors file as --preload reads it (safetensors.h): the input is the file's bytes.
 * Each weight the parser hands over is read whole, its scales as floats, as the engines
 * read them, and freed; the last weight freed releases the bytes' mapping. */
#include <string.h>

#include "daemon/safetensors.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/fuzz_util.h"
#include "kernels/errors.h"

typedef struct {
  const uint8_t *begin, *end;
  int n;
} seen_t;

static void take(void *ctx, gemmd_weight_t *w) {
  seen_t *s = ctx;
  fuzz_check(w->name != NULL && w->refs == 1 && w->n > 0 && w->k > 0);
  fuzz_check(gemmd_dtype_is_fp8(w->dtype));
  fuzz_check(w->data >= s->begin && (size_t)(s->end - w->data) >= (size_t)w->n * w->k);
  const gemmd_operand_t op = gemmd_weight_operand(w);
  fuzz_touch_operand(&op);
  s->n++;
  gemmd_weight_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  seen_t s = {data, data + size, 0};
  int skipped = 0;
  char err[512];
  const int rc = gemmd_safetensors_parse(data, size, "fuzz.safetensors", take, &s, &skipped, err, sizeof err);
  if (rc < 0) {
    fuzz_check(rc == GEMMD_EINVAL || rc == GEMMD_ENOMEM);
    fuzz_check_message(err, sizeof err);
  } else {
    fuzz_check(rc == s.n && skipped >= 0);
  }
  return 0;
}
