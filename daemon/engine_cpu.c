/* The CPU engine: one worker thread takes batches in order and runs each group of the
 * parameter table through the fast FP32 path (kernels/cpu_gemm.h), which spreads one
 * GEMM over the configured threads. A batch's arenas are plain heap memory. Batches of
 * at most --cpu-inline-flops run on the submitting (loop) thread instead: for them the
 * two thread hand-offs cost more than the arithmetic. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/engine.h"
#include "daemon/clock.h"
#include "daemon/log.h"
#include "daemon/status.h"
#include "gemmd/shm_v1.h"
#include "kernels/cpu_gemm.h"
#include "kernels/errors.h"

typedef struct {
  uint8_t *a;
  float *sa;
  uint8_t *d;
  uint64_t bytes;
} cpu_arenas_t;

typedef struct {
  gemmd_engine_t base;
  int threads;
  double inline_flops; /* smaller batches run on the caller's thread */
  pthread_t worker;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  gemmd_batch_t **queue; /* ring of `base.slots` */
  unsigned head, count;
  int stop;
  uint64_t arena_bytes; /* held by batches not yet released */
} cpu_engine_t;

static void run_batch(cpu_engine_t *e, gemmd_batch_t *b) {
  const uint64_t t0 = gemmd_now_ns();
  b->marks.engine_start = b->marks.launch = t0; /* staging is part of the compute here */
  cpu_arenas_t *ar = calloc(1, sizeof *ar);
  if (ar != NULL) {
    ar->a = malloc(b->a_bytes + 1);
    ar->sa = malloc(sizeof(float) * (b->sa_count + 1));
    ar->d = malloc(b->d_bytes + 1);
    ar->bytes = b->a_bytes + sizeof(float) * b->sa_count + b->d_bytes;
  }
  b->engine_data = ar;
  if (ar == NULL || ar->a == NULL || ar->sa == NULL || ar->d == NULL) {
    b->status = GEMMD_CODE_RESOURCE_EXHAUSTED;
    snprintf(b->message, sizeof b->message, "out of host memory for a batch of %llu bytes",
             (unsigned long long)(b->a_bytes + b->d_bytes));
    b->compute_ns = gemmd_now_ns() - t0;
    return;
  }
  pthread_mutex_lock(&e->mu);
  e->arena_bytes += ar->bytes;
  pthread_mutex_unlock(&e->mu);

  gemmd_batch_stage_a(b, ar->a, ar->sa);
  b->status = GEMMD_CODE_OK;
  for (uint32_t g = 0; g < b->n_groups && b->status == GEMMD_CODE_OK; g++) {
    const gemmd_group_params_t *p = &b->table[g];
    const gemmd_weight_t *w = b->group_weight[g];
    const gemmd_operand_t a = {p->m,
                               p->k,
                               p->lda,
                               (gemmd_dtype_t)p->a_dtype,
                               ar->a + p->a_offset,
                               GEMMD_SCALE_BLOCK_1X128,
                               ar->sa + p->sa_offset};
    const gemmd_operand_t bop = gemmd_weight_operand(w);
    const int rc =
        gemmd_cpu_gemm(&a, &bop, (gemmd_dtype_t)p->out_dtype, ar->d + p->d_offset, p->n, e->threads);
    if (rc != GEMMD_OK) {
      b->status = rc == GEMMD_ENOMEM ? 8 : 13; /* RESOURCE_EXHAUSTED : INTERNAL */
      snprintf(b->message, sizeof b->message, "CPU GEMM of group %u (%ux%ux%u) failed: %s", g,
               p->m, p->n, p->k, gemmd_strerror(rc));
    }
  }
  if (b->status == GEMMD_CODE_OK) {
    for (uint32_t i = 0; i < b->n_requests; i++) {
      gemmd_request_t *r = b->requests[i];
      r->d = ar->d + r->d_offset;
      if (r->d_dest != NULL) { /* straight into the client's arena, off the loop thread */
        memcpy(r->d_dest, r->d, r->d_bytes);
        r->d = r->d_dest;
      }
    }
  }
  b->marks.seen_done = gemmd_now_ns();
  b->compute_ns = b->marks.seen_done - t0;
}

static void *worker_main(void *arg) {
  cpu_engine_t *e = arg;
  for (;;) {
    pthread_mutex_lock(&e->mu);
    while (e->count == 0 && !e->stop) pthread_cond_wait(&e->cv, &e->mu);
    if (e->count == 0 && e->stop) {
      pthread_mutex_unlock(&e->mu);
      return NULL;
    }
    gemmd_batch_t *b = e->queue[e->head];
    e->head = (e->head + 1) % e->base.slots;
    e->count--;
    pthread_mutex_unlock(&e->mu);
    run_batch(e, b);
    e->base.done(e->base.done_ctx, b);
  }
}

static int cpu_submit(gemmd_engine_t *base, gemmd_batch_t *b) {
  cpu_engine_t *e = (cpu_engine_t *)base;
  /* A tiny batch costs less than waking the worker and being woken back: run it here.
   * With one slot the worker is idle whenever the loop may submit. */
  if (b->flops <= e->inline_flops) {
    run_batch(e, b);
    e->base.done(e->base.done_ctx, b);
    return GEMMD_OK;
  }
  pthread_mutex_lock(&e->mu);
  if (e->count >= e->base.slots || e->stop) {
    pthread_mutex_unlock(&e->mu);
    return GEMMD_EAGAIN;
  }
  e->queue[(e->head + e->count) % e->base.slots] = b;
  e->count++;
  pthread_cond_signal(&e->cv);
  pthread_mutex_unlock(&e->mu);
  return GEMMD_OK;
}

