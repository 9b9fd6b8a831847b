#include "daemon/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/errors.h"

static volatile gemmd_log_level_t min_level = GEMMD_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void gemmd_log_set_level(gemmd_log_level_t level) { min_level = level; }

int gemmd_log_enabled(gemmd_log_level_t level) { return level >= min_level; }

int gemmd_log_parse_level(const char *name, gemmd_log_level_t *level) {
  for (int i = 0; i < 4; i++) {
    if (strcmp(name, level_names[i]) == 0) {
      *level = (gemmd_log_level_t)i;
      return GEMMD_OK;
    }
  }
  return GEMMD_EINVAL;
}

void gemmd_log(gemmd_log_level_t level, const char *msg, const char *kv_fmt, ...) {
  if (level < min_level) return;
  char line[4096];
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  int n = snprintf(line, sizeof line,
                   "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s msg=\"%s\"",
                   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                   tm.tm_sec, ts.tv_nsec / 1000000, level_names[level], msg);
  if (n < 0) return;
  if (kv_fmt != NULL && kv_fmt[0] != '\0' && (size_t)n < sizeof line - 2) {
    line[n++] = ' ';
    va_list ap;
    va_start(ap, kv_fmt);
    const int m = vsnprintf(line + n, sizeof line - (size_t)n, kv_fmt, ap);
    va_end(ap);
    if (m > 0) n += m;
  }
  if ((size_t)n >= sizeof line - 1) n = (int)sizeof line - 2;
  /* Values come from clients (weight names, messages): a control character in one could
   * start a forged line or hide text, so every one becomes '?'. */
  for (int i = 0; i < n; i++) {
    if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f) line[i] = '?';
  }
  line[n++] = '\n';
  /* One write(2) per line keeps lines whole across threads. */
  ssize_t off = 0;
  while (off < n) {
    const ssize_t w = write(STDERR_FILENO, line + off, (size_t)(n - off));
    if (w <= 0) break;
    off += w;
  }
}
