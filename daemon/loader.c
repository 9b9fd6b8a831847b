/* Start-up loading off the loop. See loader.h. */
#include "daemon/loader.h"

#include <inttypes.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/log.h"
#include "daemon/preload.h"
#include "daemon/safetensors.h"
#include "daemon/weight_store.h"
#include "kernels/errors.h"

enum { MAX_NAME = 255 }; /* as a RegisterWeight name */

typedef struct gemmd_loader_s {
  gemmd_server_t *srv;
  pthread_t thread;
  void (*done)(gemmd_server_t *srv, int ok);
  atomic_int cancel;
  regex_t filter;
  int has_filter;
  int ok;
  /* The loop's answer to the step in flight (on_loop). */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int answered;
  gemmd_weight_t *w;
  int code;
  char msg[512];
  uint64_t n_files;
} gemmd_loader_t;

/* One file's tally, for its log line. */
typedef struct {
  gemmd_loader_t *l;
  int preload;
  int loaded, refused, filtered;
} file_tally_t;

/* ---- steps on the loop ------------------------------------------------------------------ */

static void answered(gemmd_loader_t *l) {
  pthread_mutex_lock(&l->mu);
  l->answered = 1;
  pthread_cond_signal(&l->cv);
  pthread_mutex_unlock(&l->mu);
}

/* Runs fn on the loop and waits until it has answered. */
static void on_loop(gemmd_loader_t *l, void (*fn)(gemmd_server_t *srv, void *arg)) {
  pthread_mutex_lock(&l->mu);
  l->answered = 0;
  pthread_mutex_unlock(&l->mu);
  gemmd_server_post(l->srv, fn, l);
  pthread_mutex_lock(&l->mu);
  while (!l->answered) pthread_cond_wait(&l->cv, &l->mu);
  pthread_mutex_unlock(&l->mu);
}

static void loop_reserve(gemmd_server_t *srv, void *arg) {
  gemmd_loader_t *l = arg;
  l->code = gemmd_weights_reserve(&srv->weights, l->w, l->msg, sizeof l->msg);
  answered(l);
}

static void loop_activate(gemmd_server_t *srv, void *arg) {
  gemmd_loader_t *l = arg;
  gemmd_weights_activate(&srv->weights, l->w);
  srv->metrics.startup_weights++;
  srv->metrics.startup_weight_bytes += l->w->bytes;
  answered(l);
}

static void loop_unreserve(gemmd_server_t *srv, void *arg) {
  gemmd_loader_t *l = arg;
  gemmd_weights_unreserve(&srv->weights, l->w);
  answered(l);
}

static void loop_files(gemmd_server_t *srv, void *arg) {
  gemmd_loader_t *l = arg;
  srv->metrics.startup_files = l->n_files;
  answered(l);
}

static void loop_file_done(gemmd_server_t *srv, void *arg) {
  srv->metrics.startup_files_done++;
  answered(arg);
}

static void loop_file_skipped(gemmd_server_t *srv, void *arg) {
  srv->metrics.startup_files_skipped++;
  answered(arg);
}

static void loop_finish(gemmd_server_t *srv, void *arg) {
  gemmd_loader_t *l = arg;
  pthread_join(l->thread, NULL);
  void (*done)(gemmd_server_t *, int) = l->done;
  const int ok = l->ok;
  if (l->has_filter) regfree(&l->filter);
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->cv);
  free(l);
  srv->loader = NULL;
  srv->loading = 0;
  srv->metrics.startup_loading = 0;
  done(srv, ok);
}

/* ---- the loader's thread ----------------------------------------------------------------- */

/* --preload-filter and --preload-prefix: 0 keeps w (renamed), -1 filtered out, -2 a name
 * too long with the prefix. */
static int preload_name(gemmd_loader_t *l, gemmd_weight_t *w) {
  if (l->has_filter && regexec(&l->filter, w->name, 0, NULL, 0) != 0) return -1;
  const char *prefix = l->srv->cfg->preload_prefix;
  if (prefix[0] == '\0') return 0;
  const size_t len = strlen(prefix) + strlen(w->name);
  if (len > MAX_NAME) return -2;
  char *name = malloc(len + 1);
  if (name == NULL) return -2;
  memcpy(name, prefix, strlen(prefix));
  memcpy(name + strlen(prefix), w->name, strlen(w->name) + 1);
  free(w->name);
  w->name = name;
  return 0;
}

