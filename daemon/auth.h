/* Bearer tokens for gRPC (--grpc-token-file): a call must carry the metadata
 * `authorization: Bearer <token>` with one of the file's tokens, as gRPC's and Kubernetes'
 * token credentials send it. The file holds one token per line (blank lines and lines
 * starting with '#' ignored), so a token is rotated by adding the new one, moving the
 * clients, then removing the old one. gemmd re-reads the file when it changes (checked
 * every tick); a file that becomes unreadable or empty keeps the previous tokens.
 *
 * Any thread may check; the loop reloads. */
#ifndef GEMMD_DAEMON_AUTH_H_
#define GEMMD_DAEMON_AUTH_H_

#include <pthread.h>
#include <stddef.h>
#include <time.h>

#define GEMMD_AUTH_MIN_TOKEN 16  /* characters; shorter tokens are refused at load */
#define GEMMD_AUTH_MAX_TOKENS 64

typedef struct {
  char path[1024];
  pthread_mutex_t mu;
  char *tokens[GEMMD_AUTH_MAX_TOKENS];
  size_t n;
  struct timespec mtime; /* of the file as last read */
  long long size;
} gemmd_auth_t;

/* Reads the token file. 0, or -1 with err set (unreadable, no token, a token too short
 * or with spaces, more than GEMMD_AUTH_MAX_TOKENS). */
int gemmd_auth_init(gemmd_auth_t *a, const char *path, char *err, size_t errlen);
/* Re-reads the file if its mtime or size changed. 1 reloaded, 0 unchanged, -1 kept the old
 * tokens (err set). */
int gemmd_auth_maybe_reload(gemmd_auth_t *a, char *err, size_t errlen);
/* 1 when value (not NUL-terminated) is "Bearer <token>" for a current token. The compare
 * takes the same time whatever bytes match. */
int gemmd_auth_check(gemmd_auth_t *a, const char *value, size_t len);
void gemmd_auth_free(gemmd_auth_t *a);

#endif /* GEMMD_DAEMON_AUTH_H_ */
