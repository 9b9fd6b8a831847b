/* One model worker of the serving benchmark (tools/bench/serving.py), on libgemmclient.
 *
 *   serving_worker ADDRESS M K WEIGHT_IDS START_AT SECONDS
 *
 * ADDRESS picks the transport (HOST:PORT is gRPC, unix:///PATH shared memory). The worker
 * connects, builds one E4M3 A (M×K, 1×128 scales; in the arena over shared memory, with
 * D there too), then sends one synchronous GEMM at a time, cycling through its
 * comma-separated WEIGHT_IDS, until START_AT + SECONDS (CLOCK_REALTIME seconds).
 * Requests sent before START_AT warm up and are not counted. START_AT "-" is a start given
 * later: once WARM_CALLS requests have been answered (D sized, regions open), the worker
 * prints "ready" and reads START_AT from its stdin, so that a window begins only when
 * every worker is warm, however long they took to start. At the end it prints one JSON line:
 *   {"connect_ns": N, "requests": N, "errors": N, "first_error": "...", "lat_ns": [...]}
 * with the round-trip time of every counted request.
 *
 * ADDRESS unixdev:///PATH (client c-dev) keeps A, its scales and D in GPU memory: one
 * cudaMalloc block of this process, opened in gemmd as a region by its CUDA IPC handle
 * (docs/shm-protocol.md §7), so no byte of a request crosses PCIe; the worker syncs its
 * stream before each request, as a worker whose A a kernel just wrote must. The CUDA
 * runtime is loaded at run time, so the worker builds and runs without it elsewhere.
 * unixmem:///PATH (client c-mem) does the same through a memfd region, which gemmd's CPU
 * backend takes. session:HOST:PORT (client c-stream) sends its requests over gRPC in a GEMM
 * session (gemmclient.h): one GemmStream opened once, each answer waited for on this
 * thread. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "client/lib/gemmclient.h"

enum { MAX_WEIGHTS = 1024, WARM_CALLS = 3 };

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_ids(char *list, uint64_t *ids) {
  int n = 0;
  for (char *tok = strtok(list, ","); tok != NULL && n < MAX_WEIGHTS; tok = strtok(NULL, ",")) {
    ids[n++] = strtoull(tok, NULL, 10);
  }
  return n;
}

/* JSON string body: quotes, backslashes and control characters escaped. */
static void print_json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') {
      printf("\\%c", *s);
    } else if ((unsigned char)*s < 0x20) {
      printf("\\u%04x", (unsigned char)*s);
    } else {
      putchar(*s);
    }
  }
  putchar('"');
}

/* The few CUDA runtime calls a c-dev worker makes. */
typedef struct {
  int (*malloc_)(void **ptr, size_t bytes);
  int (*memcpy_)(void *dst, const void *src, size_t bytes, int kind);
  int (*ipc_handle)(void *handle64, void *ptr);
  int (*stream_sync)(void *stream);
} cudart_t;

static int load_cudart(cudart_t *rt) {
  static const char *const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  void *h = NULL;
  for (size_t i = 0; h == NULL && i < sizeof names / sizeof names[0]; i++) {
    h = dlopen(names[i], RTLD_NOW);
  }
  if (h == NULL) return -1;
  *(void **)&rt->malloc_ = dlsym(h, "cudaMalloc");
  *(void **)&rt->memcpy_ = dlsym(h, "cudaMemcpy");
  *(void **)&rt->ipc_handle = dlsym(h, "cudaIpcGetMemHandle");
  *(void **)&rt->stream_sync = dlsym(h, "cudaStreamSynchronize");
  return rt->malloc_ && rt->memcpy_ && rt->ipc_handle && rt->stream_sync ? 0 : -1;
}

enum { OPERANDS_ARENA, OPERANDS_DEVICE, OPERANDS_MEMFD };
enum { CUDA_MEMCPY_HOST_TO_DEVICE = 1 };

static size_t round256(size_t x) { return (x + 255) & ~(size_t)255; }

