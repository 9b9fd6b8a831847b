/* Human-readable numbers for gemmctl's listings. */
#include "client/ctl_format.h"

#include <inttypes.h>
#include <stdio.h>

const char *ctl_format_bytes(uint64_t bytes, char *buf, size_t len) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) {
    snprintf(buf, len, "%" PRIu64 " B", bytes);
    return buf;
  }
  double v = (double)bytes / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, len, u >= 2 ? "%.2f %s" : "%.1f %s", v, units[u]);
  return buf;
}

const char *ctl_format_duration_ns(uint64_t ns, char *buf, size_t len) {
  const uint64_t s = (uint64_t)(ns / 1000000000u);
  if (ns < 1000000000ull) {
    snprintf(buf, len, "%" PRIu64 " ms", (uint64_t)(ns / 1000000u));
  } else if (s < 60) {
    snprintf(buf, len, "%.1f s", (double)ns / 1e9);
  } else if (s < 3600) {
    snprintf(buf, len, "%" PRIu64 "m %02" PRIu64 "s", s / 60, s % 60);
  } else if (s < 86400) {
    snprintf(buf, len, "%" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", s / 3600, s / 60 % 60, s % 60);
  } else {
    snprintf(buf, len, "%" PRIu64 "d %02" PRIu64 "h %02" PRIu64 "m", s / 86400, s / 3600 % 24,
             s / 60 % 60);
  }
  return buf;
}
