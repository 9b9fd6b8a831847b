/* Shared by the gRPC transport's files (rpc_*.c); not for the rest of gemmd.
 *
 * Every gRPC call is an rpc_call_t (or a struct that starts with one), reference
 * counted: one reference for each batch started on it, one for each piece of work
 * posted to the loop, one for a health watch registration. The last unref releases the
 * grpc_call and frees the struct. Tags given to gRPC are rpc_tag_t embedded in calls.
 */
#ifndef GEMMD_DAEMON_RPC_INTERNAL_H_
#define GEMMD_DAEMON_RPC_INTERNAL_H_

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "daemon/auth.h"
#include "daemon/server.h"
#include "gemmd/v1/gemm.pb-c.h"
#include "grpc/health/v1/health.pb-c.h"

typedef struct rpc_tag_s {
  void (*fn)(struct rpc_tag_s *tag, int ok);
} rpc_tag_t;

#define RPC_CONTAINER(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

enum {
  M_GEMM,
  M_GEMM_STREAM,
  M_REGISTER,
  M_UNREGISTER,
  M_LIST,
  M_STATS,
  M_HEALTH_CHECK,
  M_HEALTH_WATCH,
  M_UNKNOWN, /* any other method: UNIMPLEMENTED */
  M_COUNT
};

typedef struct rpc_call_s rpc_call_t;

struct rpc_call_s {
  gemmd_rpc_t *rpc;
  int method, cq;
  grpc_call *call;
  gpr_timespec deadline;
  grpc_metadata_array md;
  grpc_call_details details;  /* M_UNKNOWN only */
  grpc_byte_buffer *payload;  /* unary methods: the request */
  atomic_int refs;
  int cancelled;              /* set when on_close completes */
  rpc_tag_t on_arrive, on_close, on_final;
  grpc_byte_buffer *final_buf; /* what the final batch sent */
  grpc_slice final_details;
  int has_final_details;
  uint64_t conn_id;
  uint64_t accepted_ns, deadline_ns;
  void (*cleanup)(rpc_call_t *c); /* method state, before the struct is freed */
};

struct gemmd_rpc_s {
  gemmd_server_t *srv;
  grpc_server *server;
  int n_cq;
  grpc_completion_queue **cq;
  pthread_t *threads;
  uint64_t spin_ns; /* --grpc-spin-us */
  void *handles[M_COUNT];
  atomic_int live_calls;
  atomic_int shutting_down;
  atomic_int shutdown_notified;
  atomic_int finish_posted;
  atomic_int sends_in_flight; /* batches with a SEND_MESSAGE or status not yet complete */
  _Atomic uint64_t last_send_done_ns; /* shutting down: when the last of those completed */
  atomic_int registrations;   /* RegisterWeight streams past their first message */
  _Atomic uint64_t uploading_bytes; /* the bytes those streams' weights will hold */
  rpc_tag_t shutdown_tag;
  uv_timer_t flush_timer;     /* shutdown: waits for sends to flush before cancelling */
  atomic_int flush_done;      /* that wait is over and the timer closed */
  uint64_t flush_deadline_ns;
  void (*done)(gemmd_server_t *srv, void *arg);
  void *done_arg;
  uint32_t max_message_bytes;
  int auth_on;       /* --grpc-token-file given */
  gemmd_auth_t auth;
};

/* ---- rpc_grpc.c: call lifecycle and helpers -------------------------------------------- */

void rpc_call_ref(rpc_call_t *c);
void rpc_call_unref(rpc_call_t *c);

/* The whole message of a byte buffer as one slice (gRPC's own when it arrived in one,
 * else joined once): data and len for protobuf-c's unpack, which copies what it keeps, so
 * the slice goes back right after (rpc_message_release). */
typedef struct {
  grpc_slice slice;
  const uint8_t *data;
  size_t len;
} rpc_message_t;
int rpc_read_message(grpc_byte_buffer *bb, rpc_message_t *m);
void rpc_message_release(rpc_message_t *m);
/* A byte buffer over `packed` (taken over: freed by gRPC). */
grpc_byte_buffer *rpc_buffer(uint8_t *packed, size_t len);

/* Ends a unary call: the response message (packed, taken over; NULL for none) and the
 * status. Any thread. Holds its own reference until gRPC is done. */
void rpc_finish(rpc_call_t *c, uint8_t *packed, size_t len, int code, const char *message);

/* Count a batch that sends something, from its start to its completion, so that
 * shutdown lets answers reach their clients before cancelling what is left. */
static inline void rpc_send_started(gemmd_rpc_t *rpc) { atomic_fetch_add(&rpc->sends_in_flight, 1); }
static inline void rpc_send_done(gemmd_rpc_t *rpc) {
  if (atomic_load_explicit(&rpc->shutting_down, memory_order_relaxed)) {
    atomic_store_explicit(&rpc->last_send_done_ns, gemmd_now_ns(), memory_order_relaxed);
  }
  atomic_fetch_sub(&rpc->sends_in_flight, 1);
}

/* Starts the recv-close batch that tells whether the client cancelled. */
void rpc_watch_close(rpc_call_t *c);

/* ---- Per-method entry points: the call has arrived (CQ thread) ------------------------- */

void rpc_gemm_arrived(rpc_call_t *c);          /* rpc_gemm.c */
void rpc_gemm_stream_arrived(rpc_call_t *c);   /* rpc_gemm.c */
void rpc_register_arrived(rpc_call_t *c);      /* rpc_weights.c */
void rpc_unregister_arrived(rpc_call_t *c);    /* rpc_weights.c */
void rpc_list_arrived(rpc_call_t *c);          /* rpc_weights.c */
void rpc_stats_arrived(rpc_call_t *c);         /* rpc_health.c */
void rpc_health_check_arrived(rpc_call_t *c);  /* rpc_health.c */
void rpc_health_watch_arrived(rpc_call_t *c);  /* rpc_health.c */

/* Bytes each method's call struct needs (it starts with an rpc_call_t). */
size_t rpc_gemm_call_size(void);
size_t rpc_gemm_stream_call_size(void);
size_t rpc_register_call_size(void);
size_t rpc_health_watch_call_size(void);

#endif /* GEMMD_DAEMON_RPC_INTERNAL_H_ */
