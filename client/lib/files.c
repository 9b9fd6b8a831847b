/* File reading and mapping with statuses. */
#include "client/lib/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/lib/status.h"

static int errno_status(int err, const char *path, gemmd_status_t *status) {
  const int code = err == ENOENT   ? GEMMD_STATUS_NOT_FOUND
                   : err == EACCES ? GEMMD_STATUS_PERMISSION_DENIED
                   : err == ENOMEM ? GEMMD_STATUS_RESOURCE_EXHAUSTED
                                   : GEMMD_STATUS_UNKNOWN;
  return gemmd_status_set(status, code, "%s: %s", path, strerror(err));
}

/* Opens path and learns its size (regular files only). */
static int open_sized(const char *path, int *fd, uint64_t *size, gemmd_status_t *status) {
  struct stat sb;
  *fd = open(path, O_RDONLY | O_CLOEXEC);
  if (*fd < 0) return errno_status(errno, path, status);
  if (fstat(*fd, &sb) != 0) {
    const int err = errno;
    close(*fd);
    return errno_status(err, path, status);
  }
  if (!S_ISREG(sb.st_mode)) {
    close(*fd);
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT, "%s: not a regular file", path);
  }
  *size = (uint64_t)sb.st_size;
  return GEMMD_STATUS_OK;
}

int gemmd_file_read_text(const char *path, char **out, gemmd_status_t *status) {
  int fd;
  uint64_t size;
  int rc = open_sized(path, &fd, &size, status);
  if (rc != 0) return rc;
  char *buf = malloc((size_t)size + 1);
  size_t got = 0;
  while (buf != NULL && got < size) {
    const ssize_t n = read(fd, buf + got, (size_t)size - got);
    if (n <= 0) {
      rc = errno_status(n < 0 ? errno : EIO, path, status);
      break;
    }
    got += (size_t)n;
  }
  close(fd);
  if (buf == NULL) return errno_status(ENOMEM, path, status);
  if (rc != 0) {
    free(buf);
    return rc;
  }
  buf[got] = '\0';
  *out = buf;
  return GEMMD_STATUS_OK;
}

int gemmd_file_map(const char *path, uint64_t want, const char *what, gemmd_file_map_t *map,
                   gemmd_status_t *status) {
  int fd;
  uint64_t size;
  memset(map, 0, sizeof *map);
  int rc = open_sized(path, &fd, &size, status);
  if (rc != 0) return rc;
  if (size != want) {
    close(fd);
    return gemmd_status_set(status, GEMMD_STATUS_INVALID_ARGUMENT, "%s: %llu bytes; %s needs %llu",
                            path, (unsigned long long)size, what, (unsigned long long)want);
  }
  if (size > 0) {
    map->addr = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map->addr == MAP_FAILED) {
      map->addr = NULL;
      rc = errno_status(errno, path, status);
    }
  }
  close(fd);
  map->len = rc == 0 ? (size_t)size : 0;
  return rc;
}

void gemmd_file_unmap(gemmd_file_map_t *map) {
  if (map->addr != NULL) munmap(map->addr, map->len);
  memset(map, 0, sizeof *map);
}
