#include "daemon/config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "kernels/errors.h"

typedef enum { OPT_STRING, OPT_INT, OPT_SIZE, OPT_ENUM, OPT_LIST } opt_type_t;

typedef struct {
  const char *name;  /* flag name without dashes; file key; GEMMD_ + upper/underscores */
  opt_type_t type;
  size_t offset;     /* into gemmd_config_t */
  size_t size;       /* buffer size for strings */
  const char *def;   /* default, as text */
  int64_t min, max;  /* bounds for INT and SIZE */
  const char *choices; /* "auto|cuda|cpu" for ENUM */
  const char *help;
} opt_t;

#define STR(field, name, def, help) \
  {name, OPT_STRING, offsetof(gemmd_config_t, field), sizeof(((gemmd_config_t *)0)->field), def, 0, 0, NULL, help}
#define INT(field, name, def, lo, hi, help) \
  {name, OPT_INT, offsetof(gemmd_config_t, field), 0, def, lo, hi, NULL, help}
#define SIZE(field, name, def, lo, hi, help) \
  {name, OPT_SIZE, offsetof(gemmd_config_t, field), 0, def, lo, hi, NULL, help}
#define ENUM(field, name, def, choices, help) \
  {name, OPT_ENUM, offsetof(gemmd_config_t, field), sizeof(((gemmd_config_t *)0)->field), def, 0, 0, choices, help}

