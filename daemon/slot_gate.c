#include "daemon/slot_gate.h"

void gemmd_slot_gate_init(gemmd_slot_gate_t *g, unsigned slots) {
  g->slots = slots;
  g->held = 0;
  g->n_early = 0;
}

/* The early slot with the fewest requests, or -1. */
static int smallest_early(const gemmd_slot_gate_t *g) {
  int best = -1;
  for (unsigned i = 0; i < g->n_early; i++) {
    if (best < 0 || g->early[i].requests < g->early[best].requests) best = (int)i;
  }
  return best;
}

static void drop_early(gemmd_slot_gate_t *g, unsigned i) { g->early[i] = g->early[--g->n_early]; }

int gemmd_slot_gate_open(const gemmd_slot_gate_t *g, uint32_t queued, int eager) {
  const unsigned free_slots = g->slots - g->held;
  if (free_slots == 0) return 0;
  if (eager || free_slots > g->n_early) return 1; /* a slot whose batch is done */
  const int e = smallest_early(g);
  return queued >= g->early[e].requests;
}

void gemmd_slot_gate_take(gemmd_slot_gate_t *g, uint32_t requests) {
  const unsigned free_slots = g->slots - g->held;
  g->held++;
  if (free_slots > g->n_early || g->n_early == 0) return;
  /* The slot came from the early ones: the largest that this batch covers, else any. */
  int pick = -1;
  for (unsigned i = 0; i < g->n_early; i++) {
    if (g->early[i].requests <= requests && (pick < 0 || g->early[i].requests > g->early[pick].requests)) {
      pick = (int)i;
    }
  }
  drop_early(g, (unsigned)(pick >= 0 ? pick : smallest_early(g)));
}

void gemmd_slot_gate_freed_early(gemmd_slot_gate_t *g, uint64_t batch_id, uint32_t requests) {
  g->held--;
  if (g->n_early < GEMMD_SLOT_GATE_MAX) {
    g->early[g->n_early++] = (gemmd_early_slot_t){batch_id, requests};
  }
}

void gemmd_slot_gate_done(gemmd_slot_gate_t *g, uint64_t batch_id, int freed_early) {
  if (!freed_early) {
    g->held--;
    return;
  }
  for (unsigned i = 0; i < g->n_early; i++) {
    if (g->early[i].batch_id == batch_id) {
      drop_early(g, i);
      return;
    }
  }
}
