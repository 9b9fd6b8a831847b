/* --preload entries to files: a file as it is, a directory's *.safetensors (sorted,
 * symlinks followed, other files ignored), an index's distinct shards beside it; refused:
 * an index without weight_map, one naming a path outside its directory, a directory with
 * no shard, a missing index. */
#include "daemon/preload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/test_check.h"
#include "kernels/errors.h"

static char root[512];

static void write_file(const char *name, const char *text) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", root, name);
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
}

/* The entry's files joined by '|', relative to root; or "ERR <code>". */
static void expand(const char *entry, char *out, size_t n) {
  char path[1024], err[512];
  snprintf(path, sizeof path, "%s/%s", root, entry);
  char **v;
  size_t count;
  const int rc = gemmd_preload_expand(path, &v, &count, err, sizeof err);
  if (rc != GEMMD_OK) {
    snprintf(out, n, "ERR %d", rc);
    CHECK(err[0] != '\0');
    return;
  }
  out[0] = '\0';
  for (size_t i = 0; i < count; i++) {
    const char *rel = strncmp(v[i], root, strlen(root)) == 0 ? v[i] + strlen(root) + 1 : v[i];
    if (i) strncat(out, "|", n - strlen(out) - 1);
    strncat(out, rel, n - strlen(out) - 1);
  }
  gemmd_preload_free(v, count);
}

static void expect(const char *entry, const char *want) {
  char got[2048];
  expand(entry, got, sizeof got);
  if (strcmp(got, want) != 0) fprintf(stderr, "%s: got '%s', want '%s'\n", entry, got, want);
  CHECK(strcmp(got, want) == 0);
}

int main(void) {
  const char *tmp = getenv("TEST_TMPDIR");
  snprintf(root, sizeof root, "%s/preload", tmp ? tmp : "/tmp");
  mkdir(root, 0755);
  char sub[600];
  snprintf(sub, sizeof sub, "%s/model", root);
  mkdir(sub, 0755);
  snprintf(sub, sizeof sub, "%s/empty", root);
  mkdir(sub, 0755);
  write_file("model/b-00002.safetensors", "x");
  write_file("model/a-00001.safetensors", "x");
  write_file("model/config.json", "{}");
  write_file("model/README.md", "x");
  char target[1024], link[1024];
  snprintf(target, sizeof target, "%s/model/a-00001.safetensors", root);
  snprintf(link, sizeof link, "%s/model/c-00003.safetensors", root);
  CHECK(symlink(target, link) == 0);
  write_file("model/model.safetensors.index.json",
             "{\"metadata\": {\"total_size\": 3}, \"weight_map\": {\"l0.w\": \"b-00002.safetensors\", "
             "\"l1.w\": \"a-00001.safetensors\", \"l2.w\": \"b-00002.safetensors\"}}");
  write_file("model/no-map.json", "{\"metadata\": {}}");
  write_file("model/escape.json", "{\"weight_map\": {\"w\": \"../secret.safetensors\"}}");
  write_file("model/bad.json", "{\"weight_map\": ");

  expect("model/a-00001.safetensors", "model/a-00001.safetensors");
  expect("model", "model/a-00001.safetensors|model/b-00002.safetensors|model/c-00003.safetensors");
  expect("model/model.safetensors.index.json", "model/a-00001.safetensors|model/b-00002.safetensors");
  char want[64];
  snprintf(want, sizeof want, "ERR %d", GEMMD_EINVAL);
  expect("model/no-map.json", want);
  expect("model/escape.json", want);
  expect("model/bad.json", want);
  expect("empty", want);
  snprintf(want, sizeof want, "ERR %d", GEMMD_EIO);
  expect("missing.index.json", want);
  if (check_failures == 0) printf("preload_test: ok\n");
  return check_failures != 0;
}