static const opt_t options[] = {
    STR(grpc_listen, "grpc-listen", "0.0.0.0:50051",
        "gRPC address HOST:PORT (port 0 picks a free one; the log line 'listening' says which)"),
    STR(metrics_listen, "metrics-listen", "127.0.0.1:9464",
        "HTTP address for /metrics, /healthz, /readyz, /stats (port 0 picks a free one)"),
    INT(http_max_connections, "http-max-connections", "256", 1, 65536,
        "HTTP connections (/metrics, /healthz, ...) at once; more are closed as they come"),
    INT(http_head_timeout_ms, "http-head-timeout-ms", "10000", 100, 600000,
        "an HTTP connection must have sent its whole request head this long after connecting"),
    INT(loop_spin_us, "loop-spin-us", "200", 0, 100000,
        "the event loop keeps polling this many us after work handed to it before it sleeps: "
        "a busy core while requests come, for a tiny gRPC GEMM's p50 15-35% lower "
        "(docs/bench/grpc_cpu.md); 0: sleep at once"),
    INT(grpc_threads, "grpc-threads", "2", 1, 64,
        "completion-queue threads that decode and validate requests"),
    INT(grpc_spin_us, "grpc-spin-us", "-1", -1, 100000,
        "each completion-queue thread keeps polling gRPC's sockets this many us after its last "
        "event before it sleeps: a busy core while requests come, for one worker's gRPC p50 "
        "about 15 us lower (docs/bench/serving.md); 0: sleep at once; -1: 200 where gemmd may "
        "run on 8 CPUs or more, else 0 (on 2 CPUs the spinning thread slowed a 64 KB answer)"),
    ENUM(grpc_poller, "grpc-poller", "auto", "auto|poll|epoll1",
         "gRPC core's I/O poller: poll or epoll1 (gRPC's Linux default); auto: "
         "$GRPC_POLL_STRATEGY when set, else poll (p50 of a tiny GEMM ~25% lower than epoll1, "
         "docs/bench/grpc_cpu.md)"),
    SIZE(max_message_bytes, "max-message-bytes", "1G", 1024, 2147483647,
         "largest gRPC message received or sent (RESOURCE_EXHAUSTED beyond)"),
    STR(tls_cert, "tls-cert", "", "PEM certificate chain: serve gRPC over TLS (with --tls-key)"),
    STR(tls_key, "tls-key", "", "PEM private key for --tls-cert"),
    STR(tls_client_ca, "tls-client-ca", "",
        "PEM CA bundle: require and verify client certificates (mutual TLS)"),
    STR(grpc_token_file, "grpc-token-file", "",
        "file of bearer tokens, one per line: every gRPC call but grpc.health.v1 must carry "
        "'authorization: Bearer <one of them>' (UNAUTHENTICATED otherwise); re-read when it changes"),
    STR(shm_socket, "shm-socket", "/run/gemmd/gemmd.sock",
        "Unix socket for shared-memory clients (docs/shm-protocol.md); empty: none"),
    SIZE(shm_arena_bytes, "shm-arena-bytes", "256M", 1 << 20, 1ll << 36,
         "default size of a shared-memory client's arena (a client may ask for another)"),
    STR(shm_allow_uids, "shm-allow-uids", "",
        "comma-separated uids allowed on the shm socket besides gemmd's own and root"),
    STR(shm_allow_gids, "shm-allow-gids", "", "comma-separated gids allowed on the shm socket"),
    INT(shm_max_clients, "shm-max-clients", "64", 1, 4096, "shared-memory clients at once"),
    INT(shm_spinning_clients, "shm-spinning-clients", "0", 0, 4096,
        "shared-memory clients may spin-wait for answers while at most this many are busy (a request "
        "in flight or sent within 20 ms); past it gemmd's header tells them to block at once (0: the "
        "CPUs gemmd may run on less its 4 polling threads, at least 1)"),
    SIZE(shm_arenas_bytes_per_uid, "shm-arenas-bytes-per-uid", "0", 0, 1ll << 40,
         "arena bytes the clients of one uid may hold together (0: only --shm-arenas-bytes)"),
    INT(shm_hello_timeout_ms, "shm-hello-timeout-ms", "2000", 10, 600000,
        "a shared-memory connection that has not sent HELLO this long after connecting is closed"),
    INT(shm_max_handshakes, "shm-max-handshakes", "64", 1, 65536,
        "shared-memory connections between connect and HELLO at once; more are turned away "
        "(RESOURCE_EXHAUSTED) at once"),
    INT(shm_max_handshakes_per_uid, "shm-max-handshakes-per-uid", "16", 1, 65536,
        "the same, per peer uid, so that one user's silent connections cannot lock out others"),
    SIZE(shm_arenas_bytes, "shm-arenas-bytes", "16G", 1 << 20, 1ll << 40,
         "arena bytes of all shared-memory clients together; a HELLO past it is refused with "
         "RESOURCE_EXHAUSTED"),
    ENUM(shm_pin_arenas, "shm-pin-arenas", "used", "used|all|off",
         "CUDA engine: pin (register) shared-memory arenas so that A and D move by DMA straight "
         "from and into them: used: the 2 MiB pieces that requests use, on a pool thread after "
         "their first use (those first requests copy); all: every piece at connect, at a cost "
         "to everyone while clients come and go; off: A and D are copied through the engine's "
         "pinned buffers (docs/bench/serving.md)"),
    INT(test_shm_pin_delay_us, "test-shm-pin-delay-us", "0", 0, 10000000,
        "tests only: each shared-memory arena takes this long to pin, as cudaHostRegister of "
        "a large arena does on the GPU (0: no delay)"),
    ENUM(backend, "backend", "auto", "auto|cuda|cpu",
         "compute backend; auto takes the GPU when one is usable, else the CPU"),
    INT(device, "device", "0", 0, 1023, "CUDA device ordinal"),
    ENUM(gemm_kernel, "gemm-kernel", "auto", "auto|wgmma|gemmd|cublaslt|measured",
         "GPU GEMM: gemmd's TMA + WGMMA kernel (wgmma; auto picks it; FP32-output groups run "
         "on its full-FP32 mma.sync kernel), the mma.sync kernel alone (gemmd: slow, the "
         "correctness baseline), cuBLASLt per group for comparison only (its FP8 "
         "accumulation misses docs/api.md's FP32-output bound: 1.3e-4 at K=1024), or "
         "measured: per batch signature, whichever of wgmma and cuBLASLt ran it faster "
         "(cuBLASLt only for batches of at most 4 groups with 128x128 B scales and BF16/FP16 "
         "output; the choices persist in --weight-dir)"),
    INT(kernel_choice_samples, "kernel-choice-samples", "3", 1, 16,
        "with --gemm-kernel measured: batches of each kernel timed before a signature's "
        "choice is made"),
    ENUM(cuda_graphs, "cuda-graphs", "on", "on|off",
         "replay a captured CUDA graph per batch (off: launch eagerly, for comparison)"),
    INT(engine_spin_us, "engine-spin-us", "200", 0, 100000,
        "CUDA engine: its staging and completion threads poll this many us for work and for "
        "the GPU before they sleep (lower latency, a busy core while batches run)"),
    INT(engine_copy_kernel_bytes, "engine-copy-kernel-bytes", "1048576", 0, 1073741824,
        "CUDA engine: a batch whose staged upload, or whose results, are at most this many bytes "
        "moves them with a copy kernel reading and writing pinned host memory over PCIe, not "
        "with the copy engines' DMAs (0: always DMA): its kernels start sooner and it does not "
        "queue behind large requests' DMAs (docs/bench/serving.md)"),
    INT(engine_slots, "engine-slots", "4", 1, 8,
        "CUDA engine: batches in flight at once, each with its own device buffer, pinned "
        "copy and stream: later batches stage and queue while one computes (docs/bench/serving.md)"),
    INT(test_fault_after_batches, "test-fault-after-batches", "0", 0, 1000000000,
        "tests only: make the GPU fail on this batch (0: never)"),
    INT(cpu_threads, "cpu-threads", "0", 0, 1024,
        "threads of the CPU backend's GEMM (0: one per online CPU)"),
    INT(cpu_inline_flops, "cpu-inline-flops", "1000000", 0, 1000000000,
        "CPU backend: batches of at most this many FLOPs run on the loop thread (a few us)"),
    STR(weight_dir, "weight-dir", "",
        "directory where registered weights persist; a restart loads them back (one gemmd per "
        "directory: a second is refused)"),
    {"preload", OPT_LIST, offsetof(gemmd_config_t, preload), sizeof(((gemmd_config_t *)0)->preload[0]), "",
     0, 0, NULL,
     "FP8 safetensors weights to register at start (repeatable): a file, a directory of "
     "*.safetensors, or a safetensors index (*.json, every shard it names); loaded while "
     "gemmd already answers health checks, NOT_SERVING until done"},
    STR(preload_filter, "preload-filter", "",
        "only tensors whose names match this POSIX extended regex are preloaded (default: every "
        "FP8 tensor)"),
    STR(preload_prefix, "preload-prefix", "", "prepended to the name of each preloaded weight"),
    INT(test_load_delay_ms, "test-load-delay-ms", "0", 0, 600000,
        "tests only: pause this long before each weight loaded at start"),
    SIZE(weight_memory_bytes, "weight-memory-bytes", "32G", 0, INT64_MAX,
         "budget for registered weights; registration beyond it is RESOURCE_EXHAUSTED"),
    INT(max_batch_requests, "max-batch-requests", "256", 1, 65536,
        "most requests in one batch"),
    INT(max_batch_rows, "max-batch-rows", "16384", 1, 1 << 24,
        "most rows (sum of M) in one batch; a larger single request runs alone"),
    INT(max_batch_groups, "max-batch-groups", "128", 1, 4096,
        "most GEMM groups (distinct weights) in one batch"),
    INT(max_registrations, "max-registrations", "8", 1, 1024,
        "RegisterWeight streams in progress at once; more get RESOURCE_EXHAUSTED (retry)"),
    INT(stream_window, "stream-window", "64", 1, 65536,
        "a GemmStream holds at most this many requests in gemmd or answered and unsent; past "
        "it gemmd stops reading the stream until its answers are sent (HTTP/2 flow control "
        "holds the client)"),
    SIZE(stream_queue_bytes, "stream-queue-bytes", "256M", 1 << 20, 1ll << 40,
         "the same bound in bytes of answers a GemmStream has not yet sent"),
    INT(split_flops, "split-flops", "0", 0, INT64_MAX,
        "a request of more FLOPs (2*M*N*K) runs as pieces of its rows of at most this many, "
        "so that small requests never wait behind all of it (0: auto, 64e9 on the CUDA "
        "engine, 8e9 on the CPU; pieces are multiples of 128 rows, at least 256; "
        "docs/ARCHITECTURE.md, Scheduling)"),
    INT(small_batches_per_piece, "small-batches-per-piece", "1", 1, 1024,
        "while pieces of large requests and other requests both wait, this many batches of "
        "the others run between two pieces (large requests always progress)"),
    INT(piece_slots, "piece-slots", "2", 1, 8,
        "pieces of large requests in the engine at once while other requests are being served "
        "(one arrived or was batched within the last millisecond); pieces alone take every "
        "slot"),
    INT(max_batch_delay_us, "max-batch-delay-us", "0", 0, 1000000,
        "how long a free engine may wait for more requests before a partial batch (0: never)"),
    INT(queue_depth, "queue-depth", "4096", 1, 1 << 20,
        "requests waiting for a batch; beyond it RESOURCE_EXHAUSTED"),
    INT(max_inflight_per_client, "max-inflight-per-client", "1024", 1, 1 << 20,
        "requests one connection may have accepted and unanswered"),
    INT(max_m, "max-m", "65536", 1, 1 << 24, "largest M (rows of A) accepted"),
    INT(max_n, "max-n", "65536", 1, 1 << 24, "largest N (rows of B) accepted"),
    INT(max_k, "max-k", "65536", 1, 1 << 24, "largest K accepted"),
    ENUM(log_level, "log-level", "info", "debug|info|warn|error", "least severe log level printed"),
};

