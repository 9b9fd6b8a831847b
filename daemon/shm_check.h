/* The checks of what a shared-memory client sends (docs/shm-protocol.md): its HELLO, and
 * each entry gemmd takes from its submission ring, against the client's data region.
 * Pure: they read their arguments only (an entry's operands in the arena, the registry
 * for a weight named by id or name), so shm_server.c runs them on the loop and the fuzzers
 * (fuzz/) run them alone. Each returns a gRPC code, with the message in msg. */
#ifndef GEMMD_DAEMON_SHM_CHECK_H_
#define GEMMD_DAEMON_SHM_CHECK_H_

#include <stddef.h>
#include <stdint.h>

#include "daemon/request_build.h"
#include "daemon/validate.h"
#include "daemon/weights.h"
#include "gemmd/shm_v1.h"
#include "kernels/operand.h"

/* Ring entries a client may ask for, and what 0 asks for. */
enum { GEMMD_SHM_MIN_ENTRIES = 8, GEMMD_SHM_MAX_ENTRIES = 65536, GEMMD_SHM_DEFAULT_ENTRIES = 256 };

/* ---- HELLO ------------------------------------------------------------------------------ */

/* The message's own form: `len` bytes at msg_bytes must be one 32-byte HELLO with the
 * magic, version 1, and flags and reserved 0. Fills *out when they are. */
int gemmd_shm_hello_parse(const void *msg_bytes, size_t len, gemmd_shm_hello_t *out, char *msg,
                          size_t n);

/* The ring entries and arena bytes a parsed HELLO asks for (0: the defaults, the arena's
 * being --shm-arena-bytes): entries a power of two from 8 to 65536, bytes a multiple of
 * 4096 from the header, both rings and one page up to 64 GiB. */
int gemmd_shm_hello_geometry(const gemmd_shm_hello_t *h, uint64_t default_arena_bytes,
                             uint64_t *bytes, uint32_t *entries, char *msg, size_t n);

/* ---- Control messages (version 2) ------------------------------------------------------- */

/* A control message as recvmsg() returned it (`truncated`: MSG_TRUNC or MSG_CTRUNC was set):
 * one 128-byte message with reserved bytes 0, a known op and, for REGION_OPEN, a known
 * kind. Fills *out when it is. Whether an fd came along is the caller's to check. */
int gemmd_shm_ctl_parse(const void *msg_bytes, size_t len, int truncated, gemmd_shm_ctl_t *out,
                        char *msg, size_t n);

/* ---- Ring entries ----------------------------------------------------------------------- */

/* Memory a client's entries may reach: its arena's data region (id 0), or one of its own
 * regions (version 2; arena = the region's base, data_offset 0, data_bytes its size). */
typedef struct gemmd_shm_region_s {
  const uint8_t *arena;
  uint64_t data_offset, data_bytes;
  uint32_t id;
} gemmd_shm_region_t;

/* Where a GEMM entry's A, A's scales and D lie (inline B is always in the arena). */
typedef struct gemmd_shm_places_s {
  const gemmd_shm_region_t *a, *a_scales, *d;
} gemmd_shm_places_t;

/* [offset, offset + len) inside the data region, without overflow. */
int gemmd_shm_in_data(const gemmd_shm_region_t *rg, uint64_t offset, uint64_t len);

/* Whether an entry's reserved bytes are all 0 for the session's protocol version (in
 * version 1 the region fields are reserved too): a later version may give them meaning,
 * and must not be mistaken for this one. */
int gemmd_shm_reserved_clear(const gemmd_shm_sqe_t *e, uint32_t version);

/* A GEMM entry: the request built from it (request_build.h; `weights` is the registry, on
 * the loop), its operands located in the data region rg or where `at` puts A, its scales
 * and D (NULL: all in rg), and D's bytes, which must fit the entry's capacity and D's
 * place at its D offset. */
int gemmd_shm_build_gemm(const gemmd_shm_region_t *rg, const gemmd_shm_places_t *at,
                         const gemmd_shm_sqe_t *e, const gemmd_limits_t *lim,
                         const gemmd_weights_t *weights, gemmd_request_t *r,
                         gemmd_gemm_operands_t *ops, uint64_t *d_bytes, char *msg, size_t n);

/* A REGISTER_WEIGHT entry: the weight's operand in the data region and its name (1 to 255
 * bytes, no NUL, NUL-terminated into name); RESOURCE_EXHAUSTED when its bytes pass what
 * the registry's budget has free. */
int gemmd_shm_check_register(const gemmd_shm_region_t *rg, const gemmd_shm_sqe_t *e,
                             const gemmd_limits_t *lim, const gemmd_weights_t *weights,
                             gemmd_operand_t *w, char name[256], char *msg, size_t n);

/* A WEIGHT_INFO entry: the registered weight it names, by id or else by the name in the
 * data region; NOT_FOUND when there is none. */
int gemmd_shm_find_weight(const gemmd_shm_region_t *rg, const gemmd_shm_sqe_t *e,
                          const gemmd_weights_t *weights, const gemmd_weight_t **out, char *msg,
                          size_t n);

#endif /* GEMMD_DAEMON_SHM_CHECK_H_ */
