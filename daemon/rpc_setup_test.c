/* gemmd_rpc_process_setup: the poller gRPC will read, and gRPC's mutexes free of Abseil's
 * lock-order tracking (Debian's build aborts the process on a lock-order inversion, and pays
 * for the tracking on every lock). Each case runs in a child of its own, since both are
 * settings of the whole process. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/config.h"
#include "daemon/rpc_grpc.h"
#include "daemon/test_check.h"
#include "third_party/system/absl_deadlock_detection_testing.h"

static void setup_with(const char *poller) {
  gemmd_config_t cfg;
  gemmd_config_defaults(&cfg);
  if (poller != NULL) snprintf(cfg.grpc_poller, sizeof cfg.grpc_poller, "%s", poller);
  gemmd_rpc_process_setup(&cfg);
}

/* Returns the child's wait status; body's failed CHECKs exit 1. */
static int in_child(void (*body)(void)) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    check_failures = 0; /* the parent's count so far is not this child's */
    body();
    _exit(check_failures ? 1 : 0);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return status;
}

static int exited_ok(int status) { return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

static void tracked(void) { gemmd_invert_grpc_lock_order(); }

static void untracked(void) {
  setup_with(NULL);
  gemmd_invert_grpc_lock_order();
}

static void poller_auto_unset(void) {
  unsetenv("GRPC_POLL_STRATEGY");
  setup_with(NULL);
  const char *got = getenv("GRPC_POLL_STRATEGY");
  CHECK(got != NULL && strcmp(got, "poll") == 0);
}

static void poller_auto_kept(void) {
  setenv("GRPC_POLL_STRATEGY", "epoll1", 1);
  setup_with(NULL);
  const char *got = getenv("GRPC_POLL_STRATEGY");
  CHECK(got != NULL && strcmp(got, "epoll1") == 0);
}

static void poller_named(void) {
  setenv("GRPC_POLL_STRATEGY", "poll", 1);
  setup_with("epoll1");
  const char *got = getenv("GRPC_POLL_STRATEGY");
  CHECK(got != NULL && strcmp(got, "epoll1") == 0);
}

int main(void) {
  /* The control: this build of Abseil tracks lock order, so the inversion aborts. If it
   * ever stops doing so, gemmd_absl_deadlock_detection_off has nothing left to switch off
   * and this case says so. */
  const int control = in_child(tracked);
  if (!(WIFSIGNALED(control) && WTERMSIG(control) == SIGABRT)) {
    fprintf(stderr, "rpc_setup_test: Abseil did not abort on a lock-order inversion (status %d): "
                    "its tracking is off by default here\n", control);
    check_failures++;
  }
  CHECK(exited_ok(in_child(untracked)));
  CHECK(exited_ok(in_child(poller_auto_unset)));
  CHECK(exited_ok(in_child(poller_auto_kept)));
  CHECK(exited_ok(in_child(poller_named)));
  if (check_failures == 0) printf("rpc_setup_test: ok\n");
  return check_failures ? 1 : 0;
}
