/* The short run of a fuzz target, for `bazel test` (gcc, and --config=asan): every file
 * named or found in the directories named (the corpus, the regressions), then a fixed
 * number of deterministic mutations of them (bit flips, truncations, insertions,
 * deletions, interesting values, copies, splices), each through LLVMFuzzerTestOneInput
 * in a buffer of its exact size, so that ASan sees any read past its end.
 *
 *   replay [--mutations=N] [--seed=S] PATH...
 *
 * A directory that does not exist is skipped (a target may have no regressions yet).
 * FUZZ_REPLAY_MUTATIONS in the environment overrides --mutations. A crash is the test's
 * failure. To get the mutated input that crashed, run again with FUZZ_REPLAY_KEEP=1: each
 * is written before it runs to replay-last-input in $TEST_UNDECLARED_OUTPUTS_DIR (or the
 * working directory), which any build of the target then takes as its argument. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fuzz/fuzz_target.h"

enum { REPLAY_MAX_INPUT = 1 << 16 };

typedef struct {
  uint8_t *data;
  size_t len;
} input_t;

typedef struct {
  input_t *v;
  size_t n, cap;
} inputs_t;

static void die(const char *what, const char *path) {
  fprintf(stderr, "replay: %s %s: %s\n", what, path, strerror(errno));
  exit(2);
}

static void add_file(inputs_t *in, const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) die("cannot open", path);
  uint8_t *buf = malloc(REPLAY_MAX_INPUT);
  if (buf == NULL) die("out of memory for", path);
  const size_t len = fread(buf, 1, REPLAY_MAX_INPUT, f);
  fclose(f);
  if (in->n == in->cap) {
    in->cap = in->cap ? in->cap * 2 : 64;
    in->v = realloc(in->v, in->cap * sizeof *in->v);
    if (in->v == NULL) die("out of memory for", path);
  }
  in->v[in->n++] = (input_t){buf, len};
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file in dir, in name order (one level; dot files left out). */
static void add_dir(inputs_t *in, const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) die("cannot read", dir);
  char **names = NULL;
  size_t n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      names = realloc(names, cap * sizeof *names);
      if (names == NULL) die("out of memory reading", dir);
    }
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  if (n > 0) qsort(names, n, sizeof *names, by_name);
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) add_file(in, path);
    free(names[i]);
  }
  free(names);
}

/* One input, in a buffer of exactly its size. */
static void run_one(const uint8_t *data, size_t len) {
  uint8_t *copy = malloc(len ? len : 1);
  if (copy == NULL) die("out of memory", "");
  if (len) memcpy(copy, data, len);
  LLVMFuzzerTestOneInput(copy, len);
  free(copy);
}

/* xorshift64*: the same mutations on every run. */
static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}
static size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

static const uint32_t interesting[] = {0,    1,     2,      4,      7,          8,          16,
                                       127,  128,   255,    256,    4096,       65535,      65536,
                                       0x7f, 0x80,  0xff,   0x7fff, 0x8000,     0xffff,     0x7fffffff,
                                       0x80000000u, 0xffffffffu};

/* Applies one mutation to buf (len bytes, room for REPLAY_MAX_INPUT). Returns the new length. */
static size_t mutate(uint8_t *buf, size_t len, const inputs_t *in) {
  switch (below(8)) {
    case 0: /* flip a bit */
      if (len) buf[below(len)] ^= (uint8_t)(1u << below(8));
      return len;
    case 1: /* truncate */
      return below(len + 1);
    case 2: { /* insert 1..8 random bytes */
      const size_t k = 1 + below(8), at = below(len + 1);
      if (len + k > REPLAY_MAX_INPUT) return len;
      memmove(buf + at + k, buf + at, len - at);
      for (size_t i = 0; i < k; i++) buf[at + i] = (uint8_t)rnd();
      return len + k;
    }
    case 3: { /* delete a range */
      if (len == 0) return len;
      const size_t at = below(len), k = 1 + below(len - at < 16 ? len - at : 16);
      memmove(buf + at, buf + at + k, len - at - k);
      return len - k;
    }
    case 4: /* a byte set to an interesting value */
      if (len) buf[below(len)] = (uint8_t)interesting[below(sizeof interesting / sizeof *interesting)];
      return len;
    case 5: { /* 4 bytes set to an interesting little-endian value */
      if (len < 4) return len;
      const uint32_t v = interesting[below(sizeof interesting / sizeof *interesting)];
      memcpy(buf + below(len - 3), &v, 4);
      return len;
    }
    case 6: { /* a range copied over another place */
      if (len < 2) return len;
      const size_t from = below(len), to = below(len);
      size_t k = 1 + below(32);
      if (k > len - from) k = len - from;
      if (k > len - to) k = len - to;
      memmove(buf + to, buf + from, k);
      return len;
    }
    default: { /* splice: this input's head, another's tail */
      const input_t *o = &in->v[below(in->n)];
      const size_t at = below(len + 1), from = below(o->len + 1);
      size_t k = o->len - from;
      if (at + k > REPLAY_MAX_INPUT) k = REPLAY_MAX_INPUT - at;
      memcpy(buf + at, o->data + from, k);
      return at + k;
    }
  }
}

/* Keeps the input about to run where a crash leaves it (FUZZ_REPLAY_KEEP). */
static void save_current(const uint8_t *buf, size_t len) {
  const char *dir = getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/replay-last-input", dir ? dir : ".");
  FILE *f = fopen(path, "wb");
  if (f == NULL) return;
  fwrite(buf, 1, len, f);
  fclose(f);
}

int main(int argc, char **argv) {
  long mutations = 5000;
  uint64_t seed = 1;
  inputs_t in = {0};
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--mutations=", 12) == 0) {
      mutations = strtol(argv[i] + 12, NULL, 10);
    } else if (strncmp(argv[i], "--seed=", 7) == 0) {
      seed = strtoull(argv[i] + 7, NULL, 10);
    } else {
      struct stat st;
      if (stat(argv[i], &st) != 0) {
        if (errno == ENOENT) continue; /* no regressions yet */
        die("cannot stat", argv[i]);
      }
      if (S_ISDIR(st.st_mode)) {
        add_dir(&in, argv[i]);
      } else {
        add_file(&in, argv[i]);
      }
    }
  }
  const char *env = getenv("FUZZ_REPLAY_MUTATIONS");
  if (env != NULL) mutations = strtol(env, NULL, 10);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (size_t i = 0; i < in.n; i++) run_one(in.v[i].data, in.v[i].len);
  if (in.n == 0) mutations = 0;
  const int keep = getenv("FUZZ_REPLAY_KEEP") != NULL;
  uint8_t *buf = malloc(REPLAY_MAX_INPUT);
  if (buf == NULL) die("out of memory", "");
  rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (long m = 0; m < mutations; m++) {
    const input_t *s = &in.v[below(in.n)];
    size_t len = s->len;
    memcpy(buf, s->data, len);
    for (size_t k = 1 + below(4); k > 0; k--) len = mutate(buf, len, &in);
    if (keep) save_current(buf, len);
    run_one(buf, len);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("replay: %zu inputs and %ld mutations in %.2f s\n", in.n, mutations,
         (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  free(buf);
  for (size_t i = 0; i < in.n; i++) free(in.v[i].data);
  free(in.v);
  return 0;
}
