/* gemmctl bench: worker threads, the measured window, progress. */
#include "client/gemmctl/bench_run.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/gemmctl/bench_report.h"

typedef struct shared_s {
  const ctl_bench_run_t *run;
  uint64_t start_ns; /* the open loop's schedule starts here */
  uint64_t measure_from_ns;
  _Atomic uint64_t end_ns;
  atomic_int stop;
} shared_t;

typedef struct worker_s {
  shared_t *shared;
  unsigned index;
  pthread_t thread;
  pthread_mutex_t mu; /* guards everything below */
  uint64_t *samples;
  size_t n, cap, seen; /* seen: how many the progress line has looked at */
  uint64_t errors, sum_queue_ns, sum_compute_ns, sum_batch;
  int out_of_memory;
  gemmd_status_t first_error;
} worker_t;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void record_ok(worker_t *w, const gemmd_gemm_result_t *r) {
  if (w->n == w->cap) {
    const size_t cap = w->cap ? 2 * w->cap : 4096;
    uint64_t *s = realloc(w->samples, cap * sizeof *s);
    if (s == NULL) {
      w->out_of_memory = 1;
      return;
    }
    w->samples = s;
    w->cap = cap;
  }
  w->samples[w->n++] = r->client_ns;
  w->sum_queue_ns += r->stats.queue_ns;
  w->sum_compute_ns += r->stats.compute_ns;
  w->sum_batch += r->stats.batch_requests;
}

static void record(worker_t *w, int rc, const gemmd_gemm_result_t *r, const gemmd_status_t *st) {
  pthread_mutex_lock(&w->mu);
  if (rc == 0) {
    record_ok(w, r);
  } else if (w->errors++ == 0) {
    w->first_error = *st;
  }
  pthread_mutex_unlock(&w->mu);
}

/* Open loop: this worker's k-th request is request k*C + index of all, due at
 * start + that/rate. */
static uint64_t due_ns(const shared_t *sh, const worker_t *w, uint64_t k) {
  const double i = (double)k * sh->run->concurrency + w->index;
  return sh->start_ns + (uint64_t)(i / sh->run->request_rate * 1e9);
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  shared_t *sh = w->shared;
  gemmd_gemm_call_t call = *sh->run->call;
  const int open_loop = sh->run->request_rate > 0;
  uint64_t seq = 0;
  gemmd_gemm_session_t *session = NULL;
  if (sh->run->session) {
    gemmd_status_t st;
    if (gemmd_client_gemm_session_open(sh->run->client, &session, &st) != 0) {
      record(w, st.code, NULL, &st);
      return NULL;
    }
  }
  while (!atomic_load(&sh->stop)) {
    gemmd_gemm_result_t r;
    gemmd_status_t st;
    uint64_t t0 = now_ns();
    if (open_loop) {
      const uint64_t due = due_ns(sh, w, seq);
      if (due >= atomic_load(&sh->end_ns)) break;
      while (t0 < due && !atomic_load(&sh->stop)) {
        const uint64_t nap = due - t0 < 50000000ull ? due - t0 : 50000000ull;
        const struct timespec ts = {0, (long)nap};
        nanosleep(&ts, NULL);
        t0 = now_ns();
      }
      t0 = due; /* late or not, the request was due then */
    }
    call.request_id = ((uint64_t)w->index << 40) | ++seq;
    const int rc = session != NULL ? gemmd_gemm_session_call(session, &call, &r, &st)
                                   : gemmd_client_gemm(sh->run->client, &call, &r, &st);
    const uint64_t t1 = now_ns();
    if (open_loop && rc == 0) r.client_ns = t1 - t0;
    const int counted = t0 >= sh->measure_from_ns && t1 <= atomic_load(&sh->end_ns);
    if (counted) record(w, rc, &r, &st);
    gemmd_gemm_result_free(&r);
    if (t1 >= atomic_load(&sh->end_ns)) break;
  }
  if (session != NULL) {
    gemmd_status_t st;
    if (gemmd_gemm_session_close(session, &st) != 0) record(w, st.code, NULL, &st);
  }
  return NULL;
}

/* Samples that arrived since the last progress line, and the total so far. */
static size_t take_new(worker_t *ws, unsigned n_workers, uint64_t **fresh, size_t *n_fresh) {
  size_t total = 0, n = 0, cap = 0;
  uint64_t *v = NULL;
  for (unsigned i = 0; i < n_workers; i++) {
    worker_t *w = &ws[i];
    pthread_mutex_lock(&w->mu);
    const size_t k = w->n - w->seen;
    uint64_t *grown = n + k > cap ? realloc(v, (n + k) * sizeof *v) : v;
    if (grown != NULL) {
      v = grown;
      cap = n + k > cap ? n + k : cap;
      memcpy(v + n, w->samples + w->seen, k * sizeof *v);
      n += k;
    }
    w->seen = w->n;
    total += w->n;
    pthread_mutex_unlock(&w->mu);
  }
  *fresh = v;
  *n_fresh = n;
  return total;
}

