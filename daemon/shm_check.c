/* Checks of HELLOs and ring entries. See shm_check.h and docs/shm-protocol.md. */
#include "daemon/shm_check.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "daemon/status.h"

/* ---- HELLO ------------------------------------------------------------------------------ */

int gemmd_shm_hello_parse(const void *msg_bytes, size_t len, gemmd_shm_hello_t *out, char *msg,
                          size_t n) {
  gemmd_shm_hello_t hello;
  if (len != sizeof hello || memcmp(msg_bytes, GEMMD_SHM_MAGIC, 8) != 0) {
    snprintf(msg, n, "expected a 32-byte GEMMDSH1 HELLO (docs/shm-protocol.md)");
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  memcpy(&hello, msg_bytes, sizeof hello);
  if (hello.version != GEMMD_SHM_VERSION && hello.version != GEMMD_SHM_VERSION_2) {
    snprintf(msg, n, "protocol version %u is not served; this gemmd speaks versions %u and %u",
             hello.version, GEMMD_SHM_VERSION, GEMMD_SHM_VERSION_2);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (hello.flags != 0 || hello.reserved != 0) {
    snprintf(msg, n, "HELLO flags (%u) and reserved (%u) must be 0 in version %u", hello.flags,
             hello.reserved, hello.version);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  *out = hello;
  return GEMMD_CODE_OK;
}

int gemmd_shm_hello_geometry(const gemmd_shm_hello_t *h, uint64_t default_arena_bytes,
                             uint64_t *bytes, uint32_t *entries, char *msg, size_t n) {
  const uint64_t b = h->arena_bytes ? h->arena_bytes : default_arena_bytes;
  const uint32_t e = h->sq_entries ? h->sq_entries : GEMMD_SHM_DEFAULT_ENTRIES;
  if (e < GEMMD_SHM_MIN_ENTRIES || e > GEMMD_SHM_MAX_ENTRIES || (e & (e - 1)) != 0) {
    snprintf(msg, n, "ring entries %u must be a power of two from %d to %d", e,
             GEMMD_SHM_MIN_ENTRIES, GEMMD_SHM_MAX_ENTRIES);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  const uint64_t min_bytes = GEMMD_SHM_HEADER_BYTES + 2ull * e * GEMMD_SHM_ENTRY_BYTES + 4096;
  if (b < min_bytes || b > (1ull << 36) || b % 4096 != 0) {
    snprintf(msg, n, "arena of %" PRIu64 " bytes: it must be a multiple of 4096 from %" PRIu64
             " to 64 GiB", b, min_bytes);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  *bytes = b;
  *entries = e;
  return GEMMD_CODE_OK;
}

/* Whether len bytes at p are all 0 (reserved fields). */
static int all_zero(const uint8_t *p, size_t len) {
  for (size_t i = 0; i < len; i++) {
    if (p[i] != 0) return 0;
  }
  return 1;
}

/* ---- Control messages (version 2) ------------------------------------------------------- */

int gemmd_shm_ctl_parse(const void *msg_bytes, size_t len, int truncated, gemmd_shm_ctl_t *out,
                        char *msg, size_t n) {
  gemmd_shm_ctl_t m;
  if (len != sizeof m || truncated) {
    snprintf(msg, n, "a control message is %zu bytes with at most one fd", sizeof m);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  memcpy(&m, msg_bytes, sizeof m);
  if (m.reserved0 != 0 || !all_zero(m.reserved1, sizeof m.reserved1)) {
    snprintf(msg, n, "control message reserved bytes must be 0");
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (m.op != GEMMD_SHM_CTL_REGION_OPEN && m.op != GEMMD_SHM_CTL_REGION_CLOSE) {
    snprintf(msg, n, "unknown control op %u", m.op);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (m.op == GEMMD_SHM_CTL_REGION_OPEN && m.kind != GEMMD_SHM_REGION_FD &&
      m.kind != GEMMD_SHM_REGION_CUDA_IPC) {
    snprintf(msg, n, "region kind %u is neither %d (fd) nor %d (CUDA IPC)", m.kind,
             GEMMD_SHM_REGION_FD, GEMMD_SHM_REGION_CUDA_IPC);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  *out = m;
  return GEMMD_CODE_OK;
}

/* ---- Ring entries ----------------------------------------------------------------------- */

int gemmd_shm_in_data(const gemmd_shm_region_t *rg, uint64_t offset, uint64_t len) {
  return offset >= rg->data_offset && len <= rg->data_bytes &&
         offset - rg->data_offset <= rg->data_bytes - len;
}

int gemmd_shm_reserved_clear(const gemmd_shm_sqe_t *e, uint32_t version) {
  if (e->reserved0 != 0) return 0;
  if (version < GEMMD_SHM_VERSION_2 && (e->a_region | e->a_scales_region | e->d_region) != 0) {
    return 0;
  }
  return all_zero(e->reserved1, sizeof e->reserved1);
}

/* An operand as an entry describes it. An entry carries no byte or scale counts of its
 * own: what came is what the shape needs (nothing for an unknown dtype or layout, which
 * validation refuses before anything is read). */
static gemmd_matrix_in_t matrix_in_entry(const char *what, gemmd_operand_role_t role,
                                         uint32_t rows, uint32_t cols, int dtype, int layout) {
  const size_t esz = gemmd_dtype_is_valid(dtype) ? gemmd_dtype_size((gemmd_dtype_t)dtype) : 0;
  const size_t ns = gemmd_scale_layout_is_valid(layout)
                        ? gemmd_scale_count((gemmd_scale_layout_t)layout, rows, cols)
                        : 0;
  const gemmd_matrix_in_t in = {what, role, rows, cols, dtype, layout,
                                (size_t)((uint64_t)rows * cols * esz), ns};
  return in;
}

/* "the data region" or "region N", for messages. */
static const char *place_name(const gemmd_shm_region_t *rg, char *buf, size_t n) {
  if (rg->id == 0) return "the data region";
  snprintf(buf, n, "region %u", rg->id);
  return buf;
}

/* A validated operand's bytes at `off` in rg and its scales at `scales_off` in srg, inside
 * them and aligned for their elements. Fills *op. */
static int locate_in_arena(const gemmd_shm_region_t *rg, const gemmd_shm_region_t *srg,
                           const gemmd_matrix_in_t *in, uint64_t off, uint64_t scales_off,
                           gemmd_operand_t *op, char *msg, size_t n) {
  const char *what = in->what;
  const uint64_t bytes = in->data_bytes;
  const size_t ns = in->n_scales;
  char where[32];
  if (!gemmd_shm_in_data(rg, off, bytes)) {
    snprintf(msg, n, "%s: %" PRIu64 " bytes at offset %" PRIu64 " are outside %s", what, bytes,
             off, place_name(rg, where, sizeof where));
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  /* Read as 2- or 4-byte values when gemmd quantizes them: aligned, as scales are. */
  const size_t esz = gemmd_dtype_size((gemmd_dtype_t)in->dtype);
  if (off % esz != 0) {
    snprintf(msg, n, "%s offset %" PRIu64 " is not %zu-byte aligned (%s)", what, off, esz,
             gemmd_dtype_name((gemmd_dtype_t)in->dtype));
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (ns > 0 && scales_off % 4 != 0) {
    snprintf(msg, n, "%s.scales offset %" PRIu64 " is not 4-byte aligned", what, scales_off);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  if (ns > 0 && !gemmd_shm_in_data(srg, scales_off, 4 * (uint64_t)ns)) {
    snprintf(msg, n, "%s.scales: %zu floats at %" PRIu64 " outside %s", what, ns, scales_off,
             place_name(srg, where, sizeof where));
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  *op = (gemmd_operand_t){in->rows, in->cols, in->cols, (gemmd_dtype_t)in->dtype, rg->arena + off,
                          (gemmd_scale_layout_t)in->layout,
                          ns ? (const float *)(const void *)(srg->arena + scales_off) : NULL};
  return GEMMD_CODE_OK;
}

/* A GEMM entry, for the request builder's locate hook. */
typedef struct {
  const gemmd_shm_region_t *rg;
  const gemmd_shm_places_t *at;
  const gemmd_shm_sqe_t *e;
} gemm_entry_t;

/* The locate hook of a GEMM entry: A's or inline B's offsets, by role. */
static int locate_in_entry(const void *ctx, const gemmd_matrix_in_t *in, gemmd_operand_t *op,
                           char *msg, size_t n) {
  const gemm_entry_t *g = ctx;
  if (in->role == GEMMD_OPERAND_A) {
    return locate_in_arena(g->at->a, g->at->a_scales, in, g->e->a_offset, g->e->a_scales_offset,
                           op, msg, n);
  }
  return locate_in_arena(g->rg, g->rg, in, g->e->b_offset, g->e->b_scales_offset, op, msg, n);
}

int gemmd_shm_build_gemm(const gemmd_shm_region_t *rg, const gemmd_shm_places_t *at,
                         const gemmd_shm_sqe_t *e, const gemmd_limits_t *lim,
                         const gemmd_weights_t *weights, gemmd_request_t *r,
                         gemmd_gemm_operands_t *ops, uint64_t *d_bytes, char *msg, size_t n) {
  const gemmd_shm_places_t in_arena = {rg, rg, rg};
  if (at == NULL) at = &in_arena;
  const gemm_entry_t entry = {rg, at, e};
  gemmd_gemm_desc_t d = {
      .request_id = e->request_id,
      .a = matrix_in_entry("a", GEMMD_OPERAND_A, e->m, e->k, e->a_dtype, e->a_layout),
      .out_dtype = e->out_dtype,
      .b_kind = GEMMD_B_NONE,
      .locate = locate_in_entry,
      .locate_ctx = &entry};
  char no_b[64];
  if (e->b_source == GEMMD_SHM_B_WEIGHT) {
    d.b_kind = GEMMD_B_WEIGHT_ID;
    d.weight_id = e->weight_id;
  } else if (e->b_source == GEMMD_SHM_B_INLINE) {
    d.b_kind = GEMMD_B_INLINE;
    d.b = matrix_in_entry("b", GEMMD_OPERAND_B, e->n, e->k, e->b_dtype, e->b_layout);
  } else {
    snprintf(no_b, sizeof no_b, "B source %u is neither 0 (weight) nor 1 (inline)", e->b_source);
    d.no_b = no_b;
  }
  /* A weight is looked up here, for its N, which D's bounds need. */
  const int code = gemmd_request_build(r, &d, lim, weights, ops, msg, n);
  if (code) return code;
  *d_bytes = (uint64_t)e->m * r->n * gemmd_dtype_size(r->out_dtype);
  if (e->d_capacity < *d_bytes || !gemmd_shm_in_data(at->d, e->d_offset, *d_bytes)) {
    char where[32];
    snprintf(msg, n, "D needs %" PRIu64 " bytes inside %s at offset %" PRIu64
             " (capacity given %" PRIu64 ")", *d_bytes, place_name(at->d, where, sizeof where),
             e->d_offset, e->d_capacity);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  return GEMMD_CODE_OK;
}

int gemmd_shm_check_register(const gemmd_shm_region_t *rg, const gemmd_shm_sqe_t *e,
                             const gemmd_limits_t *lim, const gemmd_weights_t *weights,
                             gemmd_operand_t *w, char name[256], char *msg, size_t n) {
  const gemmd_matrix_in_t in =
      matrix_in_entry("weight", GEMMD_OPERAND_B, e->m, e->k, e->a_dtype, e->a_layout);
  int code = gemmd_validate_matrix(&in, lim, msg, n);
  if (code) return code;
  code = locate_in_arena(rg, rg, &in, e->a_offset, e->a_scales_offset, w, msg, n);
  if (code) return code;
  if (e->d_capacity == 0 || e->d_capacity > 255 || !gemmd_shm_in_data(rg, e->d_offset, e->d_capacity)) {
    snprintf(msg, n, "the weight name must be 1 to 255 bytes inside the data region");
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  const char *at = (const char *)rg->arena + e->d_offset;
  if (strnlen(at, e->d_capacity) != e->d_capacity) {
    snprintf(msg, n, "the weight name must be 1 to 255 bytes with no NUL");
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  /* Before any copy: a weight that cannot fit the budget's free bytes is refused now. */
  const uint64_t stored = (uint64_t)w->rows * w->cols;
  const uint64_t free_bytes = weights->budget > weights->bytes ? weights->budget - weights->bytes : 0;
  if (stored > free_bytes) {
    snprintf(msg, n, "a %u x %u weight needs %" PRIu64 " bytes; %" PRIu64 " of the budget are free "
             "(--weight-memory-bytes)", w->rows, w->cols, stored, free_bytes);
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  memcpy(name, at, e->d_capacity);
  name[e->d_capacity] = '\0';
  return GEMMD_CODE_OK;
}

int gemmd_shm_find_weight(const gemmd_shm_region_t *rg, const gemmd_shm_sqe_t *e,
                          const gemmd_weights_t *weights, const gemmd_weight_t **out, char *msg,
                          size_t n) {
  const gemmd_weight_t *w = NULL;
  if (e->weight_id != 0) {
    w = gemmd_weights_find_id(weights, e->weight_id);
    snprintf(msg, n, "no weight with weight_id %" PRIu64 " is registered", e->weight_id);
  } else if (e->d_capacity >= 1 && e->d_capacity <= 255 && gemmd_shm_in_data(rg, e->d_offset, e->d_capacity)) {
    char name[256];
    memcpy(name, rg->arena + e->d_offset, e->d_capacity);
    name[e->d_capacity] = '\0';
    w = gemmd_weights_find_name(weights, name);
    snprintf(msg, n, "no weight named '%.200s' is registered", name);
  } else {
    snprintf(msg, n, "name the weight: an id, or a 1-255 byte name in the data region");
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  *out = w;
  return w != NULL ? GEMMD_CODE_OK : GEMMD_CODE_NOT_FOUND;
}
