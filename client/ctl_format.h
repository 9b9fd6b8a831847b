/* gemmctl: human-readable sizes and durations. */
#ifndef GEMMD_CLIENT_CTL_FORMAT_H_
#define GEMMD_CLIENT_CTL_FORMAT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "512 B", "1.5 KiB", "16.0 MiB", "2.00 GiB", "1.00 TiB"; returns buf. */
const char *ctl_format_bytes(uint64_t bytes, char *buf, size_t len);

/* "950 ms", "42.0 s", "3m 05s", "2h 03m 04s", "3d 04h 05m"; returns buf. */
const char *ctl_format_duration_ns(uint64_t ns, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* GEMMD_CLIENT_CTL_FORMAT_H_ */
