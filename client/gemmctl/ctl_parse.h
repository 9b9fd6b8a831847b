/* gemmctl: values of flags (numbers, dtypes, layouts, shapes) and their short names, and
 * human-readable sizes and durations for its listings. Every parser returns 0, or -1 for
 * text it does not accept (nothing written then). */
#ifndef GEMMD_CLIENT_GEMMCTL_CTL_PARSE_H_
#define GEMMD_CLIENT_GEMMCTL_CTL_PARSE_H_

#include <stddef.h>
#include <stdint.h>

#include "kernels/operand.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Decimal digits only, no sign, no overflow. */
int ctl_parse_u64(const char *s, uint64_t *out);
/* A matrix dimension: 1 .. UINT32_MAX. */
int ctl_parse_dim(const char *s, uint32_t *out);
/* Seconds: a finite decimal >= 0 ("10", "0.5"). */
int ctl_parse_seconds(const char *s, double *out);

/* e4m3 | e5m2 | bf16 | fp16 | fp32 */
int ctl_parse_dtype(const char *s, gemmd_dtype_t *out);
const char *ctl_dtype_short(gemmd_dtype_t dtype); /* "e4m3", ...; "?" otherwise */
/* none | tensor | row | 1x128 | 128x128 */
int ctl_parse_layout(const char *s, gemmd_scale_layout_t *out);
const char *ctl_layout_short(gemmd_scale_layout_t layout);

/* "NxK" (n = 2) or "MxNxK" (n = 3): n dimensions separated by 'x'. */
int ctl_parse_shape(const char *s, uint32_t *dims, int n);

typedef struct ctl_shape_s {
  uint32_t m, n, k;
} ctl_shape_t;

/* "MxNxK[,MxNxK...]": 1 .. max shapes (out may be partly written on failure). */
int ctl_parse_shape_list(const char *s, ctl_shape_t *out, size_t max, size_t *count);

/* "512 B", "1.5 KiB", "16.0 MiB", "2.00 GiB", "1.00 TiB"; returns buf. */
const char *ctl_format_bytes(uint64_t bytes, char *buf, size_t len);

/* "950 ms", "42.0 s", "3m 05s", "2h 03m 04s", "3d 04h 05m"; returns buf. */
const char *ctl_format_duration_ns(uint64_t ns, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_GEMMCTL_CTL_PARSE_H_ */
