/* --weight-dir files: the checksum is CRC-32/IEEE (the standard check value, and it
 * continues across pieces); a saved weight reads back bit for bit; a file flipped in any
 * part, or cut short anywhere, is refused with a reason; files list in id order. */
#include "daemon/weight_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/test_check.h"
#include "kernels/errors.h"

static char dir[512];

static gemmd_weight_t *make(uint64_t id, uint32_t n, uint32_t k) {
  gemmd_weight_t *w = calloc(1, sizeof *w);
  w->id = id;
  w->name = strdup("layer.0.weight");
  w->n = n;
  w->k = k;
  w->dtype = GEMMD_DTYPE_FP8_E4M3;
  w->scale_layout = GEMMD_SCALE_ROW;
  w->owned_data = malloc((size_t)n * k);
  w->owned_scales = malloc(sizeof(float) * n);
  for (size_t i = 0; i < (size_t)n * k; i++) w->owned_data[i] = (uint8_t)(i * 31 + id);
  for (uint32_t i = 0; i < n; i++) w->owned_scales[i] = 0.5f + (float)i;
  w->data = w->owned_data;
  w->scales = w->owned_scales;
  w->bytes = (uint64_t)n * k + 4u * n;
  return w;
}

static long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

int main(void) {
  const char *tmp = getenv("TEST_TMPDIR");
  snprintf(dir, sizeof dir, "%s/weights", tmp ? tmp : "/tmp");
  char err[512];

  CHECK(gemmd_crc32(0, "123456789", 9) == 0xCBF43926u);
  CHECK(gemmd_crc32(gemmd_crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u);
  CHECK(gemmd_crc32(0, "", 0) == 0);

  CHECK(gemmd_weight_store_open(dir, err, sizeof err) == GEMMD_OK);
  gemmd_weight_t *a = make(7, 300, 257), *b = make(12, 16, 64);
  CHECK(gemmd_weight_store_save(dir, a, err, sizeof err) == GEMMD_OK);
  CHECK(gemmd_weight_store_save(dir, b, err, sizeof err) == GEMMD_OK);
  char **paths = NULL;
  size_t n = 0;
  CHECK(gemmd_weight_store_list(dir, &paths, &n) == GEMMD_OK && n == 2);
  CHECK(n == 2 && strstr(paths[0], "/7.gemmdw") && strstr(paths[1], "/12.gemmdw"));

  gemmd_weight_t *r = NULL;
  CHECK(gemmd_weight_store_read(paths[0], &r, err, sizeof err) == GEMMD_OK);
  CHECK(r != NULL && r->id == 7 && r->n == 300 && r->k == 257 && strcmp(r->name, a->name) == 0);
  CHECK(r != NULL && memcmp(r->data, a->data, 300 * 257) == 0 && memcmp(r->scales, a->scales, 4 * 300) == 0);
  gemmd_weight_free(r);

  /* Every byte flipped, in the header, name, scales, data or checksum: refused. */
  const long size = file_size(paths[1]);
  FILE *f = fopen(paths[1], "rb");
  unsigned char *orig = malloc((size_t)size);
  CHECK(f && fread(orig, 1, (size_t)size, f) == (size_t)size);
  fclose(f);
  int refused = 0;
  for (long at = 0; at < size; at++) {
    orig[at] ^= 0x10;
    f = fopen(paths[1], "wb");
    fwrite(orig, 1, (size_t)size, f);
    fclose(f);
    orig[at] ^= 0x10;
    r = NULL;
    if (gemmd_weight_store_read(paths[1], &r, err, sizeof err) != GEMMD_OK && err[0] != '\0') refused++;
    gemmd_weight_free(r);
  }
  CHECK(refused == size);
  /* Cut short anywhere: refused. */
  int cut_refused = 0;
  for (long len = 0; len < size; len += 7) {
    f = fopen(paths[1], "wb");
    fwrite(orig, 1, (size_t)len, f);
    fclose(f);
    r = NULL;
    if (gemmd_weight_store_read(paths[1], &r, err, sizeof err) != GEMMD_OK) cut_refused++;
    gemmd_weight_free(r);
  }
  CHECK(cut_refused == (int)((size + 6) / 7));
  free(orig);

  CHECK(gemmd_weight_store_delete(dir, 7, err, sizeof err) == GEMMD_OK);
  CHECK(file_size(paths[0]) == -1);
  for (size_t i = 0; i < n; i++) free(paths[i]);
  free(paths);
  gemmd_weight_free(a);
  gemmd_weight_free(b);
  if (check_failures == 0) printf("weight_store_test: ok\n");
  return check_failures != 0;
}