/* A weight a file gave: reserved, copied to the engine, made usable. */
static void take(void *ctx, gemmd_weight_t *w) {
  file_tally_t *f = ctx;
  gemmd_loader_t *l = f->l;
  gemmd_server_t *srv = l->srv;
  if (atomic_load(&l->cancel)) {
    gemmd_weight_free(w);
    return;
  }
  if (f->preload) {
    const int keep = preload_name(l, w);
    if (keep == -1) {
      f->filtered++;
      gemmd_weight_free(w);
      return;
    }
    if (keep == -2) {
      gemmd_log(GEMMD_LOG_ERROR, "weight not loaded", "name=\"%s\" reason=\"longer than %d characters with "
                "--preload-prefix\"", w->name, MAX_NAME);
      f->refused++;
      gemmd_weight_free(w);
      return;
    }
  }
  if (srv->cfg->test_load_delay_ms > 0) usleep((useconds_t)srv->cfg->test_load_delay_ms * 1000);
  w->source = f->preload ? "preloaded" : "restored";
  l->w = w;
  on_loop(l, loop_reserve);
  if (l->code != 0) {
    gemmd_log(GEMMD_LOG_ERROR, "weight not loaded", "id=%" PRIu64 " name=\"%s\" reason=\"%s\"", w->id, w->name,
              l->msg);
    gemmd_weight_free(w);
    f->refused++;
    return;
  }
  if (srv->engine->ops->weight_load(srv->engine, w) != GEMMD_OK) {
    gemmd_log(GEMMD_LOG_ERROR, "weight not loaded", "id=%" PRIu64 " name=\"%s\" reason=\"the engine could not "
              "load it\"", w->id, w->name);
    on_loop(l, loop_unreserve);
    f->refused++;
    return;
  }
  on_loop(l, loop_activate);
  f->loaded++;
}

/* --weight-dir files are read and checksummed by up to READERS threads at once, at most
 * READ_AHEAD files ahead of the one being registered, which goes in file (id) order. */
enum { READERS = 4, READ_AHEAD = 8 };

typedef struct {
  gemmd_loader_t *l;
  char **paths;
  size_t n;
  gemmd_weight_t **w; /* by file: what reading it gave, or NULL */
  char (*err)[256];
  unsigned char *ready;
  size_t next, consumed; /* under mu */
  pthread_mutex_t mu;
  pthread_cond_t cv;
} prefetch_t;

