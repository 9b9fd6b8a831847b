#include "daemon/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/json.h"
#include "kernels/errors.h"

/* The file mapping (or the caller's bytes), shared by the weights that point into it. */
typedef struct {
  const void *addr;
  size_t len;
  int mapped; /* munmap'ed with the last reference; else the caller's */
  atomic_int refs;
} mapping_t;

static void mapping_unref(void *p) {
  mapping_t *m = p;
  if (atomic_fetch_sub(&m->refs, 1) == 1) {
    if (m->mapped) munmap((void *)m->addr, m->len);
    free(m);
  }
}

typedef struct {
  const char *name;
  const char *dtype;
  int64_t shape[4];
  int rank;
  uint64_t begin, end;
} tensor_t;

/* Reads one tensor entry; returns 0 when it is well formed and inside the data. */
static int read_tensor(const char *name, const gemmd_json_value_t *v, uint64_t data_len, tensor_t *t) {
  const gemmd_json_value_t *dt = gemmd_json_get(v, "dtype");
  const gemmd_json_value_t *shape = gemmd_json_get(v, "shape");
  const gemmd_json_value_t *offs = gemmd_json_get(v, "data_offsets");
  if (dt == NULL || dt->type != GEMMD_JSON_STRING || shape == NULL ||
      shape->type != GEMMD_JSON_ARRAY || shape->n > 4 || offs == NULL ||
      offs->type != GEMMD_JSON_ARRAY || offs->n != 2) {
    return -1;
  }
  t->name = name;
  t->dtype = dt->string;
  t->rank = (int)shape->n;
  for (size_t i = 0; i < shape->n; i++) {
    if (shape->items[i]->type != GEMMD_JSON_NUMBER || !shape->items[i]->is_integer ||
        shape->items[i]->integer < 0) {
      return -1;
    }
    t->shape[i] = shape->items[i]->integer;
  }
  for (int i = 0; i < 2; i++) {
    if (offs->items[i]->type != GEMMD_JSON_NUMBER || !offs->items[i]->is_integer ||
        offs->items[i]->integer < 0) {
      return -1;
    }
  }
  t->begin = (uint64_t)offs->items[0]->integer;
  t->end = (uint64_t)offs->items[1]->integer;
  return t->begin <= t->end && t->end <= data_len ? 0 : -1;
}

/* Elements of t; UINT64_MAX when the product does not fit (no file holds that many). */
static uint64_t elements(const tensor_t *t) {
  uint64_t n = 1;
  for (int i = 0; i < t->rank; i++) {
    const uint64_t d = (uint64_t)t->shape[i];
    if (d != 0 && n > UINT64_MAX / d) return UINT64_MAX;
    n *= d;
  }
  return n;
}

static const tensor_t *find(const tensor_t *ts, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++) {
    if (strcmp(ts[i].name, name) == 0) return &ts[i];
  }
  return NULL;
}

/* The companion scale tensor of weight w, and the layout its shape says; NULL for none.
 * Returns -1 when a companion exists but fits no layout. */
static int find_scales(const tensor_t *ts, size_t n, const tensor_t *w, const tensor_t **out,
                       gemmd_scale_layout_t *layout) {
  static const char *const suffixes[] = {"_scale_inv", "_scale"};
  *out = NULL;
  *layout = GEMMD_SCALE_NONE;
  for (size_t i = 0; i < 2; i++) {
    char name[1024];
    snprintf(name, sizeof name, "%s%s", w->name, suffixes[i]);
    const tensor_t *s = find(ts, n, name);
    if (s == NULL) continue;
    const uint64_t rows = (uint64_t)w->shape[0], cols = (uint64_t)w->shape[1];
    const uint64_t count = elements(s);
    const uint64_t bytes = s->end - s->begin;
    if (strcmp(s->dtype, "F32") != 0 || bytes % 4 != 0 || bytes / 4 != count) return -1;
    if (s->rank <= 1 && count == 1 && rows != 1) {
      *layout = GEMMD_SCALE_TENSOR;
    } else if ((s->rank == 1 || (s->rank == 2 && s->shape[1] == 1)) && count == rows) {
      *layout = GEMMD_SCALE_ROW;
    } else if (s->rank == 2 && (uint64_t)s->shape[0] == (rows + 127) / 128 &&
               (uint64_t)s->shape[1] == (cols + 127) / 128) {
      *layout = GEMMD_SCALE_BLOCK_128X128;
    } else if (count == 1) {
      *layout = GEMMD_SCALE_TENSOR;
    } else {
      return -1;
    }
    *out = s;
    return 0;
  }
  return 0;
}

static int is_scale_name(const char *name) {
  const size_t n = strlen(name);
  return (n > 10 && strcmp(name + n - 10, "_scale_inv") == 0) ||
         (n > 6 && strcmp(name + n - 6, "_scale") == 0);
}

