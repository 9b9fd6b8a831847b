/* --preload entries to file lists. See preload.h. */
#include "daemon/preload.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon/json.h"
#include "kernels/errors.h"

enum { MAX_INDEX_BYTES = 64 << 20 };

typedef struct {
  char **v;
  size_t n, cap;
} list_t;

static int push(list_t *l, const char *dir, const char *name) {
  if (l->n == l->cap) {
    const size_t cap = l->cap ? 2 * l->cap : 16;
    char **grown = realloc(l->v, cap * sizeof *grown);
    if (grown == NULL) return -1;
    l->v = grown;
    l->cap = cap;
  }
  const size_t len = (dir ? strlen(dir) + 1 : 0) + strlen(name) + 1;
  char *p = malloc(len);
  if (p == NULL) return -1;
  snprintf(p, len, "%s%s%s", dir ? dir : "", dir ? "/" : "", name);
  l->v[l->n++] = p;
  return 0;
}

static int by_name(const void *x, const void *y) {
  return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Sorts and drops repeats. */
static void sort_unique(list_t *l) {
  if (l->n == 0) return;
  qsort(l->v, l->n, sizeof *l->v, by_name);
  size_t out = 1;
  for (size_t i = 1; i < l->n; i++) {
    if (strcmp(l->v[i], l->v[out - 1]) == 0) {
      free(l->v[i]);
    } else {
      l->v[out++] = l->v[i];
    }
  }
  l->n = out;
}

static int ends_with(const char *s, const char *suffix) {
  const size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int from_directory(const char *dir, list_t *l, char *err, size_t errlen) {
  DIR *d = opendir(dir);
  if (d == NULL) {
    snprintf(err, errlen, "cannot read directory %s", dir);
    return GEMMD_EIO;
  }
  int rc = GEMMD_OK;
  struct dirent *e;
  while (rc == GEMMD_OK && (e = readdir(d)) != NULL) {
    if (!ends_with(e->d_name, ".safetensors")) continue;
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (push(l, dir, e->d_name) != 0) rc = GEMMD_ENOMEM;
  }
  closedir(d);
  if (rc == GEMMD_OK && l->n == 0) {
    snprintf(err, errlen, "directory %s holds no *.safetensors file", dir);
    rc = GEMMD_EINVAL;
  }
  return rc;
}

static char *read_small_file(const char *path, size_t *len, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (f == NULL || fstat(fileno(f), &st) != 0) {
    if (f) fclose(f);
    snprintf(err, errlen, "cannot read %s", path);
    return NULL;
  }
  if (st.st_size > MAX_INDEX_BYTES) {
    fclose(f);
    snprintf(err, errlen, "%s is %lld bytes, larger than an index can be (%d)", path,
             (long long)st.st_size, MAX_INDEX_BYTES);
    return NULL;
  }
  char *text = malloc((size_t)st.st_size + 1);
  *len = text ? fread(text, 1, (size_t)st.st_size, f) : 0;
  fclose(f);
  if (text == NULL || *len != (size_t)st.st_size) {
    free(text);
    snprintf(err, errlen, "cannot read %s", path);
    return NULL;
  }
  text[*len] = '\0';
  return text;
}

static int from_index(const char *path, list_t *l, char *err, size_t errlen) {
  size_t len;
  char *text = read_small_file(path, &len, err, errlen);
  if (text == NULL) return GEMMD_EIO;
  char jerr[256];
  gemmd_json_value_t *doc = gemmd_json_parse(text, len, jerr, sizeof jerr);
  free(text);
  if (doc == NULL) {
    snprintf(err, errlen, "%s is not JSON: %s", path, jerr);
    return GEMMD_EINVAL;
  }
  const gemmd_json_value_t *map = gemmd_json_get(doc, "weight_map");
  int rc = GEMMD_OK;
  if (map == NULL || map->type != GEMMD_JSON_OBJECT || map->n == 0) {
    snprintf(err, errlen, "%s has no \"weight_map\" object of tensor names to files", path);
    rc = GEMMD_EINVAL;
  }
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash != NULL) {
    *slash = '\0';
  } else {
    snprintf(dir, sizeof dir, ".");
  }
  for (size_t i = 0; rc == GEMMD_OK && i < map->n; i++) {
    const gemmd_json_value_t *f = map->items[i];
    if (f->type != GEMMD_JSON_STRING || f->string[0] == '\0' || strchr(f->string, '/') != NULL ||
        strcmp(f->string, ".") == 0 || strcmp(f->string, "..") == 0) {
      snprintf(err, errlen, "%s: tensor '%.200s' maps to something that is not a file name beside the index",
               path, map->keys[i]);
      rc = GEMMD_EINVAL;
    } else if (push(l, dir, f->string) != 0) {
      rc = GEMMD_ENOMEM;
    }
  }
  gemmd_json_free(doc);
  return rc;
}

int gemmd_preload_expand(const char *entry, char ***paths, size_t *n, char *err, size_t errlen) {
  list_t l = {NULL, 0, 0};
  struct stat st;
  int rc;
  if (ends_with(entry, ".json")) {
    rc = from_index(entry, &l, err, errlen);
  } else if (stat(entry, &st) == 0 && S_ISDIR(st.st_mode)) {
    rc = from_directory(entry, &l, err, errlen);
  } else {
    rc = push(&l, NULL, entry) == 0 ? GEMMD_OK : GEMMD_ENOMEM;
  }
  if (rc == GEMMD_ENOMEM) snprintf(err, errlen, "out of memory listing %s", entry);
  if (rc != GEMMD_OK) {
    gemmd_preload_free(l.v, l.n);
    return rc;
  }
  sort_unique(&l);
  *paths = l.v;
  *n = l.n;
  return GEMMD_OK;
}

void gemmd_preload_free(char **paths, size_t n) {
  for (size_t i = 0; i < n; i++) free(paths[i]);
  free(paths);
}
