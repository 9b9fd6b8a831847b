/* One mapping per IPC handle: a second region of a handle shares the first's mapping, the
 * last to let go closes it, a failed open leaves nothing behind, and releasing an unknown
 * address is refused. */
#include "daemon/ipc_maps.h"
#include "daemon/test_check.h"

#include <stdio.h>
#include <string.h>

typedef struct {
  int opens, closes, fail_next;
  char mem[64]; /* a distinct address per handle the test uses */
} fake_t;

static int fake_open(void *ctx, const uint8_t handle[GEMMD_IPC_HANDLE_BYTES], void **p) {
  fake_t *f = ctx;
  if (f->fail_next) {
    f->fail_next = 0;
    return 201; /* as cudaErrorInvalidValue might be */
  }
  f->opens++;
  *p = &f->mem[(handle[0] + handle[1]) % 64];
  return 0;
}

static void fake_close(void *ctx, void *p) {
  (void)p;
  ((fake_t *)ctx)->closes++;
}

int main(void) {
  fake_t f;
  memset(&f, 0, sizeof f);
  gemmd_ipc_maps_t m;
  gemmd_ipc_maps_init(&m, fake_open, fake_close, &f);
  uint8_t h1[GEMMD_IPC_HANDLE_BYTES] = {1}, h2[GEMMD_IPC_HANDLE_BYTES] = {2};
  void *a = NULL, *b = NULL, *c = NULL;
  CHECK(gemmd_ipc_maps_acquire(&m, h1, &a) == 0);
  CHECK(gemmd_ipc_maps_acquire(&m, h1, &b) == 0); /* another connection, the same block */
  CHECK(a == b && f.opens == 1);
  CHECK(gemmd_ipc_maps_acquire(&m, h2, &c) == 0);
  CHECK(c != a && f.opens == 2 && gemmd_ipc_maps_count(&m) == 2);
  CHECK(gemmd_ipc_maps_release(&m, a) == 0 && f.closes == 0); /* the other still holds it */
  CHECK(gemmd_ipc_maps_release(&m, b) == 0 && f.closes == 1);
  CHECK(gemmd_ipc_maps_release(&m, b) == -1); /* gone */
  CHECK(gemmd_ipc_maps_count(&m) == 1);
  /* a failed open stores nothing: the next try opens again */
  uint8_t h3[GEMMD_IPC_HANDLE_BYTES] = {3};
  f.fail_next = 1;
  void *d = NULL;
  CHECK(gemmd_ipc_maps_acquire(&m, h3, &d) == 201);
  CHECK(gemmd_ipc_maps_count(&m) == 1);
  CHECK(gemmd_ipc_maps_acquire(&m, h3, &d) == 0 && f.opens == 3);
  /* many handles: the table grows */
  for (int i = 4; i < 60; i++) {
    uint8_t h[GEMMD_IPC_HANDLE_BYTES] = {0};
    h[1] = (uint8_t)i;
    void *p = NULL;
    CHECK(gemmd_ipc_maps_acquire(&m, h, &p) == 0);
  }
  CHECK(gemmd_ipc_maps_count(&m) == 58);
  gemmd_ipc_maps_destroy(&m); /* closes what is left */
  CHECK(f.closes == 1 + 58);
  if (check_failures == 0) printf("ipc_maps_test: ok\n");
  return check_failures != 0;
}