static void *reader(void *arg) {
  prefetch_t *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (p->next < p->n && p->next >= p->consumed + READ_AHEAD && !atomic_load(&p->l->cancel)) {
      pthread_cond_wait(&p->cv, &p->mu);
    }
    if (p->next >= p->n || atomic_load(&p->l->cancel)) break;
    const size_t i = p->next++;
    pthread_mutex_unlock(&p->mu);
    if (gemmd_weight_store_read(p->paths[i], &p->w[i], p->err[i], sizeof p->err[i]) != GEMMD_OK) p->w[i] = NULL;
    pthread_mutex_lock(&p->mu);
    p->ready[i] = 1;
    pthread_cond_broadcast(&p->cv);
  }
  pthread_cond_broadcast(&p->cv); /* a cancel: the consumer may be waiting for a file no one took */
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static void restore_dir(gemmd_loader_t *l, char **paths, size_t n) {
  file_tally_t f = {l, 0, 0, 0, 0};
  int skipped = 0;
  const uint64_t t0 = gemmd_now_ns();
  prefetch_t p = {l, paths, n, calloc(n + 1, sizeof *p.w), calloc(n + 1, sizeof *p.err), calloc(n + 1, 1),
                  0, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
  pthread_t threads[READERS];
  unsigned started = 0;
  if (p.w != NULL && p.err != NULL && p.ready != NULL) {
    for (; started < READERS && started < n; started++) {
      if (pthread_create(&threads[started], NULL, reader, &p) != 0) break;
    }
  }
  for (size_t i = 0; i < n && !atomic_load(&l->cancel); i++) {
    gemmd_weight_t *w = NULL;
    char err[256] = "out of memory";
    if (started > 0) {
      pthread_mutex_lock(&p.mu);
      while (!p.ready[i] && !(atomic_load(&l->cancel) && p.next <= i)) pthread_cond_wait(&p.cv, &p.mu);
      const int have = p.ready[i];
      p.consumed = i + 1;
      pthread_cond_broadcast(&p.cv);
      pthread_mutex_unlock(&p.mu);
      if (!have) break; /* cancelled before any reader took it */
      w = p.w[i];
      p.w[i] = NULL;
      memcpy(err, p.err[i], sizeof err);
    } else if (gemmd_weight_store_read(paths[i], &w, err, sizeof err) != GEMMD_OK) { /* no reader */
      w = NULL;
    }
    if (w != NULL) {
      take(&f, w);
    } else {
      gemmd_log(GEMMD_LOG_ERROR, "weight file skipped", "path=\"%s\" reason=\"%s\"", paths[i], err);
      skipped++;
      on_loop(l, loop_file_skipped);
    }
    on_loop(l, loop_file_done);
  }
  pthread_mutex_lock(&p.mu); /* a cancel: the readers stop at their next file */
  pthread_cond_broadcast(&p.cv);
  pthread_mutex_unlock(&p.mu);
  for (unsigned t = 0; t < started; t++) pthread_join(threads[t], NULL);
  for (size_t i = 0; p.w != NULL && i < n; i++) gemmd_weight_free(p.w[i]); /* read, not taken */
  free(p.w);
  free(p.err);
  free(p.ready);
  gemmd_log(GEMMD_LOG_INFO, "weights restored", "dir=\"%s\" loaded=%d refused=%d skipped=%d ms=%.1f readers=%u",
            l->srv->cfg->weight_dir, f.loaded, f.refused, skipped, (double)(gemmd_now_ns() - t0) * 1e-6, started);
}

/* 0, or -1 when a file could not be read (the start fails). */
static int preload_file(gemmd_loader_t *l, const char *path) {
  file_tally_t f = {l, 1, 0, 0, 0};
  char err[512];
  int other = 0;
  const uint64_t t0 = gemmd_now_ns();
  const int rc = gemmd_safetensors_load(path, take, &f, &other, err, sizeof err);
  on_loop(l, loop_file_done);
  if (rc < 0) {
    gemmd_log(GEMMD_LOG_ERROR, "preload failed", "file=\"%s\" reason=\"%s\"", path, err);
    return -1;
  }
  gemmd_log(GEMMD_LOG_INFO, "preloaded", "file=\"%s\" weights=%d refused=%d filtered=%d other_tensors=%d ms=%.1f",
            path, f.loaded, f.refused, f.filtered, other, (double)(gemmd_now_ns() - t0) * 1e-6);
  return 0;
}

typedef struct {
  char **paths;
  size_t n;
} file_list_t;

static void *run(void *arg) {
  gemmd_loader_t *l = arg;
  const gemmd_config_t *cfg = l->srv->cfg;
  file_list_t store = {NULL, 0}, pre[GEMMD_CONFIG_MAX_PRELOAD];
  memset(pre, 0, sizeof pre);
  char err[512];
  l->ok = 1;
  /* The directory was made and locked before gemmd listened (lifecycle.c). */
  if (cfg->weight_dir[0] != '\0' && gemmd_weight_store_list(cfg->weight_dir, &store.paths, &store.n) != GEMMD_OK) {
    gemmd_log(GEMMD_LOG_ERROR, "weight directory unreadable", "dir=\"%s\"", cfg->weight_dir);
    l->ok = 0;
  }
  for (int i = 0; l->ok && i < cfg->n_preload; i++) {
    if (gemmd_preload_expand(cfg->preload[i], &pre[i].paths, &pre[i].n, err, sizeof err) != GEMMD_OK) {
      gemmd_log(GEMMD_LOG_ERROR, "preload failed", "entry=\"%s\" reason=\"%s\"", cfg->preload[i], err);
      l->ok = 0;
    }
  }
  l->n_files = store.n;
  for (int i = 0; i < cfg->n_preload; i++) l->n_files += pre[i].n;
  on_loop(l, loop_files);
  if (l->ok) {
    gemmd_log(GEMMD_LOG_INFO, "loading weights", "files=%" PRIu64 " weight_dir_files=%zu", l->n_files, store.n);
    restore_dir(l, store.paths, store.n);
    for (int i = 0; l->ok && i < cfg->n_preload; i++) {
      for (size_t j = 0; l->ok && j < pre[i].n && !atomic_load(&l->cancel); j++) {
        if (preload_file(l, pre[i].paths[j]) != 0) l->ok = 0;
      }
    }
  }
  gemmd_preload_free(store.paths, store.n);
  for (int i = 0; i < cfg->n_preload; i++) gemmd_preload_free(pre[i].paths, pre[i].n);
  gemmd_server_post(l->srv, loop_finish, l);
  return NULL;
}

int gemmd_loader_start(gemmd_server_t *srv, void (*done)(gemmd_server_t *srv, int ok)) {
  const gemmd_config_t *cfg = srv->cfg;
  srv->ready = 0;
  if (cfg->weight_dir[0] == '\0' && cfg->n_preload == 0) {
    done(srv, 1);
    return GEMMD_OK;
  }
  gemmd_loader_t *l = calloc(1, sizeof *l);
  if (l == NULL) return GEMMD_ENOMEM;
  l->srv = srv;
  l->done = done;
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->cv, NULL);
  if (cfg->preload_filter[0] != '\0') { /* checked when the configuration was read */
    l->has_filter = regcomp(&l->filter, cfg->preload_filter, REG_EXTENDED | REG_NOSUB) == 0;
  }
  srv->loader = l;
  srv->loading = 1;
  srv->metrics.startup_loading = 1;
  if (pthread_create(&l->thread, NULL, run, l) != 0) {
    if (l->has_filter) regfree(&l->filter);
    free(l);
    srv->loader = NULL;
    srv->loading = 0;
    srv->metrics.startup_loading = 0;
    return GEMMD_EIO;
  }
  pthread_setname_np(l->thread, "gemmd-loader");
  return GEMMD_OK;
}

void gemmd_loader_cancel(gemmd_server_t *srv) {
  if (srv->loader != NULL) atomic_store(&srv->loader->cancel, 1);
}
