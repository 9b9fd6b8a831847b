#include "daemon/kernel_choice.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_SAMPLES = 16 };

typedef struct {
  uint64_t sig; /* 0: empty */
  int decided;
  gemmd_kernel_t choice;
  unsigned picked[2];  /* measured runs handed out, per kernel */
  unsigned samples[2]; /* and recorded */
  uint64_t ns[2][MAX_SAMPLES];
  uint64_t median[2];
} entry_t;

struct gemmd_kernel_choices_s {
  pthread_mutex_t mu;
  unsigned samples;
  unsigned capacity, used; /* capacity: a power of two, kept at most half full */
  entry_t *entries;
  int dirty;
};

static uint64_t mix(uint64_t x) { /* splitmix64's finalizer */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t gemmd_kernel_signature(const gemmd_group_params_t *table, uint32_t n_groups) {
  uint64_t sum = 0;
  for (uint32_t g = 0; g < n_groups; g++) {
    const gemmd_group_params_t *p = &table[g];
    uint32_t m = 8;
    while (m < p->m && m < (1u << 30)) m <<= 1;
    const uint64_t shape = mix(((uint64_t)m << 32) ^ p->n) ^ mix(((uint64_t)p->k << 32) | 0x5bd1e995u);
    const uint64_t kind = (uint64_t)p->a_dtype | (uint64_t)p->b_dtype << 8 | (uint64_t)p->b_layout << 16 |
                          (uint64_t)p->out_dtype << 24;
    sum += mix(shape ^ mix(kind)); /* a sum: the same for any order of the groups */
  }
  const uint64_t s = mix(sum ^ mix(n_groups));
  return s != 0 ? s : 1;
}

gemmd_kernel_choices_t *gemmd_kernel_choices_create(unsigned samples, unsigned capacity) {
  gemmd_kernel_choices_t *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  unsigned cap = 16;
  while (cap < 2 * capacity && cap < (1u << 20)) cap <<= 1;
  c->entries = calloc(cap, sizeof *c->entries);
  if (c->entries == NULL) {
    free(c);
    return NULL;
  }
  c->capacity = cap;
  c->samples = samples < 1 ? 1 : samples > MAX_SAMPLES ? MAX_SAMPLES : samples;
  pthread_mutex_init(&c->mu, NULL);
  return c;
}

void gemmd_kernel_choices_free(gemmd_kernel_choices_t *c) {
  if (c == NULL) return;
  pthread_mutex_destroy(&c->mu);
  free(c->entries);
  free(c);
}

/* The entry for sig, added if `add` and there is room; NULL otherwise. With mu held. */
static entry_t *find(gemmd_kernel_choices_t *c, uint64_t sig, int add) {
  for (unsigned i = (unsigned)sig & (c->capacity - 1);; i = (i + 1) & (c->capacity - 1)) {
    entry_t *e = &c->entries[i];
    if (e->sig == sig) return e;
    if (e->sig == 0) {
      if (!add || 2 * (c->used + 1) > c->capacity) return NULL;
      memset(e, 0, sizeof *e);
      e->sig = sig;
      c->used++;
      return e;
    }
  }
}

static uint64_t median(uint64_t *v, unsigned n) {
  for (unsigned i = 1; i < n; i++) { /* insertion sort: n ≤ 16 */
    const uint64_t x = v[i];
    unsigned j = i;
    for (; j > 0 && v[j - 1] > x; j--) v[j] = v[j - 1];
    v[j] = x;
  }
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

gemmd_kernel_t gemmd_kernel_choices_pick(gemmd_kernel_choices_t *c, uint64_t sig, int *measuring) {
  *measuring = 0;
  pthread_mutex_lock(&c->mu);
  entry_t *e = find(c, sig, 1);
  gemmd_kernel_t k = GEMMD_KERNEL_OWN;
  if (e != NULL && e->decided) {
    k = e->choice;
  } else if (e != NULL) {
    /* the kernel with fewer measured runs handed out, gemmd's own first */
    k = e->picked[GEMMD_KERNEL_CUBLASLT] < e->picked[GEMMD_KERNEL_OWN] ? GEMMD_KERNEL_CUBLASLT : GEMMD_KERNEL_OWN;
    if (e->picked[k] < c->samples) {
      e->picked[k]++;
      *measuring = 1;
    } else {
      k = GEMMD_KERNEL_OWN; /* every measured run is out: wait for their times */
    }
  }
  pthread_mutex_unlock(&c->mu);
  return k;
}

void gemmd_kernel_choices_record(gemmd_kernel_choices_t *c, uint64_t sig, gemmd_kernel_t k, uint64_t gemm_ns) {
  pthread_mutex_lock(&c->mu);
  entry_t *e = find(c, sig, 0);
  if (e != NULL && !e->decided && e->samples[k] < MAX_SAMPLES) {
    e->ns[k][e->samples[k]++] = gemm_ns;
    if (e->samples[GEMMD_KERNEL_OWN] >= c->samples && e->samples[GEMMD_KERNEL_CUBLASLT] >= c->samples) {
      e->median[GEMMD_KERNEL_OWN] = median(e->ns[GEMMD_KERNEL_OWN], e->samples[GEMMD_KERNEL_OWN]);
      e->median[GEMMD_KERNEL_CUBLASLT] = median(e->ns[GEMMD_KERNEL_CUBLASLT], e->samples[GEMMD_KERNEL_CUBLASLT]);
      /* ties go to gemmd's own kernel */
      e->choice = e->median[GEMMD_KERNEL_CUBLASLT] < e->median[GEMMD_KERNEL_OWN] ? GEMMD_KERNEL_CUBLASLT
                                                                                 : GEMMD_KERNEL_OWN;
      e->decided = 1;
      c->dirty = 1;
    }
  }
  pthread_mutex_unlock(&c->mu);
}

void gemmd_kernel_choices_decide(gemmd_kernel_choices_t *c, uint64_t sig, gemmd_kernel_t k) {
  pthread_mutex_lock(&c->mu);
  entry_t *e = find(c, sig, 1);
  if (e != NULL && !e->decided) {
    e->decided = 1;
    e->choice = k;
    c->dirty = 1;
  }
  pthread_mutex_unlock(&c->mu);
}

gemmd_kernel_choice_counts_t gemmd_kernel_choices_counts(gemmd_kernel_choices_t *c) {
  gemmd_kernel_choice_counts_t n = {0, 0, 0};
  pthread_mutex_lock(&c->mu);
  for (unsigned i = 0; i < c->capacity; i++) {
    const entry_t *e = &c->entries[i];
    if (e->sig == 0) continue;
    if (!e->decided) {
      n.measuring++;
    } else if (e->choice == GEMMD_KERNEL_CUBLASLT) {
      n.decided_cublaslt++;
    } else {
      n.decided_own++;
    }
  }
  pthread_mutex_unlock(&c->mu);
  return n;
}

static const char HEADER[] = "# gemmd kernel choices v1\n";

int gemmd_kernel_choices_save(gemmd_kernel_choices_t *c, const char *path) {
  pthread_mutex_lock(&c->mu);
  if (!c->dirty) {
    pthread_mutex_unlock(&c->mu);
    return 0;
  }
  size_t cap = sizeof HEADER + (size_t)c->used * 80, len = 0;
  char *buf = malloc(cap);
  if (buf == NULL) {
    pthread_mutex_unlock(&c->mu);
    return -ENOMEM;
  }
  len += (size_t)snprintf(buf, cap, "%s", HEADER);
  for (unsigned i = 0; i < c->capacity; i++) {
    const entry_t *e = &c->entries[i];
    if (e->sig == 0 || !e->decided) continue;
    len += (size_t)snprintf(buf + len, cap - len, "%016" PRIx64 " %s %" PRIu64 " %" PRIu64 "\n", e->sig,
                            e->choice == GEMMD_KERNEL_CUBLASLT ? "cublaslt" : "own", e->median[GEMMD_KERNEL_OWN],
                            e->median[GEMMD_KERNEL_CUBLASLT]);
  }
  c->dirty = 0;
  pthread_mutex_unlock(&c->mu);

  char tmp[4096];
  int rc = 1;
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
    rc = -ENAMETOOLONG;
  } else {
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      rc = -errno;
    } else {
      size_t done = 0;
      while (done < len && rc > 0) {
        const ssize_t w = write(fd, buf + done, len - done);
        if (w < 0 && errno != EINTR) rc = -errno;
        if (w > 0) done += (size_t)w;
      }
      if (rc > 0 && fsync(fd) != 0) rc = -errno;
      close(fd);
      if (rc > 0 && rename(tmp, path) != 0) rc = -errno;
      if (rc <= 0) unlink(tmp);
    }
  }
  free(buf);
  if (rc <= 0) { /* try again at the next save */
    pthread_mutex_lock(&c->mu);
    c->dirty = 1;
    pthread_mutex_unlock(&c->mu);
  }
  return rc;
}

