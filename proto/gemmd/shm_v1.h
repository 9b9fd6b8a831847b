/* The shared-memory protocol, version 1 and version 2's additions (regions of the client's
 * own memory, §7): byte layouts of docs/shm-protocol.md as C structs, shared by gemmd
 * (daemon/shm_server.c) and libgemmclient (client/lib/shm_client.c). The document is the
 * contract; these structs must match it byte for byte (the static asserts below check the
 * offsets). */
#ifndef GEMMD_PROTO_SHM_V1_H_
#define GEMMD_PROTO_SHM_V1_H_

#include <stddef.h>
#include <stdint.h>

#define GEMMD_SHM_MAGIC "GEMMDSH1" /* 8 bytes, no NUL on the wire */
#define GEMMD_SHM_VERSION 1u    /* the version a client without regions speaks */
#define GEMMD_SHM_VERSION_2 2u  /* version 1 plus regions (docs/shm-protocol.md §7) */
#define GEMMD_SHM_HEADER_BYTES 4096u
#define GEMMD_SHM_ENTRY_BYTES 128u

enum {
  GEMMD_SHM_OP_GEMM = 1,
  GEMMD_SHM_OP_REGISTER_WEIGHT = 2,
  GEMMD_SHM_OP_UNREGISTER_WEIGHT = 3,
  GEMMD_SHM_OP_WEIGHT_INFO = 4,
};

enum { GEMMD_SHM_B_WEIGHT = 0, GEMMD_SHM_B_INLINE = 1 };

/* Version 2: control messages on the socket after WELCOME, and kinds of region. */
enum { GEMMD_SHM_CTL_REGION_OPEN = 1, GEMMD_SHM_CTL_REGION_CLOSE = 2 };
enum { GEMMD_SHM_REGION_FD = 1, GEMMD_SHM_REGION_CUDA_IPC = 2 };

typedef struct gemmd_shm_hello_s {
  char magic[8];
  uint32_t version;
  uint32_t flags;
  uint64_t arena_bytes;
  uint32_t sq_entries;
  uint32_t reserved;
} gemmd_shm_hello_t;

typedef struct gemmd_shm_welcome_s {
  char magic[8];
  uint32_t version;
  int32_t status;
  uint64_t arena_bytes;
  uint32_t client_id;
  uint32_t max_inflight;
  char message[224];
} gemmd_shm_welcome_t;

/* A counter alone on its 64-byte line. */
typedef struct {
  uint32_t value;
  uint8_t pad[60];
} gemmd_shm_line_t;

typedef struct gemmd_shm_header_s {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t arena_bytes;
  uint32_t sq_offset, sq_entries;
  uint32_t cq_offset, cq_entries;
  uint64_t data_offset, data_bytes;
  uint32_t client_id;
  uint32_t max_inflight;
  uint8_t reserved0[256 - 64];
  gemmd_shm_line_t sq_tail;        /* 256, client */
  gemmd_shm_line_t sq_head;        /* 320, gemmd */
  gemmd_shm_line_t cq_tail;        /* 384, gemmd */
  gemmd_shm_line_t cq_head;        /* 448, client */
  gemmd_shm_line_t server_idle;    /* 512, gemmd */
  gemmd_shm_line_t client_waiting; /* 576, client */
  gemmd_shm_line_t cq_seq;         /* 640, gemmd; futex word */
  gemmd_shm_line_t crowded;        /* 704, gemmd: nonzero, clients block at once, no spin */
  uint8_t reserved1[GEMMD_SHM_HEADER_BYTES - 768];
} gemmd_shm_header_t;

typedef struct gemmd_shm_sqe_s {
  uint8_t opcode;
  uint8_t a_dtype;
  uint8_t a_layout;
  uint8_t out_dtype;
  uint8_t b_source;
  uint8_t b_dtype;
  uint8_t b_layout;
  uint8_t reserved0;
  uint32_t m;
  uint32_t n;
  uint32_t k;
  uint32_t timeout_us;
  uint64_t request_id;
  uint64_t weight_id;
  uint64_t a_offset;
  uint64_t a_scales_offset;
  uint64_t b_offset;
  uint64_t b_scales_offset;
  uint64_t d_offset;
  uint64_t d_capacity;
  /* Version 2 (0 in version 1): the regions A, A's scales and D lie in; 0 = the arena. */
  uint32_t a_region;
  uint32_t a_scales_region;
  uint32_t d_region;
  uint8_t reserved1[28];
} gemmd_shm_sqe_t;

