#include "daemon/weight_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "kernels/errors.h"

static const char kMagic[8] = {'G', 'E', 'M', 'M', 'D', 'W', '0', '1'};

typedef struct {
  uint64_t id;
  uint32_t n, k, dtype, layout, name_len, reserved;
  uint64_t n_scales, data_bytes;
} file_header_t;

uint32_t gemmd_crc32(uint32_t crc, const void *data, size_t n) {
  const uint8_t *p = data;
  while (n > 0) { /* zlib takes lengths as uInt */
    const size_t piece = n < (1u << 30) ? n : (1u << 30);
    crc = (uint32_t)crc32(crc, p, (uInt)piece);
    p += piece;
    n -= piece;
  }
  return crc;
}

int gemmd_weight_store_open(const char *dir, char *err, size_t errlen) {
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    snprintf(err, errlen, "cannot create weight directory %s: %s", dir, strerror(errno));
    return GEMMD_EIO;
  }
  if (access(dir, R_OK | W_OK | X_OK) != 0) {
    snprintf(err, errlen, "weight directory %s is not writable: %s", dir, strerror(errno));
    return GEMMD_EIO;
  }
  return GEMMD_OK;
}

int gemmd_weight_store_lock(const char *dir, char *err, size_t errlen) {
  char path[4200];
  snprintf(path, sizeof path, "%s/.lock", dir);
  const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = "";
    const ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
    holder[n > 0 ? n : 0] = '\0';
    holder[strcspn(holder, "\n")] = '\0';
    snprintf(err, errlen, "weight directory %s is in use by another gemmd%s%s%s: give each gemmd its own", dir,
             holder[0] ? " (pid " : "", holder, holder[0] ? ")" : "");
    close(fd);
    return -1;
  }
  char pid[32];
  const int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
    /* the pid is only for the message above; the lock holds either way */
  }
  return fd;
}

/* fsync of the directory: what was renamed or unlinked in it stays so after a crash. */
static void sync_dir(const char *dir) {
  const int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
}

/* Appends n bytes, adding them to *crc, in pieces of WRITE_PIECE, each handed to the disk
 * as soon as it is written (sync_file_range): writeback runs while the rest is written, and
 * the final fsync has little left to do (docs/bench/weights_io.md). */
enum { WRITE_PIECE = 16 << 20 };

static int write_all(int fd, const void *p, size_t n, uint32_t *crc) {
  const char *c = p;
  while (n > 0) {
    const size_t piece = n < WRITE_PIECE ? n : WRITE_PIECE;
    *crc = gemmd_crc32(*crc, c, piece);
    const off_t at = lseek(fd, 0, SEEK_CUR);
    for (size_t done = 0; done < piece;) {
      const ssize_t w = write(fd, c + done, piece - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        return -1;
      }
      done += (size_t)w;
    }
    if (piece == WRITE_PIECE && at >= 0) sync_file_range(fd, at, (off_t)piece, SYNC_FILE_RANGE_WRITE);
    c += piece;
    n -= piece;
  }
  return 0;
}

int gemmd_weight_store_save(const char *dir, const gemmd_weight_t *w, char *err, size_t errlen) {
  char tmp[4200], path[4200];
  snprintf(tmp, sizeof tmp, "%s/.%llu.tmp", dir, (unsigned long long)w->id);
  snprintf(path, sizeof path, "%s/%llu.gemmdw", dir, (unsigned long long)w->id);
  const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    return GEMMD_EIO;
  }
  file_header_t h = {0};
  h.id = w->id;
  h.n = w->n;
  h.k = w->k;
  h.dtype = (uint32_t)w->dtype;
  h.layout = (uint32_t)w->scale_layout;
  h.name_len = (uint32_t)strlen(w->name);
  h.n_scales = gemmd_scale_count(w->scale_layout, w->n, w->k);
  h.data_bytes = (uint64_t)w->n * w->k;
  /* The blocks first: writing into a file that grows as it goes cost 4-15x (1 s instead of
   * 0.07 s for 256 MiB on the build machine's ext4). Where the filesystem cannot, the
   * writes allocate as before. */
  (void)posix_fallocate(fd, 0, (off_t)(sizeof kMagic + sizeof h + h.name_len + 4 * h.n_scales + h.data_bytes + 4));
  uint32_t crc = 0;
  int rc = write_all(fd, kMagic, sizeof kMagic, &crc);
  rc = rc ? rc : write_all(fd, &h, sizeof h, &crc);
  rc = rc ? rc : write_all(fd, w->name, h.name_len, &crc);
  rc = rc ? rc : write_all(fd, w->scales, sizeof(float) * h.n_scales, &crc);
  rc = rc ? rc : write_all(fd, w->data, h.data_bytes, &crc);
  uint32_t ignored = 0;
  const uint32_t crc_le = crc;
  rc = rc ? rc : write_all(fd, &crc_le, sizeof crc_le, &ignored);
  rc = rc ? rc : fsync(fd);
  const int saved_errno = errno;
  close(fd);
  if (rc != 0 || rename(tmp, path) != 0) {
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(rc ? saved_errno : errno));
    unlink(tmp);
    return GEMMD_EIO;
  }
  sync_dir(dir); /* the rename itself, durable */
  return GEMMD_OK;
}

int gemmd_weight_store_delete(const char *dir, uint64_t id, char *err, size_t errlen) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%llu.gemmdw", dir, (unsigned long long)id);
  if (unlink(path) != 0 && errno != ENOENT) {
    snprintf(err, errlen, "cannot delete %s: %s", path, strerror(errno));
    return GEMMD_EIO;
  }
  sync_dir(dir); /* a restart must not bring it back */
  return GEMMD_OK;
}

