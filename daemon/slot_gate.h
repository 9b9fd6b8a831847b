/* Which engine slot the next batch may take.
 *
 * A batch's slot comes back in one of two ways: with the batch itself, once the loop has it
 * back (done), or early, on the engine's thread, as soon as every request in it is answered
 * (engine.h). Early is good for a slot whose batch the clients do not wait on. But in the
 * closed loop of model workers, each answered client sends its next request some µs after
 * its answer: a batch formed the moment the slot comes back carries the few requests that
 * happen to be queued, and the returning clients wait for the next slot. With 64 workers on
 * an H100 that split batches from 15.2 to 8.4 requests and throughput from 110k to 71k
 * req/s (docs/bench/serving.md, 2026-12-06).
 *
 * So a slot that came back early is taken at once only by a batch at least as large as the
 * one that gave it back, and otherwise when that batch is done; a slot that came back with
 * its batch is taken by any batch. Not thread-safe: the loop's. */
#ifndef GEMMD_DAEMON_SLOT_GATE_H_
#define GEMMD_DAEMON_SLOT_GATE_H_

#include <stdint.h>

enum { GEMMD_SLOT_GATE_MAX = 16 };

typedef struct {
  uint64_t batch_id;
  uint32_t requests; /* the batch that gave the slot back early */
} gemmd_early_slot_t;

typedef struct {
  unsigned slots; /* the engine's */
  unsigned held;  /* slots with a batch in them */
  unsigned n_early;
  gemmd_early_slot_t early[GEMMD_SLOT_GATE_MAX]; /* free slots whose batches are not done */
} gemmd_slot_gate_t;

void gemmd_slot_gate_init(gemmd_slot_gate_t *g, unsigned slots);

/* Whether a batch formed from `queued` waiting requests may take a slot now; `eager` (the
 * daemon is draining) takes any free slot. */
int gemmd_slot_gate_open(const gemmd_slot_gate_t *g, uint32_t queued, int eager);

/* A batch of `requests` took a slot that gemmd_slot_gate_open allowed. */
void gemmd_slot_gate_take(gemmd_slot_gate_t *g, uint32_t requests);

/* The slot of batch `batch_id` (of `requests` requests) came back before the batch. */
void gemmd_slot_gate_freed_early(gemmd_slot_gate_t *g, uint64_t batch_id, uint32_t requests);

/* Batch `batch_id` is done; `freed_early`: its slot came back before. */
void gemmd_slot_gate_done(gemmd_slot_gate_t *g, uint64_t batch_id, int freed_early);

#endif  // GEMMD_DAEMON_SLOT_GATE_H_