static void progress(const shared_t *sh, worker_t *ws, uint64_t now, uint64_t last) {
  const ctl_bench_run_t *run = sh->run;
  if (now < sh->measure_from_ns + 100000000ull) { /* a tick at the window's start: warmup's */
    const double left = now < sh->measure_from_ns ? (double)(sh->measure_from_ns - now) / 1e9 : 0;
    const double done = run->warmup_s - left;
    fprintf(stderr, "bench %s: warmup %.0f/%g s\n", run->label, done, run->warmup_s);
    return;
  }
  const uint64_t since = last > sh->measure_from_ns ? last : sh->measure_from_ns;
  const double interval_s = (double)(now - since) / 1e9;
  uint64_t *fresh;
  size_t n_fresh;
  const size_t total = take_new(ws, run->concurrency, &fresh, &n_fresh);
  ctl_sort_u64(fresh, n_fresh);
  fprintf(stderr, "bench %s: %.0f/%g s, %zu requests, %.0f req/s, p50 %.0f us\n", run->label,
          (double)(now - sh->measure_from_ns) / 1e9, run->duration_s, total,
          interval_s > 0 ? (double)n_fresh / interval_s : 0.0,
          (double)ctl_percentile(fresh, n_fresh, 50) / 1e3);
  free(fresh);
}

/* Sleeps until `until` (or an interrupt), in short naps so that a signal is seen soon. */
static void sleep_until(uint64_t until, volatile sig_atomic_t *interrupted) {
  for (uint64_t now = now_ns(); now < until && !*interrupted; now = now_ns()) {
    const uint64_t nap = until - now < 50000000ull ? until - now : 50000000ull;
    const struct timespec ts = {0, (long)nap};
    nanosleep(&ts, NULL);
  }
}

/* The clock, one tick a second, until the window closes or an interrupt comes. */
static void watch(shared_t *sh, worker_t *ws) {
  const ctl_bench_run_t *run = sh->run;
  uint64_t last = now_ns();
  for (;;) {
    const uint64_t end = atomic_load(&sh->end_ns);
    const uint64_t tick = last + 1000000000ull < end ? last + 1000000000ull : end;
    sleep_until(tick, run->interrupted);
    const uint64_t now = now_ns();
    if (*run->interrupted) {
      atomic_store(&sh->end_ns, now);
      break;
    }
    if (now >= end) break;
    if (!run->quiet) progress(sh, ws, now, last);
    last = now;
  }
}

static void merge(const shared_t *sh, worker_t *ws, ctl_bench_samples_t *out,
                  gemmd_status_t *first_error, int *oom) {
  const unsigned n = sh->run->concurrency;
  size_t total = 0;
  for (unsigned i = 0; i < n; i++) total += ws[i].n;
  out->round_trip_ns = malloc((total ? total : 1) * sizeof(uint64_t));
  *oom = out->round_trip_ns == NULL;
  for (unsigned i = 0; i < n && !*oom; i++) {
    worker_t *w = &ws[i];
    memcpy(out->round_trip_ns + out->n, w->samples, w->n * sizeof(uint64_t));
    out->n += w->n;
    out->errors += w->errors;
    out->sum_queue_ns += w->sum_queue_ns;
    out->sum_compute_ns += w->sum_compute_ns;
    out->sum_batch_requests += w->sum_batch;
    *oom |= w->out_of_memory;
    if (w->errors > 0 && first_error->code == GEMMD_STATUS_OK) *first_error = w->first_error;
  }
  const uint64_t end = atomic_load(&sh->end_ns);
  out->seconds = end > sh->measure_from_ns ? (double)(end - sh->measure_from_ns) / 1e9 : 0;
}

static unsigned start_workers(shared_t *sh, worker_t *ws) {
  sigset_t block, old;
  unsigned started = 0;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old); /* signals go to the watching thread */
  for (; started < sh->run->concurrency; started++) {
    worker_t *w = &ws[started];
    w->shared = sh;
    w->index = started;
    pthread_mutex_init(&w->mu, NULL);
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
      pthread_mutex_destroy(&w->mu);
      break;
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return started;
}

int ctl_bench_run(const ctl_bench_run_t *run, ctl_bench_samples_t *out,
                  gemmd_status_t *first_error) {
  shared_t sh;
  memset(out, 0, sizeof *out);
  memset(first_error, 0, sizeof *first_error);
  worker_t *ws = calloc(run->concurrency, sizeof *ws);
  if (ws == NULL) return -1;
  sh.run = run;
  sh.start_ns = now_ns();
  sh.measure_from_ns = sh.start_ns + (uint64_t)(run->warmup_s * 1e9);
  atomic_init(&sh.end_ns, sh.measure_from_ns + (uint64_t)(run->duration_s * 1e9));
  atomic_init(&sh.stop, 0);
  const unsigned started = start_workers(&sh, ws);
  if (started == run->concurrency) watch(&sh, ws);
  atomic_store(&sh.stop, 1);
  for (unsigned i = 0; i < started; i++) pthread_join(ws[i].thread, NULL);
  int oom = 0;
  if (started == run->concurrency) merge(&sh, ws, out, first_error, &oom);
  for (unsigned i = 0; i < started; i++) {
    free(ws[i].samples);
    pthread_mutex_destroy(&ws[i].mu);
  }
  free(ws);
  if (started != run->concurrency || oom) {
    free(out->round_trip_ns);
    memset(out, 0, sizeof *out);
    return -1;
  }
  return 0;
}
