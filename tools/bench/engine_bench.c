/* The engine's own path, timed per batch (issue 36): decode batches of G groups, each
 * group M rows of E4M3 A (1×128 scales) against its own registered N×K E4M3 weight (128×128
 * scales), built with the daemon's request builder and batcher and run one batch at a time
 * through the engine the daemon uses: on CUDA its graph (quantizer, GEMM) between the
 * batch's copies. Per G: the GEMM kernels' time per batch (the graph's own events) and the
 * weight bytes it read per second, and the batch's whole device time.
 *
 *   engine_bench [--backend cuda|cpu] [--groups 1,8,32,64] [--m 8] [--n 4096] [--k 4096]
 *                [--reps 50] [--kernel wgmma|cublaslt] [--graphs on|off]
 *                [--copy-kernel-bytes 1048576]
 *
 * No serving around it: one batch in flight, so its kernels have the GPU alone. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/batcher.h"
#include "daemon/engine.h"
#include "daemon/request_build.h"
#include "daemon/status.h"
#include "daemon/weights.h"
#include "kernels/errors.h"

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  gemmd_batch_t *done;
} waiter_t;

static void on_done(void *ctx, gemmd_batch_t *b) {
  waiter_t *w = ctx;
  pthread_mutex_lock(&w->mu);
  w->done = b;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 11);
}

/* E4M3 codes of moderate magnitude (|x| in [2^-3, 2^3]), either sign. */
static void fill_fp8(uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((rnd() & 0x80) | (0x20 + rnd() % 0x30));
}

static void fill_scales(float *s, size_t n) {
  for (size_t i = 0; i < n; i++) s[i] = 0.5f + (float)(rnd() % 1000) / 1000.0f;
}

typedef struct {
  const uint8_t *data;
  const float *scales;
} located_t;

static int locate(const void *ctx, const gemmd_matrix_in_t *m, gemmd_operand_t *op, char *msg, size_t n) {
  const located_t *l = ctx;
  *op = (gemmd_operand_t){m->rows, m->cols, m->cols, (gemmd_dtype_t)m->dtype, l->data,
                          (gemmd_scale_layout_t)m->layout, l->scales};
  return GEMMD_CODE_OK;
}

