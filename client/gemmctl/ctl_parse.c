/* gemmctl's values: parsers, and human-readable sizes and durations. */
#include "client/gemmctl/ctl_parse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>
#include <stdio.h>

/* Digits at s (at least one), stopping at any other character: *end points there. */
static int parse_digits(const char *s, uint64_t *out, const char **end) {
  uint64_t v = 0;
  const char *p = s;
  for (; *p >= '0' && *p <= '9'; p++) {
    const uint64_t d = (uint64_t)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  if (p == s) return -1;
  *out = v;
  *end = p;
  return 0;
}

int ctl_parse_u64(const char *s, uint64_t *out) {
  const char *end;
  uint64_t v;
  if (s == NULL || parse_digits(s, &v, &end) != 0 || *end != '\0') return -1;
  *out = v;
  return 0;
}

int ctl_parse_dim(const char *s, uint32_t *out) {
  uint64_t v;
  if (ctl_parse_u64(s, &v) != 0 || v == 0 || v > UINT32_MAX) return -1;
  *out = (uint32_t)v;
  return 0;
}

int ctl_parse_seconds(const char *s, double *out) {
  char *end;
  if (s == NULL || !((*s >= '0' && *s <= '9') || *s == '.')) return -1;
  const double v = strtod(s, &end);
  if (end == s || *end != '\0' || !isfinite(v) || v < 0) return -1;
  *out = v;
  return 0;
}

typedef struct {
  const char *name;
  int value;
} name_value_t;

static const name_value_t kDtypes[] = {
    {"e4m3", GEMMD_DTYPE_FP8_E4M3}, {"e5m2", GEMMD_DTYPE_FP8_E5M2}, {"bf16", GEMMD_DTYPE_BF16},
    {"fp16", GEMMD_DTYPE_FP16},     {"fp32", GEMMD_DTYPE_FP32},
};

static const name_value_t kLayouts[] = {
    {"none", GEMMD_SCALE_NONE},
    {"tensor", GEMMD_SCALE_TENSOR},
    {"row", GEMMD_SCALE_ROW},
    {"1x128", GEMMD_SCALE_BLOCK_1X128},
    {"128x128", GEMMD_SCALE_BLOCK_128X128},
};

static int lookup(const name_value_t *t, size_t n, const char *s, int *out) {
  for (size_t i = 0; s != NULL && i < n; i++) {
    if (strcmp(t[i].name, s) == 0) {
      *out = t[i].value;
      return 0;
    }
  }
  return -1;
}

static const char *name_of(const name_value_t *t, size_t n, int v) {
  for (size_t i = 0; i < n; i++) {
    if (t[i].value == v) return t[i].name;
  }
  return "?";
}

#define COUNT(t) (sizeof t / sizeof t[0])

int ctl_parse_dtype(const char *s, gemmd_dtype_t *out) {
  int v;
  if (lookup(kDtypes, COUNT(kDtypes), s, &v) != 0) return -1;
  *out = (gemmd_dtype_t)v;
  return 0;
}

const char *ctl_dtype_short(gemmd_dtype_t dtype) {
  return name_of(kDtypes, COUNT(kDtypes), (int)dtype);
}

int ctl_parse_layout(const char *s, gemmd_scale_layout_t *out) {
  int v;
  if (lookup(kLayouts, COUNT(kLayouts), s, &v) != 0) return -1;
  *out = (gemmd_scale_layout_t)v;
  return 0;
}

const char *ctl_layout_short(gemmd_scale_layout_t layout) {
  return name_of(kLayouts, COUNT(kLayouts), (int)layout);
}

/* n dimensions from s, the last followed by one of `stops`; *end after it. */
static int parse_dims(const char *s, uint32_t *dims, int n, const char **end) {
  const char *p = s;
  for (int i = 0; i < n; i++) {
    uint64_t v;
    if (parse_digits(p, &v, &p) != 0 || v == 0 || v > UINT32_MAX) return -1;
    dims[i] = (uint32_t)v;
    if (i + 1 < n && *p++ != 'x') return -1;
  }
  *end = p;
  return 0;
}

int ctl_parse_shape(const char *s, uint32_t *dims, int n) {
  uint32_t d[3];
  const char *end;
  if (s == NULL || n < 1 || n > 3 || parse_dims(s, d, n, &end) != 0 || *end != '\0') return -1;
  memcpy(dims, d, (size_t)n * sizeof d[0]);
  return 0;
}

int ctl_parse_shape_list(const char *s, ctl_shape_t *out, size_t max, size_t *count) {
  size_t n = 0;
  const char *p = s;
  if (s == NULL) return -1;
  for (;;) {
    uint32_t d[3];
    if (n >= max || parse_dims(p, d, 3, &p) != 0) return -1;
    out[n++] = (ctl_shape_t){d[0], d[1], d[2]};
    if (*p == '\0') break;
    if (*p++ != ',') return -1;
  }
  *count = n;
  return 0;
}

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
