/* The kernel choice by measured time (kernel_choice.h): signatures, the alternation of
 * measured runs, the decision by median, and the file that keeps decisions across starts. */
#include "daemon/kernel_choice.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/test_check.h"
#include "kernels/operand.h"

static gemmd_group_params_t group(uint32_t m, uint32_t n, uint32_t k, int out) {
  gemmd_group_params_t p;
  memset(&p, 0, sizeof p);
  p.m = m, p.n = n, p.k = k;
  p.a_dtype = p.b_dtype = GEMMD_DTYPE_FP8_E4M3;
  p.b_layout = GEMMD_SCALE_BLOCK_128X128;
  p.out_dtype = (uint8_t)out;
  p.a_offset = 1234; /* placement does not count */
  return p;
}

static void signatures(void) {
  gemmd_group_params_t a[3] = {group(4096, 2112, 7168, GEMMD_DTYPE_BF16), group(8, 4096, 4096, GEMMD_DTYPE_BF16),
                               group(8, 4096, 4096, GEMMD_DTYPE_BF16)};
  gemmd_group_params_t b[3] = {a[2], a[0], a[1]};
  b[0].a_offset = 99;
  CHECK(gemmd_kernel_signature(a, 3) == gemmd_kernel_signature(b, 3)); /* order and offsets */
  b[1].m = 3000;                                                        /* 3000 and 4096: one bucket */
  CHECK(gemmd_kernel_signature(a, 3) == gemmd_kernel_signature(b, 3));
  b[1].m = 4097;
  CHECK(gemmd_kernel_signature(a, 3) != gemmd_kernel_signature(b, 3));
  b[1] = a[0];
  b[2].out_dtype = GEMMD_DTYPE_FP16;
  CHECK(gemmd_kernel_signature(a, 3) != gemmd_kernel_signature(b, 3));
  CHECK(gemmd_kernel_signature(a, 2) != gemmd_kernel_signature(a, 3));
  gemmd_group_params_t one = group(1, 4096, 4096, GEMMD_DTYPE_BF16), eight = group(8, 4096, 4096, GEMMD_DTYPE_BF16);
  CHECK(gemmd_kernel_signature(&one, 1) == gemmd_kernel_signature(&eight, 1));
  CHECK(gemmd_kernel_signature(a, 0) != 0);
}

/* Three runs of each, alternating, gemmd's first; the lower median wins; nothing more is
 * measured after. */
static void decides(void) {
  gemmd_kernel_choices_t *c = gemmd_kernel_choices_create(3, 64);
  CHECK(c != NULL);
  const uint64_t sig = 42;
  const uint64_t own_ns[3] = {900, 100, 950}, lt_ns[3] = {500, 600, 550}; /* medians 900, 550 */
  int measuring;
  for (int i = 0; i < 6; i++) {
    const gemmd_kernel_t k = gemmd_kernel_choices_pick(c, sig, &measuring);
    CHECK(measuring);
    CHECK(k == (i % 2 == 0 ? GEMMD_KERNEL_OWN : GEMMD_KERNEL_CUBLASLT));
    gemmd_kernel_choices_record(c, sig, k, k == GEMMD_KERNEL_OWN ? own_ns[i / 2] : lt_ns[i / 2]);
  }
  for (int i = 0; i < 4; i++) {
    CHECK(gemmd_kernel_choices_pick(c, sig, &measuring) == GEMMD_KERNEL_CUBLASLT);
    CHECK(!measuring);
  }
  gemmd_kernel_choice_counts_t n = gemmd_kernel_choices_counts(c);
  CHECK(n.decided_cublaslt == 1 && n.decided_own == 0 && n.measuring == 0);

  /* Runs handed out but not yet timed (batches in flight): no more measured runs than asked. */
  const uint64_t sig2 = 43;
  int measured = 0;
  for (int i = 0; i < 10; i++) {
    gemmd_kernel_choices_pick(c, sig2, &measuring);
    measured += measuring;
  }
  CHECK(measured == 6);
  for (int i = 0; i < 3; i++) {
    gemmd_kernel_choices_record(c, sig2, GEMMD_KERNEL_OWN, 100);
    gemmd_kernel_choices_record(c, sig2, GEMMD_KERNEL_CUBLASLT, 100);
  }
  CHECK(gemmd_kernel_choices_pick(c, sig2, &measuring) == GEMMD_KERNEL_OWN); /* a tie: gemmd's */
  n = gemmd_kernel_choices_counts(c);
  CHECK(n.decided_cublaslt == 1 && n.decided_own == 1);

  /* Decided without measuring (cuBLASLt has no plan for it): never measured again, kept. */
  gemmd_kernel_choices_pick(c, 44, &measuring);
  CHECK(measuring);
  gemmd_kernel_choices_decide(c, 44, GEMMD_KERNEL_OWN);
  gemmd_kernel_choices_record(c, 44, GEMMD_KERNEL_CUBLASLT, 1); /* a late time changes nothing */
  for (int i = 0; i < 4; i++) {
    CHECK(gemmd_kernel_choices_pick(c, 44, &measuring) == GEMMD_KERNEL_OWN && !measuring);
  }
  n = gemmd_kernel_choices_counts(c);
  CHECK(n.decided_own == 2);
  gemmd_kernel_choices_free(c);
}