/* A weight file's mapping, which a restored weight's bytes point into. */
typedef struct {
  void *addr;
  size_t len;
} file_map_t;

static void unmap_file(void *owner) {
  file_map_t *m = owner;
  munmap(m->addr, m->len);
  free(m);
}

int gemmd_weight_store_read(const char *path, gemmd_weight_t **out, char *err, size_t errlen) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open: %s", strerror(errno));
    return GEMMD_EIO;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < (off_t)(sizeof kMagic + sizeof(file_header_t) + 4)) {
    close(fd);
    snprintf(err, errlen, "truncated header");
    return GEMMD_EIO;
  }
  /* Mapped, not read: the checksum runs over the page cache and the weight keeps the
   * mapping, so restoring costs one pass over the bytes (MAP_POPULATE reads ahead). */
  const size_t len = (size_t)st.st_size;
  uint8_t *base = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    snprintf(err, errlen, "cannot map: %s", strerror(errno));
    return GEMMD_EIO;
  }
  file_header_t h;
  memcpy(&h, base + sizeof kMagic, sizeof h);
  const uint64_t body = sizeof kMagic + sizeof h;
  gemmd_weight_t *w = NULL;
  file_map_t *map = NULL;
  int rc = GEMMD_EIO;
  if (memcmp(base, kMagic, sizeof kMagic) != 0) {
    snprintf(err, errlen, "not a gemmd weight file (bad magic)");
    goto out;
  }
  if (!gemmd_dtype_is_fp8((gemmd_dtype_t)h.dtype) || !gemmd_scale_layout_is_valid((int)h.layout) ||
      h.n == 0 || h.k == 0 || h.n > (1u << 24) || h.k > (1u << 24) || /* no sum below can wrap */
      h.name_len == 0 || h.name_len > 255 ||
      h.n_scales != gemmd_scale_count((gemmd_scale_layout_t)h.layout, h.n, h.k) ||
      h.data_bytes != (uint64_t)h.n * h.k || h.id == 0 ||
      (uint64_t)len != body + h.name_len + 4 * h.n_scales + h.data_bytes + 4) {
    snprintf(err, errlen, "inconsistent header or file size");
    goto out;
  }
  uint32_t stored;
  memcpy(&stored, base + len - 4, 4);
  if (gemmd_crc32(0, base, len - 4) != stored) {
    snprintf(err, errlen, "checksum mismatch (file damaged)");
    goto out;
  }
  w = calloc(1, sizeof *w);
  map = malloc(sizeof *map);
  if (w == NULL || map == NULL) goto nomem;
  w->name = calloc(h.name_len + 1, 1);
  w->owned_scales = malloc(sizeof(float) * (h.n_scales + 1)); /* aligned: the file's are not */
  if (!w->name || !w->owned_scales) goto nomem;
  memcpy(w->name, base + body, h.name_len);
  memcpy(w->owned_scales, base + body + h.name_len, sizeof(float) * h.n_scales);
  *map = (file_map_t){base, len};
  w->owner = map;
  w->owner_free = unmap_file;
  map = NULL;
  base = NULL;
  w->id = h.id;
  w->n = h.n;
  w->k = h.k;
  w->dtype = (gemmd_dtype_t)h.dtype;
  w->scale_layout = (gemmd_scale_layout_t)h.layout;
  w->data = (const uint8_t *)((file_map_t *)w->owner)->addr + body + h.name_len + 4 * h.n_scales;
  w->scales = w->owned_scales;
  w->bytes = h.data_bytes + 4 * h.n_scales;
  w->refs = 1;
  *out = w;
  return GEMMD_OK;
nomem:
  snprintf(err, errlen, "out of memory");
  rc = GEMMD_ENOMEM;
out:
  free(map);
  gemmd_weight_free(w);
  if (base != NULL) munmap(base, len);
  return rc;
}

/* By the id in the file name ("<dir>/<id>.gemmdw"). */
static unsigned long long file_id(const char *path) {
  const char *slash = strrchr(path, '/');
  return strtoull(slash ? slash + 1 : path, NULL, 10);
}

static int by_id(const void *x, const void *y) {
  const unsigned long long a = file_id(*(char *const *)x), b = file_id(*(char *const *)y);
  return (a > b) - (a < b);
}

int gemmd_weight_store_list(const char *dir, char ***paths, size_t *count) {
  DIR *d = opendir(dir);
  if (d == NULL) return GEMMD_EIO;
  char **names = NULL;
  size_t n = 0, cap = 0;
  int rc = GEMMD_OK;
  struct dirent *e;
  while (rc == GEMMD_OK && (e = readdir(d)) != NULL) {
    const size_t len = strlen(e->d_name);
    if (len <= 7 || strcmp(e->d_name + len - 7, ".gemmdw") != 0) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      char **grown = realloc(names, cap * sizeof *names);
      if (grown == NULL) {
        rc = GEMMD_ENOMEM;
        break;
      }
      names = grown;
    }
    const size_t plen = strlen(dir) + 1 + len + 1;
    if ((names[n] = malloc(plen)) == NULL) {
      rc = GEMMD_ENOMEM;
      break;
    }
    snprintf(names[n++], plen, "%s/%s", dir, e->d_name);
  }
  closedir(d);
  if (rc != GEMMD_OK) {
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
  }
  if (n > 0) qsort(names, n, sizeof *names, by_id);
  *paths = names;
  *count = n;
  return GEMMD_OK;
}