#define N_OPTIONS (sizeof options / sizeof options[0])

static const opt_t *find_option(const char *name) {
  for (size_t i = 0; i < N_OPTIONS; i++) {
    if (strcmp(options[i].name, name) == 0) return &options[i];
  }
  return NULL;
}

/* An integer in decimal, with an optional power-of-ten exponent ("64e9", as --help writes
 * FLOP counts). GEMMD_EINVAL for anything else or past the range of long long. */
static int parse_int(const char *text, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (end == text || errno != 0) return GEMMD_EINVAL;
  if (*end == 'e' || *end == 'E') {
    const char *exp = end + 1;
    if (*exp < '0' || *exp > '9') return GEMMD_EINVAL;
    const long n = strtol(exp, &end, 10);
    for (long i = 0; v != 0 && i < n; i++) {
      if (v > LLONG_MAX / 10 || v < LLONG_MIN / 10) return GEMMD_EINVAL;
      v *= 10;
    }
  }
  if (*end != '\0') return GEMMD_EINVAL;
  *out = v;
  return GEMMD_OK;
}

int gemmd_config_parse_size(const char *text, uint64_t *out) {
  char *end;
  errno = 0;
  const unsigned long long v = strtoull(text, &end, 10);
  if (end == text || errno != 0 || text[0] == '-') return GEMMD_EINVAL;
  unsigned shift = 0;
  switch (toupper((unsigned char)*end)) {
    case '\0':
      break;
    case 'K':
      shift = 10;
      break;
    case 'M':
      shift = 20;
      break;
    case 'G':
      shift = 30;
      break;
    case 'T':
      shift = 40;
      break;
    default:
      return GEMMD_EINVAL;
  }
  if (*end != '\0') {
    end++;
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end != '\0') return GEMMD_EINVAL;
  }
  if (shift > 0 && v > (UINT64_MAX >> shift)) return GEMMD_EINVAL;
  *out = (uint64_t)v << shift;
  return GEMMD_OK;
}

