/* The first client of a process sets gRPC up: it picks gRPC core's poll poller, unless the
 * process chose one ($GRPC_POLL_STRATEGY) or started gRPC itself first, and it switches off
 * Abseil's lock-order tracking of gRPC's mutexes (Debian's build aborts on a lock-order
 * inversion; daemon/rpc_setup_test.c shows that it does without the switch). Each case runs
 * in a child of its own, since both are settings of the whole process. */
#include <grpc/grpc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/lib/gemmclient.h"
#include "client/testing/testing.h"
#include "third_party/system/absl_deadlock_detection_testing.h"

/* Opens (and closes) a gRPC client; a channel connects lazily, so no server is needed. */
static void open_one(void) {
  gemmd_client_t *c = NULL;
  gemmd_status_t st;
  CHECK(gemmd_client_open("127.0.0.1:1", NULL, &c, &st) == 0 && c != NULL, "open: %s", st.message);
  gemmd_client_close(c);
}

static void expect_strategy(const char *want) {
  const char *got = getenv("GRPC_POLL_STRATEGY");
  CHECK(want == NULL ? got == NULL : got != NULL && strcmp(got, want) == 0, "GRPC_POLL_STRATEGY is %s, want %s",
        got ? got : "(unset)", want ? want : "(unset)");
}

static void unset_by_caller(void) {
  unsetenv("GRPC_POLL_STRATEGY");
  open_one();
  expect_strategy("poll");
}

static void set_by_caller(void) {
  setenv("GRPC_POLL_STRATEGY", "epoll1", 1);
  open_one();
  expect_strategy("epoll1");
}

static void grpc_started_by_caller(void) {
  unsetenv("GRPC_POLL_STRATEGY");
  grpc_init();
  open_one();
  expect_strategy(NULL);
  grpc_shutdown();
}

static void lock_order_untracked(void) {
  open_one();
  gemmd_invert_grpc_lock_order();
}

static void in_child(const char *name, void (*body)(void)) {
  const pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: child status %d", name, status);
}

int main(void) {
  in_child("unset", unset_by_caller);
  in_child("set", set_by_caller);
  in_child("grpc started", grpc_started_by_caller);
  in_child("lock order untracked", lock_order_untracked);
  printf("poller_test: ok\n");
  return 0;
}
