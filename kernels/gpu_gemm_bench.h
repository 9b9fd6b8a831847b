/* Hooks into the grouped GEMM (gpu_gemm.h) for benchmarks and tests, not for gemmd:
 * a forced tile configuration, the tensor-map cache's reset, and the stamps of an
 * instrumented build (//kernels/bench:gemm_bench_stamps). */
#ifndef GEMMD_KERNELS_GPU_GEMM_BENCH_H_
#define GEMMD_KERNELS_GPU_GEMM_BENCH_H_

#include <stdint.h>

#include "kernels/gpu_gemm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Kinds of tile a run may force; AUTO: the kernel's choice. */
#define GEMMD_GPU_TILE_KIND_AUTO 0xFFFFFFFFu

/* gemmd_gpu_gemm_prepare with a forced configuration: `kind` a gemmd_tile_kind_t (or
 * GEMMD_GPU_TILE_KIND_AUTO) and tiles of `tile_n` columns (16, 32, 64 or 128, or 96 or
 * 192: ROWS128_WIDE's, which they choose with AUTO; 96 also ROWS256's; 0: the best width
 * for that kind). GEMMD_EINVAL for other values or a width the kind lacks. */
int gemmd_gpu_gemm_prepare_tiles(gemmd_gpu_kernel_t kernel, void *host_batch, uint64_t dev_batch, uint32_t kind,
                                 uint32_t tile_n);

/* gemmd_gpu_gemm_prepare_tiles with K cut into `k_splits` parts per tile (split-K: each
 * part its own unit of the grid, the tile's last part adding the others' FP32 sums in part
 * order): 0 = the kernel's choice, 1 = none (AUTO then never picks ROWS128_SPLIT), up to
 * GEMMD_GPU_MAX_K_SPLITS. Parts are the ROWS128_SPLIT kind's alone (k_splits > 1 with
 * AUTO picks it; with another kind: GEMMD_ENOTSUP) and only for batches whose tiles × parts
 * fit one wave of the grid (GEMMD_EINVAL otherwise). */
#define GEMMD_GPU_MAX_K_SPLITS 8
int gemmd_gpu_gemm_prepare_split(gemmd_gpu_kernel_t kernel, void *host_batch, uint64_t dev_batch, uint32_t kind,
                                 uint32_t tile_n, uint32_t k_splits);

/* gemmd_gpu_gemm_prepare encodes each distinct tensor map once (by address, sizes, strides
 * and box: a registered weight's B map is encoded for its first batch, then copied) and
 * remembers up to 16384 (kernels/tmap_cache.h). This forgets them all: the cost of a batch
 * whose maps are all new. */
void gemmd_gpu_gemm_forget_maps(void);

/* The stamps of the last launch (builds with GEMMD_WGMMA_STAMPS=1, kernels/wgmma/stamps.cuh:
 * per CTA and point, the global timer in ns and the SM's clock, 0 where not reached; `out`
 * holds *ctas x *points x 2 values), or with `out` null zeroes them. Sets *ctas and *points;
 * other builds return GEMMD_ENOTSUP. */
int gemmd_gpu_gemm_stamps(uint64_t *out, uint32_t *ctas, uint32_t *points);

/* The name of stamp point `point` (0 .. *points - 1 of gemmd_gpu_gemm_stamps), "?" past
 * them; in every build. */
const char *gemmd_gpu_gemm_stamp_name(uint32_t point);

/* The same build's WGMMA timeline: per CTA, consumer warpgroup, K block of the ring's last
 * round (*blocks of them: stage + stages x phase), 64-row half, the SM clock at issue, at
 * completion, and (half 0) before the block's full-barrier wait or (half 1, 256-row tiles)
 * after the stage's release (`out`: *ctas x 2 x *blocks x 2 x 3 values; null zeroes it). */
int gemmd_gpu_gemm_wg_stamps(uint64_t *out, uint32_t *ctas, uint32_t *blocks);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_KERNELS_GPU_GEMM_BENCH_H_ */