static int set_option(gemmd_config_t *cfg, const opt_t *o, const char *value, char *err,
                      size_t errlen) {
  char *field = (char *)cfg + o->offset;
  switch (o->type) {
    case OPT_STRING:
      if (strlen(value) >= o->size) {
        snprintf(err, errlen, "--%s: value longer than %zu characters", o->name, o->size - 1);
        return GEMMD_EINVAL;
      }
      memcpy(field, value, strlen(value) + 1);
      return GEMMD_OK;
    case OPT_ENUM: {
      const size_t len = strlen(value);
      const char *p = o->choices;
      while (*p) {
        const char *bar = strchr(p, '|');
        const size_t clen = bar ? (size_t)(bar - p) : strlen(p);
        if (clen == len && strncmp(p, value, len) == 0) {
          memcpy(field, value, len + 1);
          return GEMMD_OK;
        }
        p += clen + (bar ? 1 : 0);
      }
      snprintf(err, errlen, "--%s: '%s' is not one of %s", o->name, value, o->choices);
      return GEMMD_EINVAL;
    }
    case OPT_INT: {
      long long v;
      if (parse_int(value, &v) != GEMMD_OK) {
        snprintf(err, errlen, "--%s: '%s' is not an integer (e.g. 200, -1, 64e9)", o->name, value);
        return GEMMD_EINVAL;
      }
      if (v < o->min || v > o->max) {
        snprintf(err, errlen, "--%s: %lld is outside [%" PRId64 ", %" PRId64 "]", o->name, v,
                 o->min, o->max);
        return GEMMD_EINVAL;
      }
      *(int64_t *)field = v;
      return GEMMD_OK;
    }
    case OPT_SIZE: {
      uint64_t v;
      if (gemmd_config_parse_size(value, &v) != GEMMD_OK) {
        snprintf(err, errlen, "--%s: '%s' is not a size (e.g. 4096, 64M, 2G)", o->name, value);
        return GEMMD_EINVAL;
      }
      if (v < (uint64_t)o->min || v > (uint64_t)o->max) {
        snprintf(err, errlen, "--%s: %s is outside [%" PRId64 ", %" PRId64 "] bytes", o->name,
                 value, o->min, o->max);
        return GEMMD_EINVAL;
      }
      *(uint64_t *)field = v;
      return GEMMD_OK;
    }
    case OPT_LIST: {
      if (value[0] == '\0') return GEMMD_OK;
      if (cfg->n_preload >= GEMMD_CONFIG_MAX_PRELOAD) {
        snprintf(err, errlen, "--%s: at most %d files", o->name, GEMMD_CONFIG_MAX_PRELOAD);
        return GEMMD_EINVAL;
      }
      if (strlen(value) >= o->size) {
        snprintf(err, errlen, "--%s: path longer than %zu characters", o->name, o->size - 1);
        return GEMMD_EINVAL;
      }
      memcpy(cfg->preload[cfg->n_preload++], value, strlen(value) + 1);
      return GEMMD_OK;
    }
  }
  return GEMMD_EINVAL;
}

