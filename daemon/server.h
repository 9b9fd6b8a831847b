/* gemmd's state, owned by the libuv loop thread, and the calls transports make into it.
 *
 * Threads:
 *   loop       this struct: admission, the batcher, weights, metrics, HTTP, signals.
 *   gRPC CQ    decode and validate messages, then gemmd_server_post() work to the loop.
 *   engine     runs batches, then posts them back (gemmd_server_engine_done).
 *   uv pool    weight files (--weight-dir), so disk I/O never blocks the loop.
 * Everything below that takes a gemmd_server_t* runs on the loop thread, except
 * gemmd_server_post, gemmd_server_count_refused and gemmd_server_engine_done, which any
 * thread may call. lifecycle.c owns the process around this core: start-up, the HTTP
 * endpoints, signals, the tick and the drain.
 */
#ifndef GEMMD_DAEMON_SERVER_H_
#define GEMMD_DAEMON_SERVER_H_

#include <pthread.h>
#include <stdint.h>
#include <uv.h>

#include "daemon/batcher.h"
#include "daemon/clock.h"
#include "daemon/config.h"
#include "daemon/engine.h"
#include "daemon/hashmap.h"
#include "daemon/http.h"
#include "daemon/metrics.h"
#include "daemon/request.h"
#include "daemon/slot_gate.h"
#include "daemon/validate.h"
#include "daemon/weights.h"

typedef struct gemmd_server_s gemmd_server_t;
typedef struct gemmd_rpc_s gemmd_rpc_t;
typedef struct gemmd_shm_server_s gemmd_shm_server_t;
typedef struct gemmd_loader_s gemmd_loader_t;

/* Work handed to the loop thread. */
typedef struct gemmd_post_s {
  struct gemmd_post_s *next;
  void (*fn)(gemmd_server_t *srv, void *arg);
  void *arg;
} gemmd_post_t;

/* Someone (a health Watch stream) told when serving status changes. */
typedef struct gemmd_watcher_s {
  struct gemmd_watcher_s *next;
  void (*changed)(struct gemmd_watcher_s *w, int serving);
} gemmd_watcher_t;

struct gemmd_server_s {
  const gemmd_config_t *cfg;
  gemmd_limits_t limits;
  uv_loop_t loop;

  /* Handoff from other threads: a locked list and one async wakeup. */
  uv_async_t wakeup;
  pthread_mutex_t inbox_mu;
  gemmd_post_t *inbox_head, *inbox_tail;
  /* --loop-spin-us: after a wake-up the loop keeps polling (an idle handle makes uv_run
   * poll without sleeping) until spin_until_ns, so the next hand-off finds it awake. */
  uv_idle_t spin;
  uint64_t spin_until_ns;

  uv_signal_t sigterm, sigint;
  uv_timer_t tick;        /* periodic jobs, see on_tick in lifecycle.c */
  uv_work_t save_state;   /* the engine's save_state, every few seconds */
  int state_saving;
  unsigned ticks_since_save;
  /* --max-batch-delay-us: a timerfd set to the wait's end, which the loop polls (the poll
   * is active while a wait is armed). libuv's own timers count whole milliseconds, and the
   * waits are tens to hundreds of µs. */
  int delay_fd;
  uv_poll_t batch_delay;

  gemmd_batcher_t batcher;
  gemmd_engine_t *engine;
  unsigned engine_busy;   /* batches on the engine, until the loop has answered them */
  gemmd_slot_gate_t slot_gate; /* the engine's slots: which one the next batch may take */
  unsigned dispatch_held; /* > 0: a burst is being admitted; dispatch once it is in */

  gemmd_weights_t weights;
  gemmd_weight_quantizer_t weight_quantizer; /* the engine's (weight_quantize), else none */
  unsigned weight_ops; /* registrations and removals still writing files */

  gemmd_metrics_t metrics;
  gemmd_http_t *http;
  int http_port;
  gemmd_rpc_t *rpc;
  int grpc_port;
  gemmd_shm_server_t *shm; /* NULL without --shm-socket */

