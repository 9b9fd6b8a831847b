/* One submission-ring entry of a shared-memory client (docs/shm-protocol.md §2, §4), checked
 * as the loop checks it (shm_check.h), against a data region and a registry of two weights.
 *
 * Input: the 128-byte entry (zero-padded when shorter), one byte of settings (bit 0: the
 * engine quantizes A itself; bit 1: the weight budget is nearly spent; bit 2: a version-2
 * session, whose entries may put A, its scales and D in a region of the client's own: here
 * the same bytes as the data region, as region 1), then the bytes of the data region,
 * which starts at offset 6144 (the header and two rings of 8 entries).
 * Everything below the data region is poisoned: the checks must keep every operand, scale,
 * name and D inside the region, and the fuzzer reads (and for D writes) what they let
 * through, then prepares the operands as the transport would. */
#include <stdlib.h>
#include <string.h>

#include "daemon/request.h"
#include "daemon/shm_check.h"
#include "daemon/status.h"
#include "fuzz/fuzz_request.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/fuzz_util.h"
#include "kernels/errors.h"

enum { DATA_OFFSET = GEMMD_SHM_HEADER_BYTES + 2 * GEMMD_SHM_MIN_ENTRIES * GEMMD_SHM_ENTRY_BYTES };

/* The registry's weights: w1 16 x 32 E4M3, w2 130 x 256 E4M3 with 128x128 scales. */
static const uint8_t w1_data[16 * 32] = {0x38};
static const uint8_t w2_data[130 * 256] = {0x38};
static const float w2_scales[2 * 2] = {1.0f, 0.5f, 2.0f, 0.25f};

static void add_weight(gemmd_weights_t *ws, const char *name, uint32_t n, uint32_t k,
                       const uint8_t *data, gemmd_scale_layout_t layout, const float *scales) {
  gemmd_weight_t *w = calloc(1, sizeof *w);
  fuzz_check(w != NULL && (w->name = strdup(name)) != NULL);
  w->n = n;
  w->k = k;
  w->dtype = GEMMD_DTYPE_FP8_E4M3;
  w->scale_layout = layout;
  w->data = data;
  w->scales = scales;
  w->bytes = (uint64_t)n * k + sizeof(float) * gemmd_scale_count(layout, n, k);
  w->refs = 1;
  char msg[256];
  fuzz_check(gemmd_weights_reserve(ws, w, msg, sizeof msg) == 0);
  gemmd_weights_activate(ws, w);
}

static void gemm(const gemmd_shm_region_t *rg, const gemmd_shm_region_t *region1,
                 const gemmd_shm_sqe_t *e, const gemmd_limits_t *lim, const gemmd_weights_t *ws,
                 int quantizes_a) {
  char msg[512];
  gemmd_request_t r;
  gemmd_request_init(&r);
  gemmd_gemm_operands_t ops;
  uint64_t d_bytes = 0;
  /* As the server resolves region ids: 0 the arena, 1 the region, others unknown. */
  if (e->a_region > 1 || e->a_scales_region > 1 || e->d_region > 1) return;
  const gemmd_shm_places_t at = {e->a_region ? region1 : rg, e->a_scales_region ? region1 : rg,
                                 e->d_region ? region1 : rg};
  const int code = gemmd_shm_build_gemm(rg, &at, e, lim, ws, &r, &ops, &d_bytes, msg, sizeof msg);
  if (code != GEMMD_CODE_OK) {
    fuzz_check_message(msg, sizeof msg);
  } else {
    fuzz_touch_operand(&ops.a);
    if (ops.inline_b) fuzz_touch_operand(&ops.b);
    fuzz_check(r.n > 0 && d_bytes <= e->d_capacity);
    memset((uint8_t *)at.d->arena + e->d_offset, 0, d_bytes); /* where the engine writes D */
    const char *failed = "";
    if (gemmd_request_prepare_operands(&r, &ops, quantizes_a, &failed) == GEMMD_OK) fuzz_touch_request(&r);
  }
  gemmd_request_release(&r);
}

static void register_weight(const gemmd_shm_region_t *rg, const gemmd_shm_sqe_t *e,
                            const gemmd_limits_t *lim, const gemmd_weights_t *ws) {
  char msg[512], name[256];
  gemmd_operand_t w;
  const int code = gemmd_shm_check_register(rg, e, lim, ws, &w, name, msg, sizeof msg);
  if (code != GEMMD_CODE_OK) {
    fuzz_check_message(msg, sizeof msg);
    return;
  }
  fuzz_check(strlen(name) == e->d_capacity);
  fuzz_touch_operand(&w);
  /* What the pool does next: the weight's own bytes (FP8 kept, others quantized). */
  gemmd_weight_t *made = NULL;
  if (gemmd_weight_from_operand(&w, NULL, NULL, NULL, &made) == GEMMD_OK) {
    const gemmd_operand_t op = gemmd_weight_operand(made);
    fuzz_touch_operand(&op);
    gemmd_weight_free(made);
  }
}

static void weight_info(const gemmd_shm_region_t *rg, const gemmd_shm_sqe_t *e, const gemmd_weights_t *ws) {
  char msg[512];
  const gemmd_weight_t *w = NULL;
  const int code = gemmd_shm_find_weight(rg, e, ws, &w, msg, sizeof msg);
  fuzz_check((code == GEMMD_CODE_OK) == (w != NULL));
  if (code != GEMMD_CODE_OK) fuzz_check_message(msg, sizeof msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gemmd_shm_sqe_t e;
  memset(&e, 0, sizeof e);
  memcpy(&e, data, size < sizeof e ? size : sizeof e);
  const uint8_t settings = size > sizeof e ? data[sizeof e] : 0;
  const size_t data_bytes = size > sizeof e + 1 ? size - sizeof e - 1 : 0;

  /* The arena: only the data region may be touched. */
  uint8_t *arena = malloc(DATA_OFFSET + data_bytes);
  fuzz_check(arena != NULL);
  if (data_bytes) memcpy(arena + DATA_OFFSET, data + sizeof e + 1, data_bytes);
  FUZZ_POISON(arena, DATA_OFFSET);
  const gemmd_shm_region_t rg = {arena, DATA_OFFSET, data_bytes, 0};
  const gemmd_shm_region_t region1 = {arena + DATA_OFFSET, 0, data_bytes, 1};

  gemmd_weights_t ws;
  gemmd_weights_init(&ws, 1ull << 30);
  add_weight(&ws, "w1", 16, 32, w1_data, GEMMD_SCALE_NONE, NULL);
  add_weight(&ws, "w2", 130, 256, w2_data, GEMMD_SCALE_BLOCK_128X128, w2_scales);
  if (settings & 2) ws.budget = ws.bytes + 1024;
  const gemmd_limits_t lim = {65536, 65536, 65536};

  if (gemmd_shm_reserved_clear(&e, settings & 4 ? GEMMD_SHM_VERSION_2 : GEMMD_SHM_VERSION)) {
    switch (e.opcode) {
      case GEMMD_SHM_OP_GEMM:
        gemm(&rg, &region1, &e, &lim, &ws, settings & 1);
        break;
      case GEMMD_SHM_OP_REGISTER_WEIGHT:
        register_weight(&rg, &e, &lim, &ws);
        break;
      case GEMMD_SHM_OP_WEIGHT_INFO:
        weight_info(&rg, &e, &ws);
        break;
      default: /* UNREGISTER_WEIGHT names a weight by id alone; others are refused */
        break;
    }
  }
  gemmd_weights_close(&ws);
  FUZZ_UNPOISON(arena, DATA_OFFSET);
  free(arena);
  return 0;
}