int gemmd_config_set(gemmd_config_t *cfg, const char *name, const char *value, char *err,
                     size_t errlen) {
  const opt_t *o = find_option(name);
  if (o == NULL) {
    snprintf(err, errlen, "unknown option '%s' (see gemmd --help)", name);
    return GEMMD_EINVAL;
  }
  return set_option(cfg, o, value, err, errlen);
}

void gemmd_config_defaults(gemmd_config_t *cfg) {
  char err[256];
  memset(cfg, 0, sizeof *cfg);
  for (size_t i = 0; i < N_OPTIONS; i++) {
    if (options[i].type != OPT_LIST) set_option(cfg, &options[i], options[i].def, err, sizeof err);
  }
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
  return s;
}

int gemmd_config_read(gemmd_config_t *cfg, FILE *f, const char *path, char *err, size_t errlen) {
  char line[2048];
  int lineno = 0, rc = GEMMD_OK;
  while (rc == GEMMD_OK && fgets(line, sizeof line, f) != NULL) {
    lineno++;
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char *s = trim(line);
    if (*s == '\0') continue;
    char *eq = strchr(s, '=');
    if (eq == NULL) {
      snprintf(err, errlen, "%s:%d: expected 'name = value'", path, lineno);
      rc = GEMMD_EINVAL;
      break;
    }
    *eq = '\0';
    char *name = trim(s), *value = trim(eq + 1);
    const size_t vl = strlen(value);
    if (vl >= 2 && value[0] == '"' && value[vl - 1] == '"') {
      value[vl - 1] = '\0';
      value++;
    }
    char inner[512];
    if (gemmd_config_set(cfg, name, value, inner, sizeof inner) != GEMMD_OK) {
      snprintf(err, errlen, "%s:%d: %s", path, lineno, inner);
      rc = GEMMD_EINVAL;
    }
  }
  return rc;
}

