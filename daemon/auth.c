/* The gRPC token file: parsing, reloading, constant-time checks. */
#include "daemon/auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Parses text into tokens[]; 0 or -1 with err set (nothing kept then). */
static int parse(char *text, char **tokens, size_t *n, char *err, size_t errlen) {
  *n = 0;
  int line_no = 0;
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    line_no++;
    size_t len = strlen(line);
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t')) line[--len] = '\0';
    while (*line == ' ' || *line == '\t') line++, len--;
    if (len == 0 || line[0] == '#') continue;
    for (size_t i = 0; i < len; i++) {
      if ((unsigned char)line[i] <= ' ' || (unsigned char)line[i] >= 0x7f) {
        snprintf(err, errlen, "line %d: a token is printable ASCII without spaces", line_no);
        goto fail;
      }
    }
    if (len < GEMMD_AUTH_MIN_TOKEN) {
      snprintf(err, errlen, "line %d: a token needs at least %d characters", line_no, GEMMD_AUTH_MIN_TOKEN);
      goto fail;
    }
    if (*n == GEMMD_AUTH_MAX_TOKENS) {
      snprintf(err, errlen, "more than %d tokens", GEMMD_AUTH_MAX_TOKENS);
      goto fail;
    }
    if ((tokens[*n] = strdup(line)) == NULL) {
      snprintf(err, errlen, "out of memory");
      goto fail;
    }
    (*n)++;
  }
  if (*n == 0) {
    snprintf(err, errlen, "no token in the file");
    return -1;
  }
  return 0;
fail:
  for (size_t i = 0; i < *n; i++) free(tokens[i]);
  *n = 0;
  return -1;
}

/* Reads the file whole (at most 64 KiB) and parses it. */
static int load(const char *path, char **tokens, size_t *n, struct stat *st, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  if (fstat(fileno(f), st) != 0 || st->st_size > 65536) {
    fclose(f);
    snprintf(err, errlen, "%s: not a token file of at most 64 KiB", path);
    return -1;
  }
  char buf[65537];
  const size_t got = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[got] = '\0';
  if (memchr(buf, '\0', got) != NULL) {
    snprintf(err, errlen, "%s: holds a NUL byte", path);
    return -1;
  }
  char msg[200];
  if (parse(buf, tokens, n, msg, sizeof msg) != 0) {
    snprintf(err, errlen, "%s: %s", path, msg);
    return -1;
  }
  return 0;
}

int gemmd_auth_init(gemmd_auth_t *a, const char *path, char *err, size_t errlen) {
  memset(a, 0, sizeof *a);
  pthread_mutex_init(&a->mu, NULL);
  snprintf(a->path, sizeof a->path, "%s", path);
  struct stat st;
  if (load(path, a->tokens, &a->n, &st, err, errlen) != 0) return -1;
  a->mtime = st.st_mtim;
  a->size = (long long)st.st_size;
  return 0;
}

int gemmd_auth_maybe_reload(gemmd_auth_t *a, char *err, size_t errlen) {
  struct stat st;
  if (stat(a->path, &st) != 0) {
    snprintf(err, errlen, "%s: %s", a->path, strerror(errno));
    return -1;
  }
  if (st.st_mtim.tv_sec == a->mtime.tv_sec && st.st_mtim.tv_nsec == a->mtime.tv_nsec &&
      (long long)st.st_size == a->size) {
    return 0;
  }
  char *tokens[GEMMD_AUTH_MAX_TOKENS];
  size_t n;
  a->mtime = st.st_mtim; /* a bad file is reported once, not every tick */
  a->size = (long long)st.st_size;
  if (load(a->path, tokens, &n, &st, err, errlen) != 0) return -1;
  pthread_mutex_lock(&a->mu);
  char *old[GEMMD_AUTH_MAX_TOKENS];
  const size_t old_n = a->n;
  memcpy(old, a->tokens, sizeof old);
  memcpy(a->tokens, tokens, n * sizeof tokens[0]);
  a->n = n;
  pthread_mutex_unlock(&a->mu);
  for (size_t i = 0; i < old_n; i++) free(old[i]);
  return 1;
}

/* 1 when a (len) equals NUL-terminated b, in time that depends on len only. */
static int same(const char *a, size_t len, const char *b) {
  const size_t blen = strlen(b);
  unsigned diff = (unsigned)(len != blen);
  for (size_t i = 0; i < len; i++) diff |= (unsigned char)a[i] ^ (unsigned char)(i < blen ? b[i] : 0);
  return diff == 0;
}

int gemmd_auth_check(gemmd_auth_t *a, const char *value, size_t len) {
  static const char kScheme[] = "Bearer ";
  const size_t sl = sizeof kScheme - 1;
  if (len <= sl || strncasecmp(value, kScheme, sl) != 0) return 0;
  int ok = 0;
  pthread_mutex_lock(&a->mu);
  for (size_t i = 0; i < a->n; i++) ok |= same(value + sl, len - sl, a->tokens[i]);
  pthread_mutex_unlock(&a->mu);
  return ok;
}

void gemmd_auth_free(gemmd_auth_t *a) {
  for (size_t i = 0; i < a->n; i++) free(a->tokens[i]);
  a->n = 0;
  pthread_mutex_destroy(&a->mu);
}
