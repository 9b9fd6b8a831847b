/* Random operands for gemmctl. */
#include "client/gemmctl/ctl_random.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t ctl_rng_next(ctl_rng_t *r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double ctl_rng_uniform(ctl_rng_t *r) { return (double)(ctl_rng_next(r) >> 11) * 0x1.0p-53; }

double ctl_rng_normal(ctl_rng_t *r) {
  double u = ctl_rng_uniform(r);
  if (u < 1e-300) u = 1e-300;
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * ctl_rng_uniform(r));
}

static void store_value(void *data, size_t i, gemmd_dtype_t dtype, float v) {
  switch (dtype) {
    case GEMMD_DTYPE_FP8_E4M3:
      ((uint8_t *)data)[i] = gemmd_e4m3_from_f32(v, GEMMD_SAT);
      break;
    case GEMMD_DTYPE_FP8_E5M2:
      ((uint8_t *)data)[i] = gemmd_e5m2_from_f32(v, GEMMD_SAT);
      break;
    case GEMMD_DTYPE_BF16:
      ((uint16_t *)data)[i] = gemmd_bf16_from_f32(v);
      break;
    case GEMMD_DTYPE_FP16:
      ((uint16_t *)data)[i] = gemmd_fp16_from_f32(v);
      break;
    case GEMMD_DTYPE_FP32:
      ((float *)data)[i] = v;
      break;
    case GEMMD_DTYPE_UNSPECIFIED:
    default:
      break;
  }
}

int ctl_matrix_random(ctl_matrix_t *m, ctl_rng_t *rng, uint32_t rows, uint32_t cols,
                      gemmd_dtype_t dtype, gemmd_scale_layout_t layout) {
  const size_t n = (size_t)rows * cols, ns = gemmd_scale_count(layout, rows, cols);
  memset(m, 0, sizeof *m);
  m->data = malloc(n * gemmd_dtype_size(dtype) + 1);
  m->scales = malloc(sizeof(float) * (ns + 1));
  if (m->data == NULL || m->scales == NULL) {
    ctl_matrix_free(m);
    return -1;
  }
  for (size_t i = 0; i < ns; i++) {
    m->scales[i] = (float)ldexp(0.5 + ctl_rng_uniform(rng), (int)(ctl_rng_next(rng) % 9) - 4);
  }
  for (size_t i = 0; i < n; i++) store_value(m->data, i, dtype, (float)ctl_rng_normal(rng));
  m->op = (gemmd_operand_t){
      rows, cols, cols, dtype, m->data, layout, layout == GEMMD_SCALE_NONE ? NULL : m->scales};
  return 0;
}

void ctl_matrix_free(ctl_matrix_t *m) {
  free(m->data);
  free(m->scales);
  memset(m, 0, sizeof *m);
}
