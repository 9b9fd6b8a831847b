/* Start-up loading: the weights of --weight-dir and --preload, read on a thread of its own
 * while gemmd already listens. Until every file is in, /healthz and the liveness of gRPC
 * answer, health says NOT_SERVING, /readyz answers 503 "loading", and GEMMs and
 * registrations get UNAVAILABLE; a supervisor sees progress in the log (a line per file)
 * and in gemmd_startup_* on /metrics.
 *
 * Each weight is read (and --preload-filter / --preload-prefix applied) on the loader's
 * thread, reserved on the loop (the registry is the loop's), copied to the engine on the
 * loader's thread, then made usable on the loop: one at a time, so the budget check comes
 * before the device copy. */
#ifndef GEMMD_DAEMON_LOADER_H_
#define GEMMD_DAEMON_LOADER_H_

#include "daemon/server.h"

/* Loop thread. Starts loading (srv->loading = 1, srv->ready = 0); when it ends, on the
 * loop: done(srv, ok) with ok = 0 when the weight directory or a --preload entry could not
 * be read (gemmd then stops with exit code 1, as before it listened). Nothing to load:
 * done runs at once. Returns 0, or GEMMD_ENOMEM / GEMMD_EIO when no thread could start. */
int gemmd_loader_start(gemmd_server_t *srv, void (*done)(gemmd_server_t *srv, int ok));

/* Any thread: the loader skips what is left (a drain started). done still runs. */
void gemmd_loader_cancel(gemmd_server_t *srv);

#endif /* GEMMD_DAEMON_LOADER_H_ */