  gemmd_map_t conns; /* conn_id -> admitted, unanswered requests (as uintptr_t) */
  uint64_t inflight; /* admitted, unanswered requests */
  gemmd_watcher_t *watchers;

  uint64_t start_ns;
  int ready;    /* engine up, listening, start-up weights loaded */
  int loading;  /* the start-up loader runs (loader.h) */
  int weight_dir_lock; /* fd holding --weight-dir's lock, or -1 */
  gemmd_loader_t *loader;
  struct gemmd_nvml_s *nvml; /* the GPU's gauges (nvml.h); NULL without a GPU or driver */
  int draining; /* SIGTERM/SIGINT seen: no new work */
  int stopped;
  int exit_code;

  /* Called on the loop after a batch or a weight operation finishes, when the server may
   * have become idle (lifecycle.c: a drain then completes). NULL: nothing is called. */
  void (*on_quiet)(gemmd_server_t *srv);
};


/* Any thread: run fn(srv, arg) on the loop thread soon. Never blocks on the loop. */
void gemmd_server_post(gemmd_server_t *srv, void (*fn)(gemmd_server_t *srv, void *arg),
                       void *arg);

/* Admission of a decoded request (see request.h); it is answered exactly once through
 * req->respond, maybe before this returns. */
void gemmd_server_submit(gemmd_server_t *srv, gemmd_request_t *req);

/* Loop thread: while held, admitted requests only queue; release dispatches what queued,
 * so that a burst (a drained ring, a run of posted requests) can share batches. */
void gemmd_server_hold_dispatch(gemmd_server_t *srv);
void gemmd_server_release_dispatch(gemmd_server_t *srv);

/* Any thread: counts a GEMM request that a transport refused before it reached the
 * loop (bad message, failed validation), so gemmd_requests_total sees every answer. */
void gemmd_server_count_refused(gemmd_server_t *srv, gemmd_transport_t transport, int code,
                                uint64_t accepted_ns);

/* Whether health says SERVING: ready and not draining. */
int gemmd_server_serving(const gemmd_server_t *srv);
void gemmd_server_watch(gemmd_server_t *srv, gemmd_watcher_t *w);
void gemmd_server_unwatch(gemmd_server_t *srv, gemmd_watcher_t *w);

/* Weight operations; `done` runs on the loop thread with a gRPC code and message. */
typedef void (*gemmd_weight_done_fn)(void *ctx, int code, const char *message,
                                     const gemmd_weight_t *w);
/* Takes ownership of w (name set, refs 1). */
void gemmd_server_register_weight(gemmd_server_t *srv, gemmd_weight_t *w,
                                  gemmd_weight_done_fn done, void *ctx);
/* By id when id != 0, else by name; `done` runs once in-flight users are finished. */
void gemmd_server_unregister_weight(gemmd_server_t *srv, uint64_t id, const char *name,
                                    gemmd_weight_done_fn done, void *ctx);

/* Answers queued requests whose deadline passed with DEADLINE_EXCEEDED. */
void gemmd_server_expire(gemmd_server_t *srv);

/* Tells every watcher the current gemmd_server_serving(). */
void gemmd_server_notify_watchers(gemmd_server_t *srv);

/* The engine's `done` callback (ctx: the server). Engine thread, or the loop for a batch
 * run inline: answers what can be answered off the loop, tells the loop at once when the
 * batch's slot is already free (batch->slot_freed), then posts the batch back. */
void gemmd_server_engine_done(void *ctx, gemmd_batch_t *b);

/* Sets up a zeroed srv: the state above, the loop and its handles (wakeup, spin,
 * batch_delay, tick, sigterm, sigint; initialized, not started). No engine yet. Returns
 * GEMMD_OK, or GEMMD_EIO with nothing set up when the batch delay's timerfd cannot be made. */
int gemmd_server_init(gemmd_server_t *srv, const gemmd_config_t *cfg);

/* After uv_run has returned with every handle closed: runs what is still posted, closes
 * the engine, frees the weights and the loop. srv itself stays the caller's. */
void gemmd_server_teardown(gemmd_server_t *srv);

#endif /* GEMMD_DAEMON_SERVER_H_ */