/* Past its capacity a table measures nothing new: those batches run gemmd's kernel. */
static void bounded(void) {
  gemmd_kernel_choices_t *c = gemmd_kernel_choices_create(1, 4);
  int measuring, measured = 0;
  for (uint64_t sig = 1; sig <= 100; sig++) {
    CHECK(gemmd_kernel_choices_pick(c, sig, &measuring) == GEMMD_KERNEL_OWN);
    measured += measuring;
  }
  CHECK(measured > 0 && measured <= 16);
  gemmd_kernel_choices_free(c);
}

static void persists(void) {
  char dir[] = "/tmp/kernel_choice_test.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[128];
  snprintf(path, sizeof path, "%s/kernel-choices", dir);
  gemmd_kernel_choices_t *c = gemmd_kernel_choices_create(1, 64);
  CHECK(gemmd_kernel_choices_load(c, path) == -ENOENT);
  CHECK(gemmd_kernel_choices_save(c, path) == 0); /* nothing decided: nothing written */
  CHECK(access(path, F_OK) != 0);
  int measuring;
  for (uint64_t sig = 7; sig <= 9; sig++) {
    for (int i = 0; i < 2; i++) {
      const gemmd_kernel_t k = gemmd_kernel_choices_pick(c, sig, &measuring);
      gemmd_kernel_choices_record(c, sig, k, k == GEMMD_KERNEL_CUBLASLT ? 100 * sig : 800);
    }
  }
  gemmd_kernel_choices_pick(c, 10, &measuring); /* undecided: not written */
  CHECK(gemmd_kernel_choices_save(c, path) == 1);
  CHECK(gemmd_kernel_choices_save(c, path) == 0);
  gemmd_kernel_choices_free(c);

  c = gemmd_kernel_choices_create(4, 64);
  CHECK(gemmd_kernel_choices_load(c, path) == 3);
  CHECK(gemmd_kernel_choices_pick(c, 7, &measuring) == GEMMD_KERNEL_CUBLASLT && !measuring);
  CHECK(gemmd_kernel_choices_pick(c, 8, &measuring) == GEMMD_KERNEL_OWN && !measuring); /* 800 = 800: gemmd's */
  CHECK(gemmd_kernel_choices_pick(c, 9, &measuring) == GEMMD_KERNEL_OWN && !measuring);
  gemmd_kernel_choices_pick(c, 10, &measuring);
  CHECK(measuring);
  gemmd_kernel_choices_free(c);

  /* A damaged file: bad lines are skipped, a foreign one is ignored. */
  FILE *f = fopen(path, "w");
  fputs("# gemmd kernel choices v1\nzzz own 1 2\n000000000000000b cublaslt 5 1\n000000000000000c maybe 1 2\n", f);
  fclose(f);
  c = gemmd_kernel_choices_create(1, 64);
  CHECK(gemmd_kernel_choices_load(c, path) == 1);
  CHECK(gemmd_kernel_choices_pick(c, 11, &measuring) == GEMMD_KERNEL_CUBLASLT);
  gemmd_kernel_choices_free(c);
  f = fopen(path, "w");
  fputs("something else\n000000000000000b cublaslt 5 1\n", f);
  fclose(f);
  c = gemmd_kernel_choices_create(1, 64);
  CHECK(gemmd_kernel_choices_load(c, path) == 0);
  gemmd_kernel_choices_free(c);
  unlink(path);
  rmdir(dir);
}

int main(void) {
  signatures();
  decides();
  bounded();
  persists();
  if (check_failures == 0) printf("kernel_choice_test: passed\n");
  return check_failures != 0;
}