/* One region holding A at 0, its scales and a D of d_bytes; names them in call. */
static int open_region(gemmd_client_t *c, int mode, const cudart_t *rt, gemmd_gemm_call_t *call,
                       size_t a_bytes, size_t s_bytes, size_t d_bytes, gemmd_status_t *st) {
  const size_t s_off = round256(a_bytes), d_off = s_off + round256(s_bytes);
  const size_t bytes = d_off + round256(d_bytes);
  uint32_t id = 0;
  int rc;
  if (mode == OPERANDS_DEVICE) {
    void *block = NULL;
    uint8_t handle[64];
    if (rt->malloc_(&block, bytes) != 0 ||
        rt->memcpy_(block, call->a.data, a_bytes, CUDA_MEMCPY_HOST_TO_DEVICE) != 0 ||
        rt->memcpy_((uint8_t *)block + s_off, call->a.scales, s_bytes, CUDA_MEMCPY_HOST_TO_DEVICE) != 0 ||
        rt->ipc_handle(handle, block) != 0) {
      snprintf(st->message, sizeof st->message, "CUDA: no device block for the operands");
      return -1;
    }
    rc = gemmd_client_region_open_cuda_ipc(c, handle, bytes, &id, st);
  } else {
    const int fd = memfd_create("serving-worker", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    uint8_t *p = MAP_FAILED;
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0 ||
        (p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
      snprintf(st->message, sizeof st->message, "no memfd for the operands");
      return -1;
    }
    memcpy(p, call->a.data, a_bytes);
    memcpy(p + s_off, call->a.scales, s_bytes);
    rc = gemmd_client_region_open_fd(c, fd, bytes, &id, st);
    close(fd);
  }
  if (rc != 0) return rc;
  call->a_region = (gemmd_region_ref_t){id, 0};
  call->a_scales_region = (gemmd_region_ref_t){id, s_off};
  call->d_region = (gemmd_region_ref_t){id, d_off};
  call->d_out = NULL;
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: serving_worker ADDRESS M K WEIGHT_IDS START_AT SECONDS\n");
    return 2;
  }
  char addr[4096];
  int mode = OPERANDS_ARENA, use_session = 0;
  cudart_t rt = {0};
  if (strncmp(argv[1], "unixdev://", 10) == 0 || strncmp(argv[1], "unixmem://", 10) == 0) {
    mode = argv[1][4] == 'd' ? OPERANDS_DEVICE : OPERANDS_MEMFD;
    snprintf(addr, sizeof addr, "unix://%s", argv[1] + 10);
    if (mode == OPERANDS_DEVICE && load_cudart(&rt) != 0) {
      fprintf(stderr, "serving_worker: %s needs the CUDA runtime (libcudart)\n", argv[1]);
      return 1;
    }
  } else if (strncmp(argv[1], "session:", 8) == 0) {
    use_session = 1;
    snprintf(addr, sizeof addr, "%s", argv[1] + 8);
  } else {
    snprintf(addr, sizeof addr, "%s", argv[1]);
  }
  const uint32_t m = (uint32_t)strtoul(argv[2], NULL, 10), k = (uint32_t)strtoul(argv[3], NULL, 10);
  static uint64_t ids[MAX_WEIGHTS];
  const int n_ids = parse_ids(argv[4], ids);
  const int start_later = strcmp(argv[5], "-") == 0;
  double start_at = start_later ? 1e300 : strtod(argv[5], NULL), end_at = start_at + strtod(argv[6], NULL);
  if (m == 0 || k == 0 || n_ids == 0) {
    fprintf(stderr, "serving_worker: M, K and at least one weight id are needed\n");
    return 2;
  }

  gemmd_status_t st;
  gemmd_client_t *c = NULL;
  const uint64_t t_connect = mono_ns();
  if (gemmd_client_open(addr, NULL, &c, &st) != 0) {
    fprintf(stderr, "serving_worker: %s: %s\n", addr, st.message);
    return 1;
  }
  gemmd_gemm_session_t *session = NULL;
  if (use_session && gemmd_client_gemm_session_open(c, &session, &st) != 0) {
    fprintf(stderr, "serving_worker: session: %s\n", st.message);
    return 1;
  }
  const int shm = strcmp(gemmd_client_transport(c), "shm") == 0;
  const size_t a_bytes = (size_t)m * k, ns = (size_t)m * ((k + 127) / 128);
  uint8_t *a = shm ? gemmd_client_shm_alloc(c, a_bytes) : malloc(a_bytes);
  float *sa = shm ? gemmd_client_shm_alloc(c, ns * sizeof(float)) : malloc(ns * sizeof(float));
  if (a == NULL || sa == NULL) {
    fprintf(stderr, "serving_worker: no memory for A\n");
    return 1;
  }
  srand((unsigned)mono_ns());
  for (size_t i = 0; i < a_bytes; i++) {
    /* finite E4M3 codes of either sign, exponent bits below the NaN pattern */
    a[i] = (uint8_t)((rand() & 0x80) | (rand() % 0x70));
  }
  for (size_t i = 0; i < ns; i++) sa[i] = 1.0f / 64;

  gemmd_gemm_call_t call;
  memset(&call, 0, sizeof call);
  call.a = (gemmd_operand_t){m, k, k, GEMMD_DTYPE_FP8_E4M3, a, GEMMD_SCALE_BLOCK_1X128, sa};
  call.out_dtype = GEMMD_DTYPE_BF16;
  /* The largest weight's D: N is not known here; ask the first call to size it. */
  void *d = NULL;
  const uint64_t connect_ns = mono_ns() - t_connect;

  size_t cap = 1 << 16, n_lat = 0;
  uint64_t *lat = malloc(cap * sizeof *lat);
  uint64_t requests = 0, errors = 0, id = 0, answered = 0;
  char first_error[600] = "";
  const double warm_until = wall_s() + 120; /* a worker that cannot warm up gives up */
  for (int i = 0;; i = (i + 1) % n_ids) {
    const double now = wall_s();
    if (now >= end_at || (start_later && answered < WARM_CALLS && now >= warm_until)) break;
    call.weight_id = ids[i];
    call.request_id = ++id;
    if (call.d_region.region == 0) call.d_out = d;
    gemmd_gemm_result_t r;
    const uint64_t t0 = mono_ns();
    if (mode == OPERANDS_DEVICE && call.d_region.region != 0) rt.stream_sync(NULL);
    const int rc = session != NULL ? gemmd_gemm_session_call(session, &call, &r, &st)
                                   : gemmd_client_gemm(c, &call, &r, &st);
    const uint64_t dt = mono_ns() - t0;
    if (rc != 0) {
      errors += now >= start_at;
      if (first_error[0] == '\0') snprintf(first_error, sizeof first_error, "%s", st.message);
      continue;
    }
    if (shm && d == NULL && mode == OPERANDS_ARENA) { /* from now on D lands in the arena */
      d = gemmd_client_shm_alloc(c, r.data_bytes);
    } else if (mode != OPERANDS_ARENA && call.d_region.region == 0) { /* from now on: the region */
      if (open_region(c, mode, &rt, &call, a_bytes, ns * sizeof(float), r.data_bytes, &st) != 0) {
        fprintf(stderr, "serving_worker: region: %s\n", st.message);
        return 1;
      }
    }
    gemmd_gemm_result_free(&r);
    if (start_later && ++answered == WARM_CALLS) { /* warm: the window's start comes on stdin */
      printf("ready\n");
      fflush(stdout);
      if (scanf("%lf", &start_at) != 1) {
        fprintf(stderr, "serving_worker: no START_AT on stdin\n");
        return 1;
      }
      end_at = start_at + strtod(argv[6], NULL);
    }
    if (now < start_at) continue;
    requests++;
    if (n_lat == cap) {
      cap *= 2;
      lat = realloc(lat, cap * sizeof *lat);
      if (lat == NULL) return 1;
    }
    lat[n_lat++] = dt;
  }
  printf("{\"connect_ns\": %llu, \"requests\": %llu, \"errors\": %llu, \"first_error\": ",
         (unsigned long long)connect_ns, (unsigned long long)requests, (unsigned long long)errors);
  print_json_string(first_error);
  printf(", \"lat_ns\": [");
  for (size_t i = 0; i < n_lat; i++) printf(i ? ",%llu" : "%llu", (unsigned long long)lat[i]);
  printf("]}\n");
  if (session != NULL && gemmd_gemm_session_close(session, &st) != 0) {
    fprintf(stderr, "serving_worker: session close: %s\n", st.message);
  }
  gemmd_client_close(c);
  if (!shm) { /* over shared memory they were the arena's */
    free(a);
    free(sa);
  }
  free(lat);
  return 0;
}