static int load_file(gemmd_config_t *cfg, const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    snprintf(err, errlen, "--config %s: %s", path, strerror(errno));
    return GEMMD_EINVAL;
  }
  const int rc = gemmd_config_read(cfg, f, path, err, errlen);
  fclose(f);
  return rc;
}

/* GEMMD_MAX_BATCH_ROWS for "max-batch-rows". */
static void env_name(const char *opt, char *out, size_t n) {
  size_t j = (size_t)snprintf(out, n, "GEMMD_");
  for (size_t i = 0; opt[i] && j + 1 < n; i++) {
    out[j++] = opt[i] == '-' ? '_' : (char)toupper((unsigned char)opt[i]);
  }
  out[j] = '\0';
}

static const char *env_get(char **envp, const char *name) {
  const size_t n = strlen(name);
  for (char **e = envp; e && *e; e++) {
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  }
  return NULL;
}

int gemmd_config_load(gemmd_config_t *cfg, int argc, char **argv, char **envp, char *err,
                      size_t errlen) {
  gemmd_config_defaults(cfg);
  /* --help, --version and --config first: they decide what else is read. */
  const char *config_path = env_get(envp, "GEMMD_CONFIG");
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return GEMMD_CONFIG_HELP;
    if (strcmp(argv[i], "--version") == 0) return GEMMD_CONFIG_VERSION;
    if (strncmp(argv[i], "--config=", 9) == 0) config_path = argv[i] + 9;
    if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) config_path = argv[i + 1];
  }
  if (config_path != NULL && config_path[0] != '\0') {
    if (strlen(config_path) >= sizeof cfg->config_file) {
      snprintf(err, errlen, "--config: path too long");
      return GEMMD_EINVAL;
    }
    strcpy(cfg->config_file, config_path);
    if (load_file(cfg, config_path, err, errlen) != GEMMD_OK) return GEMMD_EINVAL;
  }
  for (size_t i = 0; i < N_OPTIONS; i++) {
    char name[128];
    env_name(options[i].name, name, sizeof name);
    const char *v = env_get(envp, name);
    if (v == NULL) continue;
    char inner[512];
    if (set_option(cfg, &options[i], v, inner, sizeof inner) != GEMMD_OK) {
      snprintf(err, errlen, "%s: %s", name, inner);
      return GEMMD_EINVAL;
    }
  }
  /* Repeatable options given as flags replace what the file and environment said. */
  int preload_from_flags = 0;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strncmp(arg, "--", 2) != 0) {
      snprintf(err, errlen, "unexpected argument '%s' (see gemmd --help)", arg);
      return GEMMD_EINVAL;
    }
    char name[128];
    const char *value;
    const char *eq = strchr(arg, '=');
    if (eq != NULL) {
      const size_t nl = (size_t)(eq - arg - 2);
      if (nl >= sizeof name) {
        snprintf(err, errlen, "unknown option '%s'", arg);
        return GEMMD_EINVAL;
      }
      memcpy(name, arg + 2, nl);
      name[nl] = '\0';
      value = eq + 1;
    } else {
      snprintf(name, sizeof name, "%s", arg + 2);
      if (i + 1 >= argc) {
        snprintf(err, errlen, "--%s needs a value", name);
        return GEMMD_EINVAL;
      }
      value = argv[++i];
    }
    if (strcmp(name, "config") == 0) continue;
    if (strcmp(name, "preload") == 0 && !preload_from_flags) {
      cfg->n_preload = 0;
      preload_from_flags = 1;
    }
    if (gemmd_config_set(cfg, name, value, err, errlen) != GEMMD_OK) return GEMMD_EINVAL;
  }
  regex_t re;
  const int bad_re = cfg->preload_filter[0] != '\0' ? regcomp(&re, cfg->preload_filter, REG_EXTENDED | REG_NOSUB) : 0;
  if (bad_re != 0) {
    char why[256];
    regerror(bad_re, &re, why, sizeof why);
    snprintf(err, errlen, "preload-filter: '%s' is not a POSIX extended regex: %s", cfg->preload_filter, why);
    return GEMMD_EINVAL;
  }
  if (cfg->preload_filter[0] != '\0') regfree(&re);
  return GEMMD_OK;
}

