/* Which GEMM implementation runs a batch, chosen by measured time (--gemm-kernel measured).
 *
 * A batch's signature is the multiset of its groups' shapes, each with its rows rounded up
 * to a power of two (≥ 8), its N, K, dtypes and layouts: batches of one signature cost about
 * the same. For a signature not yet decided, batches alternate between gemmd's own kernel
 * and cuBLASLt (both give correct results; only speed differs) until each has run
 * `samples` times; then the one with the lower median GEMM time is kept for good. The
 * decisions persist in a small text file beside --weight-dir, so a restart does not
 * measure again. Thread-safe: the engine's stager picks, its completer records.
 */
#ifndef GEMMD_DAEMON_KERNEL_CHOICE_H_
#define GEMMD_DAEMON_KERNEL_CHOICE_H_

#include <stddef.h>
#include <stdint.h>

#include "kernels/group_table.h"

typedef enum { GEMMD_KERNEL_OWN = 0, GEMMD_KERNEL_CUBLASLT = 1 } gemmd_kernel_t;

typedef struct gemmd_kernel_choices_s gemmd_kernel_choices_t;

/* samples: runs of each kernel before a signature is decided (1..16); capacity: the
 * signatures kept (past it, new ones run gemmd's kernel unmeasured). NULL without memory. */
gemmd_kernel_choices_t *gemmd_kernel_choices_create(unsigned samples, unsigned capacity);
void gemmd_kernel_choices_free(gemmd_kernel_choices_t *c);

uint64_t gemmd_kernel_signature(const gemmd_group_params_t *table, uint32_t n_groups);

/* The kernel for the next batch of this signature; *measuring is set when this batch is
 * one of the measured runs (its time is then to be given to _record). */
gemmd_kernel_t gemmd_kernel_choices_pick(gemmd_kernel_choices_t *c, uint64_t sig, int *measuring);
void gemmd_kernel_choices_record(gemmd_kernel_choices_t *c, uint64_t sig, gemmd_kernel_t k, uint64_t gemm_ns);
/* Decides a signature without measuring (a kernel that cannot run it). */
void gemmd_kernel_choices_decide(gemmd_kernel_choices_t *c, uint64_t sig, gemmd_kernel_t k);

typedef struct {
  unsigned decided_own, decided_cublaslt, measuring;
} gemmd_kernel_choice_counts_t;
gemmd_kernel_choice_counts_t gemmd_kernel_choices_counts(gemmd_kernel_choices_t *c);

/* The file: one line per decided signature, "<signature hex> own|cublaslt <own ns> <cuBLASLt ns>",
 * after a first line "# gemmd kernel choices v1". _save writes it whole (a temporary file,
 * fsync, rename) when something was decided since the last save: 1 written, 0 nothing to
 * write, or a negative errno. _load takes what it can read: the number of decisions
 * loaded, or a negative errno (-ENOENT: no file yet); malformed lines are skipped. */
int gemmd_kernel_choices_save(gemmd_kernel_choices_t *c, const char *path);
int gemmd_kernel_choices_load(gemmd_kernel_choices_t *c, const char *path);

#endif /* GEMMD_DAEMON_KERNEL_CHOICE_H_ */
