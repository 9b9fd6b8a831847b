/* Reading FP8 weights from safetensors files (--preload).
 *
 * A safetensors file is an 8-byte little-endian header length, a JSON header mapping each
 * tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets into the bytes
 * after the header), and the tensor bytes. Every 2-D tensor of dtype F8_E4M3 or F8_E5M2
 * becomes a weight named after the tensor. Its scales come from a companion F32 tensor
 * named "<name>_scale_inv" (DeepSeek-V3 style) or "<name>_scale" (both are multipliers,
 * as docs/api.md §1 defines scales), whose shape picks the layout:
 *   [] or [1]                         SCALE_LAYOUT_TENSOR
 *   [N] or [N, 1]                     SCALE_LAYOUT_ROW
 *   [ceil(N/128), ceil(K/128)]        SCALE_LAYOUT_BLOCK_128X128
 * and no companion means SCALE_LAYOUT_NONE. The file is mapped read-only; weights point
 * into the mapping, which stays until the last of them is freed. */
#ifndef GEMMD_DAEMON_SAFETENSORS_H_
#define GEMMD_DAEMON_SAFETENSORS_H_

#include <stddef.h>

#include "daemon/weight.h"

/* Calls fn for each FP8 weight of the file (refs = 1, name set, id 0); fn owns it.
 * *skipped counts tensors that are not 2-D FP8 weights or scales. Returns the number of
 * weights, or GEMMD_EIO / GEMMD_EINVAL with err set (a malformed file yields nothing). */
int gemmd_safetensors_load(const char *path, void (*fn)(void *ctx, gemmd_weight_t *w), void *ctx,
                           int *skipped, char *err, size_t errlen);

/* The same for a file's bytes in memory (`what` names them in messages): the weights
 * point into bytes, which must outlive them. */
int gemmd_safetensors_parse(const void *bytes, size_t len, const char *what,
                            void (*fn)(void *ctx, gemmd_weight_t *w), void *ctx, int *skipped,
                            char *err, size_t errlen);

#endif /* GEMMD_DAEMON_SAFETENSORS_H_ */