static int cpu_weight_load(gemmd_engine_t *base, gemmd_weight_t *w) {
  (void)base;
  w->engine_handle = NULL; /* the host bytes are the engine's copy */
  return GEMMD_OK;
}

static void cpu_weight_unload(gemmd_engine_t *base, gemmd_weight_t *w) {
  (void)base;
  w->engine_handle = NULL;
}

static void cpu_batch_release(gemmd_engine_t *base, gemmd_batch_t *b) {
  cpu_engine_t *e = (cpu_engine_t *)base;
  cpu_arenas_t *ar = b->engine_data;
  if (ar == NULL) return;
  pthread_mutex_lock(&e->mu);
  e->arena_bytes -= ar->bytes;
  pthread_mutex_unlock(&e->mu);
  free(ar->a);
  free(ar->sa);
  free(ar->d);
  free(ar);
  b->engine_data = NULL;
}

static uint64_t cpu_memory_used(gemmd_engine_t *base) {
  cpu_engine_t *e = (cpu_engine_t *)base;
  pthread_mutex_lock(&e->mu);
  const uint64_t n = e->arena_bytes;
  pthread_mutex_unlock(&e->mu);
  return n;
}

static void cpu_close(gemmd_engine_t *base) {
  cpu_engine_t *e = (cpu_engine_t *)base;
  pthread_mutex_lock(&e->mu);
  e->stop = 1;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
  pthread_join(e->worker, NULL);
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->cv);
  free(e->queue);
  free(e);
}

/* A region of the CPU engine's device memory, which is host memory: a file the client
 * shares (a memfd), mapped for reading A and writing D in place. */
static int cpu_region_open(gemmd_engine_t *base, int kind, int fd, const uint8_t handle[64],
                           uint64_t bytes, void **out, int *on_device, char *msg, size_t n) {
  (void)base;
  (void)handle;
  *on_device = 0;
  if (kind != GEMMD_SHM_REGION_FD) {
    snprintf(msg, n, "region kind %d needs the CUDA backend; the CPU backend maps fds (kind %d)",
             kind, GEMMD_SHM_REGION_FD);
    return GEMMD_CODE_UNIMPLEMENTED;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(msg, n, "the region's fd is not a file gemmd can map (a memfd)");
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  /* Sealed against shrinking: a file cut short under gemmd's mapping would turn the next
   * read of it into SIGBUS (the arena is sealed the same way). */
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
    snprintf(msg, n, "the region's file must be sealed against shrinking: a memfd made with "
             "MFD_ALLOW_SEALING, then fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK)");
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (bytes == 0 || (uint64_t)st.st_size < bytes) {
    snprintf(msg, n, "a region of %" PRIu64 " bytes does not fit its file of %lld bytes", bytes,
             (long long)st.st_size);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    snprintf(msg, n, "cannot map the region: %s", strerror(errno));
    return errno == ENOMEM ? GEMMD_CODE_RESOURCE_EXHAUSTED : GEMMD_CODE_INVALID_ARGUMENT;
  }
  *out = p;
  return GEMMD_CODE_OK;
}

static void cpu_region_close(gemmd_engine_t *base, void *p, uint64_t bytes) {
  (void)base;
  munmap(p, bytes);
}

static const gemmd_engine_ops_t cpu_ops = {
    .submit = cpu_submit,
    .weight_load = cpu_weight_load,
    .weight_unload = cpu_weight_unload,
    .arena_register = NULL, /* host memory is the CPU engine's memory */
    .arena_unregister = NULL,
    .region_open = cpu_region_open,
    .region_close = cpu_region_close,
    .batch_release = cpu_batch_release,
    .memory_used = cpu_memory_used,
    .close = cpu_close,
};

/* "AMD EPYC, 2 CPUs" from /proc/cpuinfo. */
static void describe_cpu(char *out, size_t n) {
  char model[96] = "unknown CPU";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f != NULL) {
    char line[256];
    while (fgets(line, sizeof line, f) != NULL) {
      if (strncmp(line, "model name", 10) == 0) {
        const char *colon = strchr(line, ':');
        if (colon != NULL) {
          snprintf(model, sizeof model, "%s", colon + 2);
          model[strcspn(model, "\n")] = '\0';
        }
        break;
      }
    }
    fclose(f);
  }
  snprintf(out, n, "%s, %ld CPUs", model, sysconf(_SC_NPROCESSORS_ONLN));
}

int gemmd_engine_cpu_create(int threads, double inline_flops, gemmd_engine_done_fn done,
                            void *done_ctx, gemmd_engine_t **out) {
  cpu_engine_t *e = calloc(1, sizeof *e);
  if (e == NULL) return GEMMD_ENOMEM;
  e->base.ops = &cpu_ops;
  e->base.backend = "cpu";
  e->base.slots = 1; /* one batch at a time: it already uses every thread */
  e->base.row_align = 1;
  e->base.done = done;
  e->base.done_ctx = done_ctx;
  describe_cpu(e->base.device, sizeof e->base.device);
  snprintf(e->base.kernel, sizeof e->base.kernel, "cpu_gemm %s", gemmd_cpu_gemm_kernel_name());
  e->threads = threads;
  e->inline_flops = inline_flops;
  e->queue = calloc(e->base.slots, sizeof *e->queue);
  if (e->queue == NULL) {
    free(e);
    return GEMMD_ENOMEM;
  }
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  if (pthread_create(&e->worker, NULL, worker_main, e) == 0) {
    pthread_setname_np(e->worker, "gemmd-cpu");
  } else {
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e->queue);
    free(e);
    return GEMMD_ENOMEM;
  }
  *out = &e->base;
  return GEMMD_OK;
}