typedef struct gemmd_shm_cqe_s {
  uint64_t request_id;
  int32_t status;
  uint32_t opcode;
  uint64_t result; /* D bytes (GEMM), weight id (REGISTER_WEIGHT), N | K << 32 (WEIGHT_INFO) */
  uint64_t queue_ns;
  uint64_t compute_ns;
  uint64_t total_ns;
  uint32_t batch_requests;
  uint32_t batch_groups;
  uint64_t batch_id; /* GEMM: its batch; WEIGHT_INFO: the weight id */
  char message[64];
} gemmd_shm_cqe_t;

/* Version 2: a control message a client sends on the socket (128 bytes; an fd for
 * GEMMD_SHM_REGION_FD rides along as SCM_RIGHTS), and gemmd's reply (256 bytes). */
typedef struct gemmd_shm_ctl_s {
  uint32_t op;   /* GEMMD_SHM_CTL_* */
  uint32_t kind; /* REGION_OPEN: GEMMD_SHM_REGION_* */
  uint64_t bytes;     /* REGION_OPEN: the region's size */
  uint64_t tag;       /* echoed in the reply */
  uint32_t region_id; /* REGION_CLOSE */
  uint32_t reserved0;
  uint8_t handle[64]; /* REGION_OPEN of a CUDA_IPC region: its cudaIpcMemHandle_t */
  uint8_t reserved1[32];
} gemmd_shm_ctl_t;

typedef struct gemmd_shm_ctl_reply_s {
  uint32_t op;
  int32_t status; /* 0 OK, else a gRPC status code */
  uint64_t tag;
  uint32_t region_id; /* REGION_OPEN: the new region's id */
  uint32_t reserved;
  uint64_t bytes;
  char message[224];
} gemmd_shm_ctl_reply_t;

#ifdef __cplusplus
#define GEMMD_SHM_STATIC_ASSERT static_assert
#else
#define GEMMD_SHM_STATIC_ASSERT _Static_assert
#endif
GEMMD_SHM_STATIC_ASSERT(sizeof(gemmd_shm_hello_t) == 32, "HELLO is 32 bytes");
GEMMD_SHM_STATIC_ASSERT(sizeof(gemmd_shm_welcome_t) == 256, "WELCOME is 256 bytes");
GEMMD_SHM_STATIC_ASSERT(sizeof(gemmd_shm_header_t) == GEMMD_SHM_HEADER_BYTES, "header size");
GEMMD_SHM_STATIC_ASSERT(offsetof(gemmd_shm_header_t, sq_tail) == 256, "sq_tail at 256");
GEMMD_SHM_STATIC_ASSERT(offsetof(gemmd_shm_header_t, cq_seq) == 640, "cq_seq at 640");
GEMMD_SHM_STATIC_ASSERT(offsetof(gemmd_shm_header_t, crowded) == 704, "crowded at 704");
GEMMD_SHM_STATIC_ASSERT(sizeof(gemmd_shm_sqe_t) == GEMMD_SHM_ENTRY_BYTES, "SQ entry size");
GEMMD_SHM_STATIC_ASSERT(offsetof(gemmd_shm_sqe_t, d_capacity) == 80, "d_capacity at 80");
GEMMD_SHM_STATIC_ASSERT(offsetof(gemmd_shm_sqe_t, a_region) == 88, "a_region at 88");
GEMMD_SHM_STATIC_ASSERT(offsetof(gemmd_shm_sqe_t, d_region) == 96, "d_region at 96");
GEMMD_SHM_STATIC_ASSERT(sizeof(gemmd_shm_ctl_t) == 128, "a control message is 128 bytes");
GEMMD_SHM_STATIC_ASSERT(sizeof(gemmd_shm_ctl_reply_t) == 256, "a control reply is 256 bytes");
GEMMD_SHM_STATIC_ASSERT(sizeof(gemmd_shm_cqe_t) == GEMMD_SHM_ENTRY_BYTES, "CQ entry size");
GEMMD_SHM_STATIC_ASSERT(offsetof(gemmd_shm_cqe_t, message) == 64, "message at 64");

/* Ring slot addresses inside a mapped arena. */
static inline gemmd_shm_sqe_t *gemmd_shm_sq_slot(uint8_t *arena, const gemmd_shm_header_t *h,
                                                 uint32_t index) {
  return (gemmd_shm_sqe_t *)(void *)(arena + h->sq_offset +
                                     (size_t)(index & (h->sq_entries - 1)) * GEMMD_SHM_ENTRY_BYTES);
}

static inline gemmd_shm_cqe_t *gemmd_shm_cq_slot(uint8_t *arena, const gemmd_shm_header_t *h,
                                                 uint32_t index) {
  return (gemmd_shm_cqe_t *)(void *)(arena + h->cq_offset +
                                     (size_t)(index & (h->cq_entries - 1)) * GEMMD_SHM_ENTRY_BYTES);
}

#endif /* GEMMD_PROTO_SHM_V1_H_ */
