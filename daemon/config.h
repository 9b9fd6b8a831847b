/* gemmd's configuration: one table (config.c) drives the command-line flags, the
 * --config file, GEMMD_* environment variables, --help and the startup dump.
 *
 * Precedence, lowest first: built-in defaults, the config file, the environment, flags.
 * Flag --max-batch-rows=N (or "--max-batch-rows N"); file line "max-batch-rows = N";
 * environment GEMMD_MAX_BATCH_ROWS=N. Sizes take K/M/G/T (powers of 1024) suffixes. */
#ifndef GEMMD_DAEMON_CONFIG_H_
#define GEMMD_DAEMON_CONFIG_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define GEMMD_CONFIG_MAX_PRELOAD 64

typedef struct gemmd_config_s {
  /* Listening. */
  char grpc_listen[256];
  char metrics_listen[256];
  int64_t grpc_threads;
  int64_t grpc_spin_us;
  int64_t loop_spin_us;
  int64_t http_max_connections;
  int64_t http_head_timeout_ms;
  char grpc_poller[8]; /* auto | poll | epoll1 */
  uint64_t max_message_bytes;
  char tls_cert[1024];
  char tls_key[1024];
  char tls_client_ca[1024];
  char grpc_token_file[1024];
  /* Shared memory. */
  char shm_socket[1024];
  uint64_t shm_arena_bytes;
  char shm_allow_uids[256];
  char shm_allow_gids[256];
  int64_t shm_max_clients;
  int64_t shm_spinning_clients;
  uint64_t shm_arenas_bytes;
  uint64_t shm_arenas_bytes_per_uid;
  int64_t shm_hello_timeout_ms;
  int64_t shm_max_handshakes;
  int64_t shm_max_handshakes_per_uid;
  char shm_pin_arenas[8];
  int64_t test_shm_pin_delay_us;
  /* Device. */
  char backend[16]; /* auto | cuda | cpu */
  int64_t device;
  char gemm_kernel[16]; /* auto | gemmd | wgmma | cublaslt | measured */
  int64_t kernel_choice_samples;
  char cuda_graphs[8];  /* on | off */
  int64_t test_fault_after_batches;
  int64_t engine_spin_us;
  int64_t engine_slots;
  int64_t engine_copy_kernel_bytes;
  int64_t cpu_threads;
  int64_t cpu_inline_flops;
  /* Weights. */
  char weight_dir[1024];
  char preload[GEMMD_CONFIG_MAX_PRELOAD][1024]; /* files, directories or index.json (preload.h) */
  int n_preload;
  char preload_filter[1024]; /* POSIX extended regex on tensor names; "" = every FP8 tensor */
  char preload_prefix[128];  /* prepended to each preloaded weight's name */
  int64_t test_load_delay_ms;
  uint64_t weight_memory_bytes;
  /* Batching and admission. */
  int64_t max_batch_requests;
  int64_t max_batch_rows;
  int64_t max_batch_groups;
  int64_t max_batch_delay_us;
  int64_t split_flops;
  int64_t stream_window;
  int64_t max_registrations;
  uint64_t stream_queue_bytes;
  int64_t small_batches_per_piece;
  int64_t piece_slots;
  int64_t queue_depth;
  int64_t max_inflight_per_client;
  /* Request limits. */
  int64_t max_m;
  int64_t max_n;
  int64_t max_k;
  /* Logging. */
  char log_level[16];
  /* Where the values came from (for the dump). */
  char config_file[1024];
} gemmd_config_t;

/* Outcome of gemmd_config_load besides 0 and GEMMD_EINVAL. */
enum { GEMMD_CONFIG_HELP = 1, GEMMD_CONFIG_VERSION = 2 };

/* Fills defaults. */
void gemmd_config_defaults(gemmd_config_t *cfg);

/* Defaults, then the config file (--config or GEMMD_CONFIG), the environment, argv.
 * Returns 0, GEMMD_CONFIG_HELP / GEMMD_CONFIG_VERSION (--help / --version seen), or
 * GEMMD_EINVAL with a message in err ("--max-m: 0 is below the minimum 1"). */
int gemmd_config_load(gemmd_config_t *cfg, int argc, char **argv, char **envp, char *err,
                      size_t errlen);

/* Reads the config file's 'name = value' lines (# comments) from f into cfg; `path`
 * names it in messages ("gemmd.conf:3: ..."). Returns 0 or GEMMD_EINVAL with err set. */
int gemmd_config_read(gemmd_config_t *cfg, FILE *f, const char *path, char *err, size_t errlen);

/* Sets one option by name ("max-m") from text; what the file, env and flags all use. */
int gemmd_config_set(gemmd_config_t *cfg, const char *name, const char *value, char *err,
                     size_t errlen);

void gemmd_config_print_help(FILE *out);

/* One structured log line with every value. */
void gemmd_config_log(const gemmd_config_t *cfg);

/* "1.5 GiB"-free parsing helper, exposed for tests: "64M" -> 67108864. */
int gemmd_config_parse_size(const char *text, uint64_t *out);

#endif /* GEMMD_DAEMON_CONFIG_H_ */
