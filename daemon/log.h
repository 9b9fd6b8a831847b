/* Structured log lines (logfmt) on stderr, one write per line, from any thread:
 *
 *   ts=2026-11-30T14:00:00.123Z level=info msg="listening" grpc=0.0.0.0:50051
 *
 * gemmd_log(level, msg, fmt, ...) takes the key=value part as a printf format; values
 * with spaces should be quoted by the caller ("reason=\"%s\""). Control characters in the
 * line (a newline in a client's weight name) are written as '?', so a line is one line. */
#ifndef GEMMD_DAEMON_LOG_H_
#define GEMMD_DAEMON_LOG_H_

typedef enum {
  GEMMD_LOG_DEBUG = 0,
  GEMMD_LOG_INFO = 1,
  GEMMD_LOG_WARN = 2,
  GEMMD_LOG_ERROR = 3,
} gemmd_log_level_t;

void gemmd_log_set_level(gemmd_log_level_t level);
/* "debug", "info", "warn", "error" -> 0, or GEMMD_EINVAL. */
int gemmd_log_parse_level(const char *name, gemmd_log_level_t *level);
int gemmd_log_enabled(gemmd_log_level_t level);

void gemmd_log(gemmd_log_level_t level, const char *msg, const char *kv_fmt, ...)
    __attribute__((format(printf, 3, 4)));


#endif /* GEMMD_DAEMON_LOG_H_ */