static int cmp_u64(const void *a, const void *b) {
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int usage(void) {
  fprintf(stderr, "usage: engine_bench [--backend cuda|cpu] [--groups 1,8,32,64] [--m 8] [--n 4096] "
                  "[--k 4096] [--reps 50] [--kernel wgmma|cublaslt] [--graphs on|off] "
                  "[--copy-kernel-bytes 1048576]\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *backend = "cuda", *groups_arg = "1,8,32,64", *kernel = "wgmma", *graphs = "on";
  uint32_t m = 8, n = 4096, k = 4096, reps = 50;
  int64_t copy_kernel_bytes = 1 << 20; /* gemmd's default (--engine-copy-kernel-bytes) */
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (v == NULL) return usage();
    if (strcmp(argv[i], "--backend") == 0) backend = v;
    else if (strcmp(argv[i], "--groups") == 0) groups_arg = v;
    else if (strcmp(argv[i], "--kernel") == 0) kernel = v;
    else if (strcmp(argv[i], "--graphs") == 0) graphs = v;
    else if (strcmp(argv[i], "--m") == 0) m = (uint32_t)strtoul(v, NULL, 10);
    else if (strcmp(argv[i], "--n") == 0) n = (uint32_t)strtoul(v, NULL, 10);
    else if (strcmp(argv[i], "--k") == 0) k = (uint32_t)strtoul(v, NULL, 10);
    else if (strcmp(argv[i], "--reps") == 0) reps = (uint32_t)strtoul(v, NULL, 10);
    else if (strcmp(argv[i], "--copy-kernel-bytes") == 0) copy_kernel_bytes = strtoll(v, NULL, 10);
    else return usage();
    i++;
  }
  uint32_t groups[16], n_groups = 0, max_g = 0;
  for (const char *p = groups_arg; *p && n_groups < 16;) {
    groups[n_groups] = (uint32_t)strtoul(p, (char **)&p, 10);
    if (groups[n_groups] == 0 || groups[n_groups] > 4096) return usage();
    if (groups[n_groups] > max_g) max_g = groups[n_groups];
    n_groups++;
    if (*p == ',') p++;
  }
  if (m == 0 || n == 0 || k == 0 || reps == 0 || n_groups == 0) return usage();

  waiter_t waiter = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL};
  gemmd_engine_t *eng = NULL;
  char why[512] = "this build has no CUDA engine";
  int rc = GEMMD_ENOTSUP;
  if (strcmp(backend, "cpu") == 0) {
    rc = gemmd_engine_cpu_create(0, 0.0, on_done, &waiter, &eng);
  } else {
#ifdef GEMMD_HAVE_CUDA
    const gemmd_cuda_options_t o = {0, kernel, strcmp(graphs, "on") == 0, 0, 0, 1, 3, NULL, copy_kernel_bytes};
    rc = gemmd_engine_cuda_create(&o, on_done, &waiter, &eng, why, sizeof why);
#endif
  }
  if (rc != GEMMD_OK) {
    fprintf(stderr, "engine_bench: no %s engine: %s\n", backend, why);
    return 1;
  }
  printf("# engine_bench: %s, %s; M=%u N=%u K=%u per group, each group its own weight, %u reps\n",
         eng->device, eng->kernel, m, n, k, reps);

  /* max_g weights, registered and loaded as the daemon does. */
  gemmd_weights_t ws;
  gemmd_weights_init(&ws, UINT64_MAX);
  const size_t kb = (k + 127) / 128, nb = (n + 127) / 128;
  gemmd_weight_t **loaded = calloc(max_g, sizeof *loaded);
  if (loaded == NULL) return 1;
  for (uint32_t g = 0; g < max_g; g++) {
    /* One buffer for the codes and their scales, owned by the weight. */
    const size_t scales_at = ((size_t)n * k + 15) / 16 * 16;
    uint8_t *bytes = malloc(scales_at + sizeof(float) * nb * kb);
    if (bytes == NULL) return 1;
    float *scales = (float *)(void *)(bytes + scales_at);
    fill_fp8(bytes, (size_t)n * k);
    fill_scales(scales, nb * kb);
    const gemmd_operand_t src = {n, k, k, GEMMD_DTYPE_FP8_E4M3, bytes, GEMMD_SCALE_BLOCK_128X128, scales};
    gemmd_weight_t *w = NULL;
    char msg[256];
    if (gemmd_weight_from_operand(&src, bytes, free, NULL, &w) != GEMMD_OK) return 1;
    char name[32];
    snprintf(name, sizeof name, "w%u", g);
    w->name = strdup(name);
    if (gemmd_weights_reserve(&ws, w, msg, sizeof msg) != 0) {
      fprintf(stderr, "engine_bench: %s\n", msg);
      return 1;
    }
    if (eng->ops->weight_load(eng, w) != GEMMD_OK) {
      fprintf(stderr, "engine_bench: the engine could not load weight %u\n", g);
      return 1;
    }
    gemmd_weights_activate(&ws, w);
    loaded[g] = w;
  }

  uint8_t *a = malloc((size_t)m * k);
  float *sa = malloc(sizeof(float) * m * kb);
  if (a == NULL || sa == NULL) return 1;
  fill_fp8(a, (size_t)m * k);
  fill_scales(sa, (size_t)m * kb);
  const located_t where = {a, sa};
  const gemmd_limits_t lim = {1u << 24, 1u << 24, 1u << 24};
  gemmd_request_t *reqs = calloc(max_g, sizeof *reqs);
  uint64_t *gemm_ns = calloc(reps, sizeof *gemm_ns), *dev_ns = calloc(reps, sizeof *dev_ns);
  if (reqs == NULL || gemm_ns == NULL || dev_ns == NULL) return 1;
  printf("| groups | rows | GEMM µs per batch (p50) | p10 / p90 | weight TB/s | device µs per batch (p50) |\n");
  printf("| --- | --- | --- | --- | --- | --- |\n");
  for (uint32_t gi = 0; gi < n_groups; gi++) {
    const uint32_t G = groups[gi];
    for (uint32_t rep = 0; rep < reps + 3; rep++) { /* 3 first: graphs captured, caches warm */
      gemmd_batcher_t bt;
      gemmd_batcher_init(&bt, (gemmd_batcher_limits_t){G, (uint64_t)G * m, G, 1, 1, 0});
      for (uint32_t g = 0; g < G; g++) {
        gemmd_request_t *r = &reqs[g];
        gemmd_request_init(r);
        char name[32], msg[256] = "";
        snprintf(name, sizeof name, "w%u", g);
        gemmd_weight_t *w = gemmd_weights_find_name(&ws, name);
        const gemmd_gemm_desc_t d = {
            .request_id = g + 1,
            .a = {"a", GEMMD_OPERAND_A, m, k, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_1X128, (size_t)m * k,
                  (size_t)m * kb},
            .out_dtype = GEMMD_DTYPE_BF16,
            .b_kind = GEMMD_B_WEIGHT_ID,
            .weight_id = w->id,
            .locate = locate,
            .locate_ctx = &where};
        gemmd_gemm_operands_t ops;
        const char *failed = "";
        if (gemmd_request_build(r, &d, &lim, &ws, &ops, msg, sizeof msg) != GEMMD_CODE_OK ||
            gemmd_request_prepare_operands(r, &ops, eng->quantizes_a, &failed) != GEMMD_OK) {
          fprintf(stderr, "engine_bench: request: %s%s\n", msg, failed);
          return 1;
        }
        r->weight = w;
        r->n = w->n;
        gemmd_batcher_push(&bt, r);
      }
      gemmd_request_t *expired = NULL;
      gemmd_batch_t *b = gemmd_batcher_form(&bt, 0, &expired);
      if (b == NULL || b->n_requests != G || gemmd_batch_plan(b, eng->row_align) != GEMMD_OK) {
        fprintf(stderr, "engine_bench: no batch of %u groups\n", G);
        return 1;
      }
      waiter.done = NULL;
      if (eng->ops->submit(eng, b) != GEMMD_OK) {
        fprintf(stderr, "engine_bench: the engine refused the batch\n");
        return 1;
      }
      pthread_mutex_lock(&waiter.mu);
      while (waiter.done == NULL) pthread_cond_wait(&waiter.cv, &waiter.mu);
      pthread_mutex_unlock(&waiter.mu);
      if (b->status != GEMMD_CODE_OK) {
        fprintf(stderr, "engine_bench: batch failed: %s\n", b->message);
        return 1;
      }
      if (rep >= 3) {
        gemm_ns[rep - 3] = b->gemm_ns;
        dev_ns[rep - 3] = b->compute_ns;
      }
      eng->ops->batch_release(eng, b);
      gemmd_batch_free(b);
      for (uint32_t g = 0; g < G; g++) gemmd_request_release(&reqs[g]);
    }
    qsort(gemm_ns, reps, sizeof *gemm_ns, cmp_u64);
    qsort(dev_ns, reps, sizeof *dev_ns, cmp_u64);
    const double p50 = (double)gemm_ns[reps / 2] / 1e3;
    printf("| %u | %u | %.1f | %.1f / %.1f | %.2f | %.1f |\n", G, m, p50, (double)gemm_ns[reps / 10] / 1e3,
           (double)gemm_ns[reps * 9 / 10] / 1e3, p50 > 0 ? (double)G * n * k / (p50 * 1e-6) / 1e12 : 0.0,
           (double)dev_ns[reps / 2] / 1e3);
    fflush(stdout);
  }
  for (uint32_t g = 0; g < max_g; g++) eng->ops->weight_unload(eng, loaded[g]);
  eng->ops->close(eng);
  gemmd_weights_close(&ws);
  free(loaded);
  free(reqs);
  free(gemm_ns);
  free(dev_ns);
  free(a);
  free(sa);
  return 0;
}