void gemmd_config_print_help(FILE *out) {
  fprintf(out,
          "usage: gemmd [--option value | --option=value]...\n\n"
          "gemmd serves FP8 GEMMs (D = A*B^T) over gRPC, with Prometheus metrics and health\n"
          "endpoints over HTTP. Each option can also be set in the --config file\n"
          "('name = value' lines, # comments) or as the environment variable GEMMD_NAME\n"
          "(upper case, '-' -> '_'). Flags override the environment, which overrides the\n"
          "file. Sizes take K, M, G, T suffixes (powers of 1024).\n\n"
          "  --config FILE                read options from FILE (also GEMMD_CONFIG)\n"
          "  --help                       this text\n"
          "  --version                    print the version and exit\n");
  for (size_t i = 0; i < N_OPTIONS; i++) {
    const opt_t *o = &options[i];
    char left[64];
    const char *meta = o->type == OPT_INT    ? "N"
                       : o->type == OPT_SIZE ? "BYTES"
                       : o->type == OPT_ENUM ? o->choices
                       : o->type == OPT_LIST ? "FILE"
                                             : "VALUE";
    snprintf(left, sizeof left, "--%s %s", o->name, meta);
    fprintf(out, "  %-28s %s", left, o->help);
    if (o->type == OPT_LIST) {
      fprintf(out, "\n");
    } else {
      fprintf(out, " [default: %s]\n", o->def[0] ? o->def : "none");
    }
  }
}

void gemmd_config_log(const gemmd_config_t *cfg) {
  char line[3500];
  size_t n = 0;
  for (size_t i = 0; i < N_OPTIONS && n < sizeof line; i++) {
    const opt_t *o = &options[i];
    const char *field = (const char *)cfg + o->offset;
    int w = 0;
    switch (o->type) {
      case OPT_STRING:
      case OPT_ENUM:
        w = snprintf(line + n, sizeof line - n, "%s%s=\"%s\"", n ? " " : "", o->name, field);
        break;
      case OPT_INT:
        w = snprintf(line + n, sizeof line - n, "%s%s=%" PRId64, n ? " " : "", o->name,
                     *(const int64_t *)field);
        break;
      case OPT_SIZE:
        w = snprintf(line + n, sizeof line - n, "%s%s=%" PRIu64, n ? " " : "", o->name,
                     *(const uint64_t *)field);
        break;
      case OPT_LIST:
        for (int j = 0; j < cfg->n_preload && n < sizeof line; j++) {
          w = snprintf(line + n, sizeof line - n, " %s=\"%s\"", o->name, cfg->preload[j]);
          if (w > 0) n += (size_t)w;
        }
        w = 0;
        break;
    }
    if (w > 0) n += (size_t)w;
  }
  if (n >= sizeof line) n = sizeof line - 1;
  line[n] = '\0';
  gemmd_log(GEMMD_LOG_INFO, "config", "file=\"%s\" %s", cfg->config_file, line);
}