/* The weights of the file at map (our reference, dropped here); `path` names it. */
static int parse(mapping_t *map, const char *path, void (*fn)(void *ctx, gemmd_weight_t *w), void *ctx,
                 int *skipped, char *err, size_t errlen) {
  const void *addr = map->addr;
  const uint64_t size = map->len;
  uint64_t header_len;
  memcpy(&header_len, addr, 8);
  int rc = GEMMD_EINVAL;
  gemmd_json_value_t *root = NULL;
  tensor_t *ts = NULL;
  if (header_len > size - 8 || header_len > (100u << 20)) {
    snprintf(err, errlen, "%s: header length %llu does not fit the file", path,
             (unsigned long long)header_len);
    goto out;
  }
  char jerr[128];
  root = gemmd_json_parse((const char *)addr + 8, header_len, jerr, sizeof jerr);
  if (root == NULL || root->type != GEMMD_JSON_OBJECT) {
    snprintf(err, errlen, "%s: bad JSON header: %s", path, root ? "not an object" : jerr);
    goto out;
  }
  const uint8_t *data = (const uint8_t *)addr + 8 + header_len;
  const uint64_t data_len = size - 8 - header_len;
  ts = calloc(root->n + 1, sizeof *ts);
  if (ts == NULL) {
    snprintf(err, errlen, "out of memory");
    rc = GEMMD_ENOMEM;
    goto out;
  }
  size_t nt = 0;
  for (size_t i = 0; i < root->n; i++) {
    if (strcmp(root->keys[i], "__metadata__") == 0) continue;
    if (read_tensor(root->keys[i], root->items[i], data_len, &ts[nt]) != 0) {
      snprintf(err, errlen, "%s: tensor '%s' is malformed or outside the file", path, root->keys[i]);
      goto out;
    }
    nt++;
  }
  int loaded = 0;
  for (size_t i = 0; i < nt; i++) {
    const tensor_t *t = &ts[i];
    const int e4m3 = strcmp(t->dtype, "F8_E4M3") == 0, e5m2 = strcmp(t->dtype, "F8_E5M2") == 0;
    if (!(e4m3 || e5m2) || t->rank != 2 || t->shape[0] < 1 || t->shape[1] < 1 ||
        t->shape[0] > UINT32_MAX || t->shape[1] > UINT32_MAX || t->end - t->begin != elements(t)) {
      if (!is_scale_name(t->name)) (*skipped)++;
      continue;
    }
    const tensor_t *s;
    gemmd_scale_layout_t layout;
    if (find_scales(ts, nt, t, &s, &layout) != 0) {
      snprintf(err, errlen, "%s: the scales of '%s' fit no scale layout", path, t->name);
      goto out;
    }
    gemmd_weight_t *w = calloc(1, sizeof *w);
    if (w == NULL || (w->name = strdup(t->name)) == NULL) {
      free(w);
      snprintf(err, errlen, "out of memory");
      rc = GEMMD_ENOMEM;
      goto out;
    }
    w->n = (uint32_t)t->shape[0];
    w->k = (uint32_t)t->shape[1];
    w->dtype = e4m3 ? GEMMD_DTYPE_FP8_E4M3 : GEMMD_DTYPE_FP8_E5M2;
    w->scale_layout = layout;
    w->data = data + t->begin;
    const uint8_t *sp = s ? data + s->begin : NULL;
    if (sp != NULL && (uintptr_t)sp % _Alignof(float) != 0) {
      /* Tensors are packed back to back: scales after an FP8 tensor of odd size are not
       * aligned for floats in the file, so the weight gets an aligned copy of its own. */
      w->owned_scales = malloc(s->end - s->begin);
      if (w->owned_scales == NULL) {
        gemmd_weight_free(w);
        snprintf(err, errlen, "out of memory");
        rc = GEMMD_ENOMEM;
        goto out;
      }
      memcpy(w->owned_scales, sp, s->end - s->begin);
      w->scales = w->owned_scales;
    } else {
      w->scales = (const float *)(const void *)sp;
    }
    w->bytes = (uint64_t)w->n * w->k + (s ? s->end - s->begin : 0);
    w->refs = 1;
    atomic_fetch_add(&map->refs, 1);
    w->owner = map;
    w->owner_free = mapping_unref;
    fn(ctx, w);
    loaded++;
  }
  rc = loaded;
out:
  free(ts);
  gemmd_json_free(root);
  mapping_unref(map);
  return rc;
}

int gemmd_safetensors_load(const char *path, void (*fn)(void *ctx, gemmd_weight_t *w), void *ctx,
                           int *skipped, char *err, size_t errlen) {
  *skipped = 0;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
    return GEMMD_EIO;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < 8) {
    close(fd);
    snprintf(err, errlen, "%s is not a safetensors file (too short)", path);
    return GEMMD_EINVAL;
  }
  mapping_t *map = calloc(1, sizeof *map);
  void *addr = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == NULL || addr == MAP_FAILED) {
    free(map);
    if (addr != MAP_FAILED) munmap(addr, (size_t)st.st_size);
    snprintf(err, errlen, "cannot map %s: %s", path, strerror(errno));
    return GEMMD_EIO;
  }
  map->addr = addr;
  map->len = (size_t)st.st_size;
  map->mapped = 1;
  atomic_init(&map->refs, 1); /* ours, dropped at the end */
  return parse(map, path, fn, ctx, skipped, err, errlen);
}

int gemmd_safetensors_parse(const void *bytes, size_t len, const char *what,
                            void (*fn)(void *ctx, gemmd_weight_t *w), void *ctx, int *skipped,
                            char *err, size_t errlen) {
  *skipped = 0;
  if (len < 8) {
    snprintf(err, errlen, "%s is not a safetensors file (too short)", what);
    return GEMMD_EINVAL;
  }
  mapping_t *map = calloc(1, sizeof *map);
  if (map == NULL) {
    snprintf(err, errlen, "out of memory");
    return GEMMD_ENOMEM;
  }
  map->addr = bytes;
  map->len = len;
  atomic_init(&map->refs, 1); /* ours, dropped at the end */
  return parse(map, what, fn, ctx, skipped, err, errlen);
}
