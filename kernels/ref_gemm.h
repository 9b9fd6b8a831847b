/* The FP64 reference that every backend and kernel is checked against.
 *
 * D[m][n] = Σ_k value_A(m,k) · value_B(n,k) with every value = stored × scale taken
 * exactly (FP32 decode, FP64 multiply and sum). Slow and simple on purpose.
 */
#ifndef GEMMD_KERNELS_REF_GEMM_H_
#define GEMMD_KERNELS_REF_GEMM_H_

#include <stddef.h>

#include "kernels/operand.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Real values of an operand as FP64, rows×cols dense (out has rows*cols doubles). */
void gemmd_ref_dequantize(const gemmd_operand_t *op, double *out);

/* d (M×N doubles, dense) = A·Bᵀ in FP64. Returns 0, GEMMD_EINVAL or GEMMD_ENOMEM. */
int gemmd_ref_gemm_f64(const gemmd_operand_t *a, const gemmd_operand_t *b, double *d);

/* ‖out − ref‖_F / ‖ref‖_F over n elements of `out` in out_dtype (BF16, FP16, FP32).
 * NaN in out where ref is finite, or any mismatch in non-finite values, gives +Inf.
 * A zero ref gives the absolute error ‖out‖_F. */
double gemmd_rel_frobenius_error(const double *ref, const void *out, gemmd_dtype_t out_dtype,
                                 size_t n);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_KERNELS_REF_GEMM_H_ */
