/* The slot gate: a slot that came back with its batch goes to any batch; one that came back
 * early goes at once only to a batch at least as large as the one that gave it back, else
 * when that batch is done; draining takes any free slot; no slot is lost or made up. */
#include "daemon/slot_gate.h"
#include "daemon/test_check.h"

#include <stdio.h>

static void plain_slots(void) {
  gemmd_slot_gate_t g;
  gemmd_slot_gate_init(&g, 2);
  CHECK(gemmd_slot_gate_open(&g, 1, 0));
  gemmd_slot_gate_take(&g, 1);
  gemmd_slot_gate_take(&g, 1);
  CHECK(!gemmd_slot_gate_open(&g, 100, 0));
  CHECK(!gemmd_slot_gate_open(&g, 100, 1)); /* draining takes only free slots */
  gemmd_slot_gate_done(&g, 1, 0);
  CHECK(gemmd_slot_gate_open(&g, 1, 0));
}

static void early_slot_waits_for_its_clients(void) {
  gemmd_slot_gate_t g;
  gemmd_slot_gate_init(&g, 1);
  gemmd_slot_gate_take(&g, 8); /* batch 7, of 8 requests */
  gemmd_slot_gate_freed_early(&g, 7, 8);
  CHECK(!gemmd_slot_gate_open(&g, 3, 0)); /* 3 queued: the other 5 clients are on their way */
  CHECK(gemmd_slot_gate_open(&g, 3, 1));  /* unless draining */
  CHECK(gemmd_slot_gate_open(&g, 8, 0));  /* all 8 are back */
  gemmd_slot_gate_done(&g, 7, 1);         /* or the batch is done: any batch may go */
  CHECK(gemmd_slot_gate_open(&g, 1, 0));
  gemmd_slot_gate_take(&g, 1);
  CHECK(!gemmd_slot_gate_open(&g, 1000, 0));
}

static void early_slot_taken_then_done(void) {
  gemmd_slot_gate_t g;
  gemmd_slot_gate_init(&g, 1);
  gemmd_slot_gate_take(&g, 4);
  gemmd_slot_gate_freed_early(&g, 3, 4);
  CHECK(gemmd_slot_gate_open(&g, 5, 0));
  gemmd_slot_gate_take(&g, 5); /* the early slot is used... */
  gemmd_slot_gate_done(&g, 3, 1); /* ...so its batch's done frees nothing more */
  CHECK(!gemmd_slot_gate_open(&g, 100, 0));
  CHECK(g.held == 1 && g.n_early == 0);
}

static void mixed_slots(void) {
  gemmd_slot_gate_t g;
  gemmd_slot_gate_init(&g, 3);
  gemmd_slot_gate_take(&g, 2);  /* batch 1 */
  gemmd_slot_gate_take(&g, 10); /* batch 2 */
  gemmd_slot_gate_take(&g, 6);  /* batch 3 */
  gemmd_slot_gate_freed_early(&g, 2, 10);
  gemmd_slot_gate_freed_early(&g, 3, 6);
  CHECK(!gemmd_slot_gate_open(&g, 5, 0));
  CHECK(gemmd_slot_gate_open(&g, 6, 0));
  gemmd_slot_gate_take(&g, 7); /* takes batch 3's slot (the largest it covers) */
  CHECK(g.n_early == 1 && g.early[0].batch_id == 2);
  CHECK(!gemmd_slot_gate_open(&g, 9, 0));
  gemmd_slot_gate_done(&g, 1, 0); /* a plain slot comes back: any batch */
  CHECK(gemmd_slot_gate_open(&g, 1, 0));
  gemmd_slot_gate_take(&g, 1);
  CHECK(!gemmd_slot_gate_open(&g, 9, 0));
  gemmd_slot_gate_done(&g, 2, 1);
  gemmd_slot_gate_done(&g, 3, 1);
  CHECK(gemmd_slot_gate_open(&g, 1, 0));
  CHECK(g.held == 2 && g.n_early == 0);
}

int main(void) {
  plain_slots();
  early_slot_waits_for_its_clients();
  early_slot_taken_then_done();
  mixed_slots();
  if (check_failures == 0) printf("slot_gate_test: ok\n");
  return check_failures != 0;
}
