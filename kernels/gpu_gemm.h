/* The grouped FP8 GEMM on the GPU: every group of a batch buffer (group_table.h), in one
 * persistent launch whose grid does not depend on the batch, so a CUDA graph captured
 * once replays for any batch: group count, shapes and offsets are read on the device.
 *
 * D_g = A_g · B_gᵀ with FP32 accumulation promoted to FP32 registers every 128 of K,
 * A scales 1×128, B scales NONE / TENSOR / ROW / BLOCK_128X128, E4M3 and E5M2 in any mix,
 * D in BF16 / FP16 / FP32 rounded to nearest even.
 *
 * Launchers take device pointers, queue work on `stream` and return 0, GEMMD_EINVAL or
 * GEMMD_EDEVICE (the launch failed). Never throw, never exit. */
#ifndef GEMMD_KERNELS_GPU_GEMM_H_
#define GEMMD_KERNELS_GPU_GEMM_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "kernels/group_table.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GEMMD_GPU_KERNEL_SIMPLE = 0, /* mma.sync, correctness first (sm90_gemm_simple.cu) */
  GEMMD_GPU_KERNEL_WGMMA = 1,  /* TMA + WGMMA, warp-specialized (wgmma/kernel.cu) */
} gemmd_gpu_kernel_t;

/* Bytes of a CUtensorMap in a batch's scheduling area. */
#define GEMMD_GPU_TMAP_BYTES 128

/* Size of the scheduling area a batch of n_groups needs (header.sched_arena, a multiple
 * of 128 bytes from the start of the batch): three tensor maps per group (A, B, D), then
 * n_groups + 1 tile prefix sums and every group's tile count where all groups have the same
 * (else 0). Every batch may carry one; only the WGMMA kernel reads it. */
uint64_t gemmd_gpu_gemm_sched_bytes(uint32_t n_groups);

/* The host's part of a batch for `kernel`, written into the host copy of the batch buffer
 * (table final, b_data holding device addresses) that will be uploaded to `dev_batch`:
 * for WGMMA, the tile configuration (header.tile_kind, .tile_n and .k_splits, by the
 * rules of kernels/wgmma/tile_rules.h), the tensor maps and tile prefix sums in the
 * scheduling area, and header.total_tiles. GEMMD_EINVAL for a table the kernel cannot take (zero
 * sizes, lda/ldb below k or not a multiple of 16, unaligned B), GEMMD_EDEVICE without the
 * driver's tensor-map encoder. Nothing to do (GEMMD_OK) for the other kernels. */
int gemmd_gpu_gemm_prepare(gemmd_gpu_kernel_t kernel, void *host_batch, uint64_t dev_batch);

/* Bytes of the workspace a stream's split-K launches need (ROWS128_SPLIT: the parts' FP32
 * sums and an arrival counter per tile; gemmd_gpu_gemm_parts_run_ws). It must be zeroed
 * before its first use; every launch leaves it zeroed for the next. */
uint64_t gemmd_gpu_gemm_workspace_bytes(void);

/* Runs the GEMM of the batch at `batch` (device memory; header, table, arenas): every
 * launch (see gemmd_gpu_gemm_parts_run for one batch's launches alone). */
int gemmd_gpu_gemm(gemmd_gpu_kernel_t kernel, const void *batch, cudaStream_t stream);

/* The launches a batch needs, as a mask: with WGMMA, groups with BF16/FP16 output run on
 * the WGMMA kernel of the batch's tile kind (one kernel per kind, GEMMD_GPU_PART_KIND) and
 * groups with FP32 output on the mma.sync kernel (docs/bench/kernels.md says why), so a
 * batch launches only the kernels it has work for (a kernel with nothing to do still costs
 * its launch). Every launch stays batch-independent, so a graph captured for a mask
 * replays for every batch with that mask. */
#define GEMMD_GPU_PART_KIND(kind) (1u << (kind)) /* the WGMMA kernel of a gemmd_tile_kind_t */
enum {
  GEMMD_GPU_PART_HALF_OUT = 1, /* = GEMMD_GPU_PART_KIND(GEMMD_TILE_ROWS128) */
  GEMMD_GPU_PART_FP32_OUT = 32,
  GEMMD_GPU_PARTS_ALL = 63
};

/* The mask of a table before it is prepared: HALF_OUT for BF16/FP16 outputs, FP32_OUT. */
uint32_t gemmd_gpu_gemm_parts(const gemmd_group_params_t *table, uint32_t n_groups);

/* The mask of a batch prepared for the WGMMA kernel (gemmd_gpu_gemm_prepare; its host copy):
 * the WGMMA part is the kernel of the header's tile kind. */
uint32_t gemmd_gpu_gemm_prepared_parts(const void *host_batch);

/* gemmd_gpu_gemm with only the launches of `parts` (gemmd_gpu_gemm_prepared_parts of the
 * batch; groups of the other parts are not computed, and a WGMMA kernel of another kind
 * than the batch's does nothing). The simple kernel is one launch for every group whenever
 * parts is not 0. gemmd_gpu_gemm launches every part. */
int gemmd_gpu_gemm_parts_run(gemmd_gpu_kernel_t kernel, const void *batch, uint32_t parts, cudaStream_t stream);

/* gemmd_gpu_gemm_parts_run with the split-K workspace `workspace`
 * (gemmd_gpu_gemm_workspace_bytes, zeroed before its first use): each stream that may run
 * at the same time as another needs its own. NULL: one the library keeps for the process
 * (made on first use, so not inside a graph capture), as gemmd_gpu_gemm_parts_run does. */
int gemmd_gpu_gemm_parts_run_ws(gemmd_gpu_kernel_t kernel, const void *batch, uint32_t parts, void *workspace,
                                cudaStream_t stream);

/* Quantizes the batch's raw-A jobs (BF16/FP16/FP32 → E4M3, 1×128 scales) in place. */
int gemmd_gpu_quantize_jobs(const void *batch, cudaStream_t stream);

/* Largest number of groups a batch may hold (shared memory of the tile scheduler). */
#define GEMMD_GPU_MAX_GROUPS 4096

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_KERNELS_GPU_GEMM_H_ */
