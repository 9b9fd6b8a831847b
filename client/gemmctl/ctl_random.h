/* gemmctl: seeded random operands (splitmix64), for one-off GEMMs and benchmarks. */
#ifndef GEMMD_CLIENT_GEMMCTL_CTL_RANDOM_H_
#define GEMMD_CLIENT_GEMMCTL_CTL_RANDOM_H_

#include <stdint.h>

#include "kernels/operand.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ctl_rng_s {
  uint64_t s;
} ctl_rng_t;

uint64_t ctl_rng_next(ctl_rng_t *r);
double ctl_rng_uniform(ctl_rng_t *r); /* [0, 1) */
double ctl_rng_normal(ctl_rng_t *r);

/* A matrix that owns its storage; op views it (ld = cols). */
typedef struct ctl_matrix_s {
  gemmd_operand_t op;
  void *data;
  float *scales;
} ctl_matrix_t;

/* rows×cols of dtype: standard normal values rounded to dtype, and random positive
 * scales of the layout, [0.5, 1.5) × 2^(-4..4). 0, or -1 when out of memory. */
int ctl_matrix_random(ctl_matrix_t *m, ctl_rng_t *rng, uint32_t rows, uint32_t cols,
                      gemmd_dtype_t dtype, gemmd_scale_layout_t layout);
void ctl_matrix_free(ctl_matrix_t *m);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_GEMMCTL_CTL_RANDOM_H_ */