int gemmd_kernel_choices_load(gemmd_kernel_choices_t *c, const char *path) {
  FILE *f = fopen(path, "re");
  if (f == NULL) return -errno;
  char line[256];
  int loaded = 0;
  if (fgets(line, sizeof line, f) == NULL || strcmp(line, HEADER) != 0) {
    fclose(f);
    return 0; /* not a file of ours, or another version: measure again */
  }
  pthread_mutex_lock(&c->mu);
  while (fgets(line, sizeof line, f) != NULL) {
    uint64_t sig, own, lt;
    char kind[16];
    if (sscanf(line, "%" SCNx64 " %15s %" SCNu64 " %" SCNu64, &sig, kind, &own, &lt) != 4 || sig == 0) continue;
    const int is_lt = strcmp(kind, "cublaslt") == 0;
    if (!is_lt && strcmp(kind, "own") != 0) continue;
    entry_t *e = find(c, sig, 1);
    if (e == NULL) break;
    e->decided = 1;
    e->choice = is_lt ? GEMMD_KERNEL_CUBLASLT : GEMMD_KERNEL_OWN;
    e->median[GEMMD_KERNEL_OWN] = own;
    e->median[GEMMD_KERNEL_CUBLASLT] = lt;
    loaded++;
  }
  pthread_mutex_unlock(&c->mu);
  fclose(f);
  return loaded;
}
