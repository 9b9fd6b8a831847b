/* The token file: parsing, checks, reloading. */
#include "daemon/auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/test_check.h"

static char path[256];

/* Writes text to the token file with an mtime of `stamp` seconds, so reloads see a change. */
static void write_file(const char *text, long stamp) {
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
  struct timespec ts[2] = {{stamp, 0}, {stamp, 0}};
  utimensat(AT_FDCWD, path, ts, 0);
}

static int check(gemmd_auth_t *a, const char *header) { return gemmd_auth_check(a, header, strlen(header)); }

int main(void) {
  const char *tmp = getenv("TEST_TMPDIR");
  snprintf(path, sizeof path, "%s/tokens", tmp ? tmp : "/tmp");
  char err[1200];
  gemmd_auth_t a;

  write_file("# operators' tokens\n\n  0123456789abcdefXYZ  \r\nsecond-token-0000000\n", 1000);
  CHECK(gemmd_auth_init(&a, path, err, sizeof err) == 0);
  CHECK(a.n == 2);
  CHECK(check(&a, "Bearer 0123456789abcdefXYZ"));
  CHECK(check(&a, "bearer second-token-0000000"));
  CHECK(!check(&a, "Bearer 0123456789abcdefXY"));    /* a prefix */
  CHECK(!check(&a, "Bearer 0123456789abcdefXYZZ"));  /* longer */
  CHECK(!check(&a, "Basic 0123456789abcdefXYZ"));
  CHECK(!check(&a, "Bearer "));
  CHECK(!check(&a, "0123456789abcdefXYZ"));
  CHECK(!check(&a, "# operators' tokens"));
  /* Not NUL-terminated: only len bytes count. */
  CHECK(gemmd_auth_check(&a, "Bearer second-token-0000000garbage", 27));

  /* Unchanged: no reload. Changed: the new tokens, the old ones gone. */
  CHECK(gemmd_auth_maybe_reload(&a, err, sizeof err) == 0);
  write_file("rotated-token-111111\n", 2000);
  CHECK(gemmd_auth_maybe_reload(&a, err, sizeof err) == 1);
  CHECK(check(&a, "Bearer rotated-token-111111"));
  CHECK(!check(&a, "Bearer 0123456789abcdefXYZ"));
  /* A bad new file keeps the previous tokens, and is reported once. */
  write_file("short\n", 3000);
  CHECK(gemmd_auth_maybe_reload(&a, err, sizeof err) == -1);
  CHECK(strstr(err, "at least 16") != NULL);
  CHECK(gemmd_auth_maybe_reload(&a, err, sizeof err) == 0);
  CHECK(check(&a, "Bearer rotated-token-111111"));
  unlink(path);
  CHECK(gemmd_auth_maybe_reload(&a, err, sizeof err) == -1);
  CHECK(check(&a, "Bearer rotated-token-111111"));
  gemmd_auth_free(&a);

  /* Refused at start. */
  write_file("# nothing\n\n", 4000);
  CHECK(gemmd_auth_init(&a, path, err, sizeof err) == -1 && strstr(err, "no token") != NULL);
  gemmd_auth_free(&a);
  write_file("has a space in it, long enough\n", 5000);
  CHECK(gemmd_auth_init(&a, path, err, sizeof err) == -1 && strstr(err, "without spaces") != NULL);
  gemmd_auth_free(&a);
  unlink(path);
  CHECK(gemmd_auth_init(&a, path, err, sizeof err) == -1);
  gemmd_auth_free(&a);

  if (check_failures == 0) printf("auth_test: ok\n");
  return check_failures != 0;
}
