/* The CUDA engine: gemmd's GPU behind the engine seam (engine.h).
 *
 * Per batch: the loop has planned it (gemmd_batch_plan, rows of A 16-byte aligned); the
 * staging thread lays it out as one device batch buffer (kernels/group_table.h: header,
 * table, quantization jobs, the WGMMA kernel's tensor maps, A / A-scale / raw-A / inline-B
 * / D arenas), fills a pinned copy, and runs on the slot's stream: upload (one DMA, plus a
 * DMA straight from the client's pinned arena for each large A), GPU quantization of raw A,
 * the grouped GEMM (or one cuBLASLt call per group), download of D (one DMA to the pinned
 * copy, or DMAs straight into pinned arenas). With graphs on, the kernels between the two
 * copies are captured once per slot and replayed for every batch: they read group count and
 * shapes from the device buffer, so no batch needs a recapture. A small batch, whose upload
 * and results each go by one copy-kernel launch, runs as one graph launch with those copies
 * as nodes, their lists set per batch (copy_graph_t); a larger one's copies, whose sizes
 * change, stay plain stream copies around the replay.
 * cuBLASLt graphs depend on the shapes: they are cached by the batch's signature.
 *
 * Several slots (--engine-slots) let later batches stage, upload and queue their kernels
 * while batch i computes, and batch i's results travel while batch i+1's kernels run. A
 * completion thread polls the launched batches' events, takes whichever is done first (a
 * small batch is not held behind a large one launched before it), reads its device time; it
 * hands the batch to one of the finishing threads, which copy results into arenas that
 * are not pinned, answer its shared-memory requests (a CQE and, for a sleeping client, a
 * wake-up: several µs each) and report it to the loop. Answering is thereby never in the
 * way of noticing the next batch.
 * A CUDA error marks the engine failed: the batch and every later one get UNAVAILABLE
 * with device_failed set, and gemmd stops with a non-zero exit. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "daemon/clock.h"
#include "daemon/engine.h"
#include "daemon/engine_cuda_fault.h"
#include "daemon/ipc_maps.h"
#include "daemon/kernel_choice.h"
#include "daemon/log.h"
#include "daemon/status.h"
#include "gemmd/shm_v1.h"
#include "kernels/cublaslt_gemm.h"
#include "kernels/errors.h"
#include "kernels/gpu_copy.h"
#include "kernels/gpu_gemm.h"
#include "kernels/gpu_quantize.h"

enum { MAX_SLOTS = 8, N_FINISHERS = 4, ROW_ALIGN = 16, LT_CACHE = 64 };

/* What a batch's kernels are, as a mask: the GEMM launches it needs (GEMMD_GPU_PART_*,
 * gpu_gemm.h: the WGMMA kernel of its tile kind, the FP32-output kernel) and whether it
 * has raw A to quantize. A slot keeps one graph per mask, so a batch launches only the
 * kernels it has work for. */
enum { PART_QUANTIZE = GEMMD_GPU_PARTS_ALL + 1, N_PART_MASKS = 2 * PART_QUANTIZE };

/* A weight's device copy. */
typedef struct {
  uint8_t *data;      /* n rows of ldb bytes, zero padded */
  float *scales;      /* as registered */
  float *scales_lt;   /* 128×128 scales in cuBLASLt's layout (cublaslt kernel only) */
  uint32_t ldb;
  uint64_t bytes;
} dev_weight_t;

typedef struct {
  uint64_t key;
  cudaGraphExec_t exec;
  uint64_t used;
} lt_graph_t;

/* A graph that holds a small batch's copies as well as its kernels (graph_copies): the
 * upload before them and the results after, each one copy-kernel node whose list is set
 * per batch (cudaGraphExecKernelNodeSetParams), so that the batch is one graph launch.
 * Three forms: the upload node alone (no results to copy) and upload + results, both with
 * the GEMM between two event nodes; and upload + results (an empty list where the batch
 * has none) keeping the copy clock (gemmd_gpu_copy_clock_t) instead of the event nodes,
 * about 2 µs less of a small batch's device time (docs/bench/serving.md). */
enum { CG_UPLOAD, CG_BOTH, CG_CLOCKED, N_COPY_GRAPHS };
enum { KEPT_COPIES = 4, NOT_KEPT = UINT32_MAX };
typedef struct {
  cudaGraph_t graph; /* kept while exec lives: its nodes name what is set per batch */
  cudaGraphExec_t exec;
  cudaGraphNode_t up, down; /* down: NULL in CG_UPLOAD */
  /* the lists the two nodes hold (at most KEPT_COPIES copies; NOT_KEPT: not known here):
   * a batch with the same copies as the last one, a worker's next request of the same
   * shape, sets nothing */
  uint32_t up_n, down_n;
  gemmd_gpu_copy_t up_list[KEPT_COPIES], down_list[KEPT_COPIES];
} copy_graph_t;

typedef struct {
  /* The batch's stream: `urgent` (the highest priority) for batches of requests, `bulk`
   * (the lowest) for pieces of large requests, so that a small batch's kernels get SMs
   * ahead of a piece's when both are resident. */
  cudaStream_t stream;
  cudaStream_t urgent, bulk;
  /* start/stop: the batch's device time; gemm_start/gemm_stop: its GEMM kernels alone
   * (recorded inside the graph) */
  cudaEvent_t start, stop, gemm_start, gemm_stop;
  uint8_t *dev, *host; /* the batch buffer and its pinned copy */
  uint64_t cap;
  /* the gemmd kernel's graphs for this slot's buffer, by the batch's part mask */
  cudaGraphExec_t exec[N_PART_MASKS];
  uint32_t parts; /* the batch's part mask */
  int use_lt;     /* this batch runs on cuBLASLt */
  int measuring;  /* its GEMM time is one of the measured runs of its signature */
  uint64_t sig;   /* its signature (kernel_choice.h), when measuring */
  void *ws;       /* the WGMMA kernel's split-K workspace for this slot's stream (zeroed once) */
  /* The copy clock of its CG_CLOCKED graphs (gemmd_gpu_copy_clock_t), its words on the
   * device and in pinned memory; gemm_clocked: the batch runs in such a graph, its device
   * and GEMM times are read there instead of from the events, and its end is noticed by
   * the clock's end word. */
  unsigned long long *clock_dev;
  volatile unsigned long long *clock_host;
  int gemm_clocked;
  lt_graph_t lt[LT_CACHE];
  /* graphs with copy nodes, by part mask and form (CG_*) */
  copy_graph_t cg[N_PART_MASKS][N_COPY_GRAPHS];
  gemmd_gpu_copy_node_t up_node, down_node; /* their lists for the batch */
  gemmd_batch_t *batch;
  gemmd_batch_header_t hdr;
  int busy;
  /* the batch's copy-kernel list (gemmd_gpu_copy_many): clients' device memory, and the
   * upload and results of a batch of at most copy_kernel_bytes */
  gemmd_gpu_copy_t *copies;
  uint32_t copies_cap;
  /* per request of the batch (sized with the copy list, which has more entries than
   * requests): which operands in clients' device memory the GEMM reads or writes where
   * they lie (IN_PLACE_A, IN_PLACE_D), so that no copy moves them */
  uint8_t *in_place;
} slot_t;

#define IN_PLACE_A 1u
#define IN_PLACE_D 2u

/* A batch handed from the staging thread to the completion thread. */
typedef struct {
  gemmd_batch_t *b;
  slot_t *s; /* NULL: it failed before reaching the device */
} launched_t;

typedef struct cuda_engine_s cuda_engine_t;

/* A finishing thread's argument. */
typedef struct {
  cuda_engine_t *e;
  int index;
} finisher_arg_t;

struct cuda_engine_s {
  gemmd_engine_t base;
  int device;
  gemmd_ipc_maps_t ipc_maps; /* clients' regions by CUDA IPC handle, each opened once */
  /* Which implementation runs batches: gemmd's own kernel, cuBLASLt, or per batch by
   * measured time (kernel_choice.h). cuBLASLt's handle and the weights' scales in its
   * layout exist unless MODE_OWN; the WGMMA kernel's workspaces unless MODE_CUBLASLT. */
  enum { MODE_OWN, MODE_CUBLASLT, MODE_MEASURED } mode;
  int use_graphs;
  /* a batch whose upload and results each fit one copy-kernel launch runs as one graph
   * with them (copy_graph_t): with graphs on, unless such a graph's capture came out in an
   * unexpected shape */
  int graph_copies;
  gemmd_gpu_kernel_t kernel; /* gemmd's own kernel */
  gemmd_kernel_choices_t *choices; /* MODE_MEASURED */
  char choices_path[4096];          /* where they persist; "" for nowhere */
  int64_t fault_after;
  gemmd_cublaslt_t *lt;
  slot_t slots[MAX_SLOTS];
  unsigned n_slots;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* FIFOs to the staging and completion threads. The counts change under the mutex; they
   * are atomic so that a thread spinning for work (--engine-spin-us) may poll them
   * without it. */
  gemmd_batch_t *submitted[MAX_SLOTS];
  atomic_uint n_submitted;
  launched_t launched[MAX_SLOTS];
  atomic_uint n_launched;
  /* Batches with a status, for the finishing threads (fin_cv; under mu). */
  gemmd_batch_t *finished[MAX_SLOTS];
  atomic_uint n_finished;
  int completer_done;
  /* Finisher 0 is polling n_finished (under mu: set before it lets go of mu to poll, clear
   * once it holds mu again), so a batch handed over needs no wake-up through fin_cv. */
  int hot_polling;
  pthread_cond_t fin_cv;
  pthread_t finishers[N_FINISHERS];
  finisher_arg_t finisher_args[N_FINISHERS];
  uint64_t spin_ns;
  /* A batch's upload, and its results, of at most this many bytes go by copy kernel
   * (--engine-copy-kernel-bytes; 0: never); arena_by_kernel: registered arenas may be
   * written by a kernel through their host pointers. */
  uint64_t copy_kernel_bytes;
  int arena_by_kernel;
  uint64_t lt_clock;
  int stop;
  atomic_int failed;
  char failure[256];
  uint64_t batches;
  atomic_uint_fast64_t weight_bytes;
  /* Weight uploads: two pinned staging buffers on a stream of their own, one weight at a
   * time (up_mu): rows are copied (and padded) into one buffer while the other's DMA runs. */
  pthread_mutex_t up_mu;
  cudaStream_t up_stream;
  uint8_t *up_host[2];
  cudaEvent_t up_free[2];
  pthread_t stager, completer;
};

static uint64_t align256(uint64_t x) { return (x + 255u) & ~(uint64_t)255u; }

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Takes the mutex of a thread that has just seen work arrive. The thread that handed the
 * work over usually still holds it (it counts the work under the mutex), and a plain
 * pthread_mutex_lock would sleep in the kernel and be woken by the unlock: a futex
 * round trip of several µs on every hand-off. So the lock is tried for up to
 * LOCK_SPIN_NS first. */
enum { LOCK_SPIN_NS = 20000 };

static void lock_soon(cuda_engine_t *e) {
  if (pthread_mutex_trylock(&e->mu) == 0) return;
  const uint64_t end = gemmd_now_ns() + LOCK_SPIN_NS;
  do {
    cpu_relax();
    if (pthread_mutex_trylock(&e->mu) == 0) return;
  } while (gemmd_now_ns() < end);
  pthread_mutex_lock(&e->mu);
}

/* With the mutex held and nothing to do: poll `count` for up to e->spin_ns without the
 * mutex (a wake-up through the condition variable costs tens of µs on a busy host), then
 * come back holding it. The caller re-checks and sleeps as before if nothing came. */
static void spin_for_work(cuda_engine_t *e, const atomic_uint *count) {
  if (e->spin_ns == 0 || e->stop) return;
  pthread_mutex_unlock(&e->mu);
  const uint64_t end = gemmd_now_ns() + e->spin_ns;
  while (atomic_load_explicit(count, memory_order_acquire) == 0 && gemmd_now_ns() < end) cpu_relax();
  lock_soon(e);
}

/* Whether a launched batch is done (cudaSuccess), not yet (cudaErrorNotReady), or failed.
 * A clocked graph's last node says so in pinned memory, which the host sees about 4 µs
 * before the stop event after it (docs/bench/serving.md); every EVENT_EVERY polls the event
 * is asked all the same, since a launch that fails never writes the word. */
enum { EVENT_EVERY = 64 };

static cudaError_t batch_state(const slot_t *s, unsigned *polls) {
  if (s == NULL) return cudaSuccess; /* it failed before reaching the device */
  if (s->gemm_clocked) {
    if (s->clock_host[GEMMD_GPU_COPY_CLOCK_AFTER_END] != 0) {
      atomic_thread_fence(memory_order_acquire); /* the clock's other words after it */
      return cudaSuccess;
    }
    if (++*polls % EVENT_EVERY != 0) return cudaErrorNotReady;
  }
  return cudaEventQuery(s->stop);
}

/* Waits until one of the launched batches is done, whichever it is: a decode batch on the
 * urgent stream is noticed as soon as it ends even while a large piece launched before it
 * is still running. Polls every launched batch (batch_state) without the mutex, which the
 * stager, the finishers and the loop's submit need meanwhile; after e->spin_ns without a
 * launch or a completion it polls every POLL_SLEEP_US, woken early by a launch. Called and
 * returns with the mutex held: the batch's index in e->launched, its query result in *err. */
enum { POLL_SLEEP_US = 50 };

static unsigned wait_any_done(cuda_engine_t *e, cudaError_t *err) {
  uint64_t spin_end = gemmd_now_ns() + e->spin_ns;
  unsigned seen = e->n_launched, polls = 0;
  pthread_mutex_unlock(&e->mu);
  for (;;) {
    /* Entries below n stay put until this thread removes them; the stager fills an entry
     * before it counts it (the count's acquire orders the two). */
    const unsigned n = atomic_load_explicit(&e->n_launched, memory_order_acquire);
    for (unsigned i = 0; i < n; i++) {
      const cudaError_t q = batch_state(e->launched[i].s, &polls);
      if (q != cudaErrorNotReady) {
        *err = q;
        lock_soon(e);
        return i;
      }
    }
    if (n != seen) { /* a new launch: spin for it */
      seen = n;
      spin_end = gemmd_now_ns() + e->spin_ns;
    }
    if (gemmd_now_ns() < spin_end) {
      cpu_relax();
      continue;
    }
    pthread_mutex_lock(&e->mu);
    if (e->n_launched == seen) {
      struct timespec until;
      clock_gettime(CLOCK_MONOTONIC, &until);
      until.tv_nsec += POLL_SLEEP_US * 1000;
      if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
      }
      pthread_cond_timedwait(&e->cv, &e->mu, &until); /* cv: monotonic clock */
    }
    pthread_mutex_unlock(&e->mu);
  }
}

/* A clocked batch's device time, from its upload's start to its results' end, and its
 * GEMM's, between the two (gemmd_gpu_copy_clock_t); 0 where the clock reads backwards. */
static void read_clock(const slot_t *s, gemmd_batch_t *b) {
  const volatile unsigned long long *h = s->clock_host;
  const unsigned long long up0 = h[GEMMD_GPU_COPY_CLOCK_BEFORE_START], up1 = h[GEMMD_GPU_COPY_CLOCK_BEFORE_END];
  const unsigned long long down0 = h[GEMMD_GPU_COPY_CLOCK_AFTER_START], down1 = h[GEMMD_GPU_COPY_CLOCK_AFTER_END];
  b->compute_ns = up0 != 0 && down1 >= up0 ? down1 - up0 : 0;
  b->gemm_ns = up1 != 0 && down0 >= up1 ? down0 - up1 : 0;
}

/* Records the first CUDA failure; later calls keep it. Returns 1 when err is an error. */
static int cuda_failed(cuda_engine_t *e, cudaError_t err, const char *what) {
  if (err == cudaSuccess) return 0;
  if (!atomic_exchange(&e->failed, 1)) {
    snprintf(e->failure, sizeof e->failure, "%s: %s", what, cudaGetErrorString(err));
    gemmd_log(GEMMD_LOG_ERROR, "device failed", "reason=\"%s\"", e->failure);
  }
  return 1;
}

/* ---- Weights ------------------------------------------------------------------------------ */

enum { STAGE_BYTES = 8u << 20 };

/* Copies rows × k bytes from host memory (pageable: a weight's own, or its file's mapping)
 * to dev with rows ldb apart, the padding zero: pieces of whole rows staged through the
 * pinned buffers, so that filling one overlaps the other's DMA. A pageable cudaMemcpy
 * would stage through the driver's own buffers one piece at a time. */
static cudaError_t upload_rows(cuda_engine_t *e, uint8_t *dev, const uint8_t *src, uint32_t rows, uint32_t k,
                               uint32_t ldb) {
  cudaError_t err = cudaSuccess;
  if (ldb > STAGE_BYTES) { /* rows longer than a staging buffer: one copy each */
    for (uint32_t r = 0; r < rows && !err; r++) {
      err = cudaMemcpy(dev + (size_t)r * ldb, src + (size_t)r * k, k, cudaMemcpyHostToDevice);
      if (!err && ldb > k) err = cudaMemset(dev + (size_t)r * ldb + k, 0, ldb - k);
    }
    return err;
  }
  const uint32_t per = STAGE_BYTES / ldb;
  pthread_mutex_lock(&e->up_mu);
  for (uint32_t r = 0, i = 0; r < rows && !err; r += per, i ^= 1) {
    const uint32_t n = rows - r < per ? rows - r : per;
    err = cudaEventSynchronize(e->up_free[i]); /* its previous DMA is done */
    if (err) break;
    uint8_t *h = e->up_host[i];
    if (ldb == k) {
      memcpy(h, src + (size_t)r * k, (size_t)n * k);
    } else {
      for (uint32_t j = 0; j < n; j++) {
        memcpy(h + (size_t)j * ldb, src + (size_t)(r + j) * k, k);
        memset(h + (size_t)j * ldb + k, 0, ldb - k);
      }
    }
    err = cudaMemcpyAsync(dev + (size_t)r * ldb, h, (size_t)n * ldb, cudaMemcpyHostToDevice, e->up_stream);
    if (!err) err = cudaEventRecord(e->up_free[i], e->up_stream);
  }
  const cudaError_t sync = cudaStreamSynchronize(e->up_stream);
  pthread_mutex_unlock(&e->up_mu);
  return err ? err : sync;
}

/* A BF16/FP16/FP32 weight quantized on the GPU (kernels/gpu_quantize.h, the same bits as
 * the host's quantizer): staged up, quantized, the E4M3 bytes and scales copied back for
 * the weight's host copy (which --weight-dir saves and weight_load uploads). */
static int cuda_weight_quantize(gemmd_engine_t *base, const gemmd_operand_t *src, uint8_t *dst, float *scales) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  if (atomic_load(&e->failed)) return GEMMD_EDEVICE;
  if (src->scale_layout != GEMMD_SCALE_NONE || src->ld != src->cols || gemmd_dtype_is_fp8(src->dtype)) {
    return GEMMD_ENOTSUP;
  }
  const size_t esz = gemmd_dtype_size(src->dtype), elems = (size_t)src->rows * src->cols;
  const size_t ns = gemmd_scale_count(GEMMD_SCALE_BLOCK_128X128, src->rows, src->cols);
  uint8_t *d_src = NULL, *d_dst = NULL;
  float *d_scales = NULL;
  cudaError_t err = cudaSetDevice(e->device);
  if (!err) err = cudaMalloc((void **)&d_src, elems * esz);
  if (!err) err = cudaMalloc((void **)&d_dst, elems);
  if (!err) err = cudaMalloc((void **)&d_scales, 4 * ns);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    cudaFree(d_src);
    cudaFree(d_dst);
    return GEMMD_ENOMEM;
  }
  if (!err) err = upload_rows(e, d_src, src->data, src->rows, (uint32_t)(src->cols * esz), (uint32_t)(src->cols * esz));
  pthread_mutex_lock(&e->up_mu);
  if (!err && gemmd_gpu_quantize_128x128(d_src, src->dtype, src->cols, src->rows, src->cols, GEMMD_DTYPE_FP8_E4M3,
                                         d_dst, src->cols, d_scales, e->up_stream) != GEMMD_OK) {
    err = cudaErrorLaunchFailure;
  }
  if (!err) err = cudaMemcpyAsync(dst, d_dst, elems, cudaMemcpyDeviceToHost, e->up_stream);
  if (!err) err = cudaMemcpyAsync(scales, d_scales, 4 * ns, cudaMemcpyDeviceToHost, e->up_stream);
  if (!err) err = cudaStreamSynchronize(e->up_stream);
  pthread_mutex_unlock(&e->up_mu);
  cudaFree(d_src);
  cudaFree(d_dst);
  cudaFree(d_scales);
  if (err) {
    cuda_failed(e, err, "weight quantization");
    return GEMMD_EDEVICE;
  }
  return GEMMD_OK;
}

static int cuda_weight_load(gemmd_engine_t *base, gemmd_weight_t *w) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  if (atomic_load(&e->failed)) return GEMMD_EDEVICE;
  dev_weight_t *d = calloc(1, sizeof *d);
  if (d == NULL) return GEMMD_ENOMEM;
  d->ldb = (w->k + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
  const size_t ns = gemmd_scale_count(w->scale_layout, w->n, w->k);
  const size_t data_bytes = (size_t)w->n * d->ldb;
  cudaError_t err = cudaSetDevice(e->device);
  if (!err) err = cudaMalloc((void **)&d->data, data_bytes);
  if (!err) err = upload_rows(e, d->data, w->data, w->n, w->k, d->ldb);
  if (!err && ns > 0) err = cudaMalloc((void **)&d->scales, 4 * ns);
  if (!err && ns > 0) err = cudaMemcpy(d->scales, w->scales, 4 * ns, cudaMemcpyHostToDevice);
  if (!err && e->mode != MODE_OWN && w->scale_layout == GEMMD_SCALE_BLOCK_128X128) {
    err = cudaMalloc((void **)&d->scales_lt, 4 * gemmd_cublaslt_b_scale_count(w->n, w->k));
    if (!err && gemmd_cublaslt_convert_b_scales(d->scales, w->n, w->k, d->scales_lt, 0) != GEMMD_OK) {
      err = cudaErrorLaunchFailure;
    }
    if (!err) err = cudaDeviceSynchronize();
  }
  if (err) {
    cudaFree(d->data);
    cudaFree(d->scales);
    cudaFree(d->scales_lt);
    free(d);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError(); /* not sticky: clear it */
      return GEMMD_ENOMEM;
    }
    cuda_failed(e, err, "weight upload");
    return GEMMD_EDEVICE;
  }
  d->bytes = data_bytes + 4 * ns;
  atomic_fetch_add(&e->weight_bytes, d->bytes);
  w->engine_handle = d;
  return GEMMD_OK;
}

static void cuda_weight_unload(gemmd_engine_t *base, gemmd_weight_t *w) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  dev_weight_t *d = w->engine_handle;
  if (d == NULL) return;
  cudaFree(d->data);
  cudaFree(d->scales);
  cudaFree(d->scales_lt);
  atomic_fetch_sub(&e->weight_bytes, d->bytes);
  free(d);
  w->engine_handle = NULL;
}

/* ---- Shared-memory arenas ------------------------------------------------------------------ */

/* Arena memory is registered in pieces at GEMMD_PIN_CHUNK-aligned addresses
 * (engine.h), after its pages are populated. cudaHostRegister holds every other CUDA call
 * of the process for as long as it runs (144 ms for 256 MiB of fresh pages on the H200,
 * 12.6 ms once they are populated, ~0.4 ms for 2-8 MiB of populated pages), while
 * populating them (MADV_POPULATE_WRITE) holds up no CUDA call: so no other client's batch
 * waits on one registration for long (docs/bench/serving.md). A DMA may not cross two
 * registrations, so copies to and from an arena are split at those boundaries (host_dma). */
enum { PIN_CHUNK = GEMMD_PIN_CHUNK, PIN_PAUSE_US = 200 };

static uintptr_t chunk_end(uintptr_t a) { return (a / PIN_CHUNK + 1) * PIN_CHUNK; }

/* Makes every page of [p, p + bytes) resident without changing its contents (the client
 * may be writing it): MADV_POPULATE_WRITE, else a read of each page. */
static void populate(uint8_t *p, size_t bytes) {
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
  if (madvise(p, bytes, MADV_POPULATE_WRITE) == 0) return;
  for (size_t o = 0; o < bytes; o += 4096) (void)*(volatile const uint8_t *)(p + o);
}

static void unregister_range(uint8_t *p, size_t bytes) {
  for (uintptr_t a = (uintptr_t)p, end = (uintptr_t)p + bytes; a < end; a = chunk_end(a)) {
    cudaHostUnregister((void *)a);
  }
  cudaGetLastError();
}

static int cuda_arena_register(gemmd_engine_t *base, void *p, size_t bytes) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  cudaSetDevice(e->device);
  populate(p, bytes);
  const uintptr_t start = (uintptr_t)p, end = start + bytes;
  for (uintptr_t a = start; a < end; a = chunk_end(a)) {
    const size_t n = (chunk_end(a) < end ? chunk_end(a) : end) - a;
    const cudaError_t err = cudaHostRegister((void *)a, n, cudaHostRegisterDefault);
    if (err != cudaSuccess) {
      cudaGetLastError();
      unregister_range(p, a - start);
      gemmd_log(GEMMD_LOG_WARN, "arena not registered", "bytes=%zu reason=\"%s\"", bytes,
                cudaGetErrorString(err));
      return GEMMD_EDEVICE;
    }
    usleep(PIN_PAUSE_US); /* the batches' CUDA calls get their turn between pieces */
  }
  return GEMMD_OK;
}

static void cuda_arena_unregister(gemmd_engine_t *base, void *p, size_t bytes) {
  cudaSetDevice(((cuda_engine_t *)base)->device);
  unregister_range(p, bytes);
}

/* ---- Clients' regions of device memory (shm protocol version 2) ------------------------------ */

/* cuMemGetAddressRange (the driver's; the runtime has no call for an allocation's extent),
 * through the runtime's entry-point lookup so that gemmd links no libcuda itself. */
typedef int (*mem_range_fn)(unsigned long long *base, size_t *size, unsigned long long ptr);

/* A region opened from a CUDA IPC handle of another process's cudaMalloc block: mapped
 * here (once for all regions of the handle, ipc_maps.h), and checked to hold `bytes` from
 * its start, so that no offset the client names can reach past the block. An fd
 * (cuMemExportToShareableHandle) is not taken yet. */
static int cuda_region_open(gemmd_engine_t *base, int kind, int fd, const uint8_t handle[64],
                            uint64_t bytes, void **out, int *on_device, char *msg, size_t n) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  (void)fd;
  *on_device = 1;
  if (kind != GEMMD_SHM_REGION_CUDA_IPC) {
    snprintf(msg, n, "the CUDA backend takes regions of kind %d (a CUDA IPC handle); fds are not "
             "taken yet", GEMMD_SHM_REGION_CUDA_IPC);
    return GEMMD_CODE_UNIMPLEMENTED;
  }
  cudaSetDevice(e->device);
  _Static_assert(sizeof(cudaIpcMemHandle_t) == sizeof ((gemmd_shm_ctl_t *)0)->handle,
                 "a control message carries a whole cudaIpcMemHandle_t");
  void *p = NULL;
  const int opened = gemmd_ipc_maps_acquire(&e->ipc_maps, handle, &p);
  if (opened == GEMMD_IPC_NO_MEMORY) {
    snprintf(msg, n, "out of host memory for the region's mapping");
    return GEMMD_CODE_RESOURCE_EXHAUSTED;
  }
  if (opened != 0) {
    snprintf(msg, n, "the CUDA IPC handle could not be opened: %s", cudaGetErrorString((cudaError_t)opened));
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  mem_range_fn range = NULL;
  enum cudaDriverEntryPointQueryResult found;
  unsigned long long block = 0;
  size_t size = 0;
  if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", (void **)&range, 12000, cudaEnableDefault,
                                       &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || range == NULL ||
      range(&block, &size, (unsigned long long)(uintptr_t)p) != 0) {
    cudaGetLastError();
    gemmd_ipc_maps_release(&e->ipc_maps, p);
    snprintf(msg, n, "the region's extent could not be read (cuMemGetAddressRange)");
    return GEMMD_CODE_INTERNAL;
  }
  const uint64_t room = block + size - (unsigned long long)(uintptr_t)p;
  if (bytes == 0 || bytes > room) {
    gemmd_ipc_maps_release(&e->ipc_maps, p);
    snprintf(msg, n, "a region of %" PRIu64 " bytes does not fit its allocation (%" PRIu64
             " bytes from the handle's address)", bytes, room);
    return GEMMD_CODE_INVALID_ARGUMENT;
  }
  *out = p;
  return GEMMD_CODE_OK;
}

static void cuda_region_close(gemmd_engine_t *base, void *p, uint64_t bytes) {
  (void)bytes;
  gemmd_ipc_maps_release(&((cuda_engine_t *)base)->ipc_maps, p);
}

/* The IPC mappings' own opening and closing (ipc_maps.h), on the engine's device. */
static int ipc_open(void *ctx, const uint8_t handle[GEMMD_IPC_HANDLE_BYTES], void **p) {
  cudaSetDevice(((cuda_engine_t *)ctx)->device);
  _Static_assert(sizeof(cudaIpcMemHandle_t) == GEMMD_IPC_HANDLE_BYTES, "an IPC handle is 64 bytes");
  cudaIpcMemHandle_t h;
  memcpy(&h, handle, sizeof h);
  const cudaError_t err = cudaIpcOpenMemHandle(p, h, cudaIpcMemLazyEnablePeerAccess);
  if (err != cudaSuccess) cudaGetLastError();
  return (int)err;
}

static void ipc_close(void *ctx, void *p) {
  cudaSetDevice(((cuda_engine_t *)ctx)->device);
  if (cudaIpcCloseMemHandle(p) != cudaSuccess) cudaGetLastError();
}

/* A copy between the device and registered host memory (an arena), in pieces that each
 * stay inside one registration. */
static cudaError_t host_dma(uint8_t *dev, uint8_t *host, size_t n, enum cudaMemcpyKind kind, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  while (n > 0 && !err) {
    const size_t room = chunk_end((uintptr_t)host) - (uintptr_t)host, piece = room < n ? room : n;
    err = kind == cudaMemcpyHostToDevice ? cudaMemcpyAsync(dev, host, piece, kind, stream)
                                         : cudaMemcpyAsync(host, dev, piece, kind, stream);
    dev += piece;
    host += piece;
    n -= piece;
  }
  return err;
}

/* ---- Layout and staging ------------------------------------------------------------------- */

typedef struct {
  gemmd_batch_header_t h;
  uint64_t raw_bytes, b_bytes, lt_scales; /* arena sizes */
  uint64_t total, in_bytes;
} layout_t;

/* Where everything of the batch goes in the device buffer. */
static void lay_out(const cuda_engine_t *e, gemmd_batch_t *b, int lt, layout_t *L) {
  memset(L, 0, sizeof *L);
  uint32_t n_jobs = 0;
  uint64_t raw = 0, binl = 0;
  for (uint32_t i = 0; i < b->n_requests; i++) {
    const gemmd_request_t *r = b->requests[i];
    if (r->a_raw != NULL) {
      n_jobs++;
      raw = align256(raw + (uint64_t)r->m * r->k * gemmd_dtype_size(r->a_raw_dtype));
    }
  }
  for (uint32_t g = 0; g < b->n_groups; g++) {
    const gemmd_weight_t *w = b->group_weight[g];
    if (w->engine_handle == NULL) { /* inline B: into the batch */
      const uint32_t ldb = (w->k + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
      binl = align256(binl + (uint64_t)w->n * ldb);
      binl = align256(binl + 4 * gemmd_scale_count(w->scale_layout, w->n, w->k) +
                      (lt ? 4 * gemmd_cublaslt_b_scale_count(w->n, w->k) : 0));
    }
  }
  L->h.n_groups = b->n_groups;
  L->h.n_quant_jobs = n_jobs;
  uint64_t off = align256(sizeof L->h + b->n_groups * sizeof(gemmd_group_params_t) +
                          n_jobs * sizeof(gemmd_quant_job_t));
  if (!lt && e->kernel == GEMMD_GPU_KERNEL_WGMMA) {
    L->h.sched_arena = off; /* tensor maps and tile prefix sums (gemmd_gpu_gemm_prepare) */
    off = align256(off + gemmd_gpu_gemm_sched_bytes(b->n_groups));
  }
  L->h.sa_arena = off;
  off = align256(off + 4 * b->sa_count);
  L->h.raw_arena = off;
  off = align256(off + raw);
  L->h.b_arena = off;
  off = align256(off + binl);
  L->h.a_arena = off;
  off = align256(off + b->a_bytes);
  L->in_bytes = off; /* everything before D is uploaded */
  L->h.d_arena = off;
  off = align256(off + b->d_bytes);
  L->lt_scales = lt ? 4 * b->sa_count : 0; /* A scales in cuBLASLt's layout */
  L->total = align256(off + L->lt_scales) + 256;
}

/* The quantization jobs in the slot's pinned copy: after the header and the table. */
static gemmd_quant_job_t *quant_jobs(slot_t *s, const layout_t *L, const gemmd_batch_t *b) {
  return (gemmd_quant_job_t *)(void *)(s->host + sizeof L->h + b->n_groups * sizeof(gemmd_group_params_t));
}

/* An arena offset that lands on `addr`: the kernels address an operand as its arena's base
 * plus the table's offset, in 64-bit arithmetic, so the difference (mod 2^64) reaches
 * memory outside the batch buffer (group_table.h). */
static uint64_t offset_to(const void *addr, const uint8_t *arena) {
  return (uint64_t)(uintptr_t)addr - (uint64_t)(uintptr_t)arena;
}

/* Operands in clients' device memory that gemmd's kernels can read or write where they
 * lie: the table's row for them points there, and no copy kernel gathers them before the
 * GEMM or scatters D after it (s->in_place). That takes a group of the request alone (its
 * rows are the group's), FP8 A dense with rows a multiple of 16 bytes at a 16-byte
 * aligned address (TMA's terms) and its 1×128 scales 4-byte aligned; D 16-byte aligned.
 * The kernels read only the group's m rows (the tensor map's extent; scale rows clamped to
 * m) and write only its m × n outputs, which the request builder checked against the
 * region. Others are copied (device_a_copies, result_copies). */
static void operands_in_place(slot_t *s, const gemmd_batch_t *b, const layout_t *L, gemmd_group_params_t *table) {
  for (uint32_t i = 0; i < b->n_requests; i++) {
    const gemmd_request_t *r = b->requests[i];
    gemmd_group_params_t *p = &table[r->group];
    if (p->m != r->m) continue; /* the group stacks other requests' rows too */
    if (r->a_device && r->a_raw == NULL && r->a_scales != NULL && r->k % 16 == 0 &&
        (uintptr_t)r->a % 16 == 0 && (uintptr_t)r->a_scales % 4 == 0) {
      p->a_offset = offset_to(r->a, s->dev + L->h.a_arena);
      p->lda = r->k;
      /* in floats: the difference is a multiple of 4 (the arena is 256-byte aligned), so
       * 4 × this offset is the difference again, mod 2^64 */
      p->sa_offset = offset_to(r->a_scales, s->dev + L->h.sa_arena) / 4;
      s->in_place[i] |= IN_PLACE_A;
    }
    if (r->d_device && (uintptr_t)r->d_dest % 16 == 0) {
      p->d_offset = offset_to(r->d_dest, s->dev + L->h.d_arena);
      s->in_place[i] |= IN_PLACE_D;
    }
  }
}

/* Fills the pinned copy: header, table (device addresses), jobs, arenas, and the
 * kernel's own part (tensor maps). 0, or the gemmd_gpu_gemm_prepare error. */
static int stage(const cuda_engine_t *e, slot_t *s, gemmd_batch_t *b, const layout_t *L) {
  uint8_t *H = s->host;
  gemmd_group_params_t *table = (gemmd_group_params_t *)(void *)(H + sizeof L->h);
  gemmd_quant_job_t *jobs = quant_jobs(s, L, b);
  memcpy(table, b->table, b->n_groups * sizeof *table);
  uint64_t binl = L->h.b_arena;
  for (uint32_t g = 0; g < b->n_groups; g++) {
    const gemmd_weight_t *w = b->group_weight[g];
    const dev_weight_t *dw = w->engine_handle;
    gemmd_group_params_t *p = &table[g];
    if (dw != NULL) {
      p->b_data = (uint64_t)(uintptr_t)dw->data;
      p->b_scales = (uint64_t)(uintptr_t)dw->scales;
      p->ldb = dw->ldb;
    } else {
      const uint32_t ldb = (w->k + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
      uint8_t *dst = H + binl;
      for (uint32_t r = 0; r < w->n; r++) {
        memcpy(dst + (size_t)r * ldb, w->data + (size_t)r * w->k, w->k);
        memset(dst + (size_t)r * ldb + w->k, 0, ldb - w->k);
      }
      p->b_data = (uint64_t)(uintptr_t)(s->dev + binl);
      p->ldb = ldb;
      binl = align256(binl + (uint64_t)w->n * ldb);
      const size_t ns = gemmd_scale_count(w->scale_layout, w->n, w->k);
      if (ns > 0) memcpy(H + binl, w->scales, 4 * ns);
      p->b_scales = (uint64_t)(uintptr_t)(s->dev + binl);
      binl = align256(binl + 4 * ns + (s->use_lt ? 4 * gemmd_cublaslt_b_scale_count(w->n, w->k) : 0));
    }
  }
  gemmd_batch_stage_a(b, H + L->h.a_arena, (float *)(void *)(H + L->h.sa_arena));
  uint64_t raw = 0;
  uint32_t j = 0;
  for (uint32_t i = 0; i < b->n_requests; i++) {
    const gemmd_request_t *r = b->requests[i];
    if (r->a_raw == NULL) continue;
    const size_t bytes = (size_t)r->m * r->k * gemmd_dtype_size(r->a_raw_dtype);
    if (!r->a_device) memcpy(H + L->h.raw_arena + raw, r->a_raw, bytes); /* else upload copies it */
    gemmd_quant_job_t *q = &jobs[j++];
    memset(q, 0, sizeof *q);
    q->src_offset = raw;
    q->a_offset = r->a_offset;
    q->sa_offset = r->sa_offset;
    q->rows = r->m;
    q->cols = r->k;
    q->lda = b->table[r->group].lda;
    q->src_dtype = (uint8_t)r->a_raw_dtype;
    /* the padding of each row past k must be zero: the GEMM reads it */
    if (q->lda != r->k) {
      for (uint32_t row = 0; row < r->m; row++) {
        memset(H + L->h.a_arena + r->a_offset + (size_t)row * q->lda + r->k, 0, q->lda - r->k);
      }
    }
    raw = align256(raw + bytes);
  }
  memcpy(H, &L->h, sizeof L->h);
  memset(s->in_place, 0, b->n_requests);
  if (s->use_lt) return GEMMD_OK;
  operands_in_place(s, b, L, table);
  const int rc = gemmd_gpu_gemm_prepare(e->kernel, H, (uint64_t)(uintptr_t)s->dev);
  /* the WGMMA launch is the kernel of the tile kind prepare chose */
  if (rc == GEMMD_OK) s->parts = (s->parts & PART_QUANTIZE) | gemmd_gpu_gemm_prepared_parts(H);
  return rc;
}

/* ---- The device work of one batch ---------------------------------------------------------- */

static int fault_kernel_launch(cudaStream_t stream);

/* The most entries a batch's copy list takes: per request, A's rows and its scales (a
 * flat copy may take two entries) before the GEMM, or D's (two) after; and a flat copy of
 * the whole (two each) where the staged upload and the results' download go by kernel. */
#define COPIES_PER_REQUEST 3u
#define COPIES_PER_BATCH 4u

/* Room in the slot's copy list for the batch, made while it is staged, so that a host
 * allocation that fails fails the batch and is never taken for the GPU's failure. */
static int copies_room(slot_t *s, uint32_t n_requests) {
  const uint32_t n = COPIES_PER_REQUEST * n_requests + COPIES_PER_BATCH;
  if (n <= s->copies_cap) return 0;
  gemmd_gpu_copy_t *p = realloc(s->copies, (size_t)n * sizeof *p);
  if (p == NULL) return -1;
  s->copies = p;
  uint8_t *flags = realloc(s->in_place, n);
  if (flags == NULL) return -1;
  s->in_place = flags;
  s->copies_cap = n;
  return 0;
}

static gemmd_gpu_copy_t dev_copy(const void *src, void *dst, uint32_t rows, uint32_t row_bytes,
                                 uint32_t src_pitch, uint32_t dst_pitch) {
  return (gemmd_gpu_copy_t){(uint64_t)(uintptr_t)src, (uint64_t)(uintptr_t)dst, rows, row_bytes,
                            src_pitch, dst_pitch};
}

/* Appends a flat copy of `bytes` to the slot's list: whole MiB as rows of one, the rest
 * after (a copy's row is 32 bits); at most two entries. */
static void add_flat_copy(slot_t *s, uint32_t *n, const void *src, void *dst, uint64_t bytes) {
  const uint32_t mib = 1u << 20;
  const uint64_t rows = bytes / mib, whole = rows * mib;
  if (rows > 0) s->copies[(*n)++] = dev_copy(src, dst, (uint32_t)rows, mib, mib, mib);
  if (bytes > whole) {
    s->copies[(*n)++] = dev_copy((const uint8_t *)src + whole, (uint8_t *)dst + whole, 1,
                                 (uint32_t)(bytes - whole), 0, 0);
  }
}

/* A in the client's device memory (a_device): its rows into the A arena, over the zeroed
 * rows the staged copy brought (the padding past k stays 0), and its scales, or its raw
 * rows into the raw arena for the quantizer, where stage's quantization job (one per raw
 * A, in request order) says: the list, appended to the slot's from entry n (returns the
 * new count); device_a_copies launches it after the staged upload, on the same stream, in
 * one launch for the whole batch. */
static uint32_t device_a_list(slot_t *s, const layout_t *L, const gemmd_batch_t *b, uint32_t n) {
  const gemmd_quant_job_t *jobs = quant_jobs(s, L, b);
  uint32_t j = 0;
  for (uint32_t i = 0; i < b->n_requests; i++) {
    const gemmd_request_t *r = b->requests[i];
    const gemmd_quant_job_t *q = r->a_raw != NULL ? &jobs[j++] : NULL;
    if (s->in_place[i] & IN_PLACE_A) continue;
    if (r->a_device && q != NULL) {
      add_flat_copy(s, &n, r->a_raw, s->dev + L->h.raw_arena + q->src_offset,
                    (uint64_t)r->m * r->k * gemmd_dtype_size(r->a_raw_dtype));
    } else if (r->a_device) {
      const uint32_t lda = b->table[r->group].lda;
      s->copies[n++] = dev_copy(r->a, s->dev + L->h.a_arena + r->a_offset, r->m, r->k, r->k, lda);
      add_flat_copy(s, &n, r->a_scales, (float *)(void *)(s->dev + L->h.sa_arena) + r->sa_offset,
                    sizeof(float) * (uint64_t)gemmd_group_sa_count(r->m, r->k));
    }
  }
  return n;
}

static cudaError_t device_a_copies(slot_t *s, const layout_t *L, const gemmd_batch_t *b) {
  const uint32_t n = device_a_list(s, L, b, 0);
  if (n > 0 && gemmd_gpu_copy_many(s->copies, n, s->stream) != GEMMD_OK) return cudaErrorLaunchFailure;
  return cudaSuccess;
}

/* Everything before D reaches the device: the staged bytes from the pinned copy, the A
 * rows of requests that go direct (gemmd_batch_a_direct) from their registered arenas,
 * so that a large A is never copied on the host, and A in device memory. Requests are in
 * a_offset order. A batch without direct A whose staged bytes are at most
 * copy_kernel_bytes has them read from the pinned copy by the copy kernel, over PCIe:
 * the GEMM after a kernel starts sooner than after a DMA, and a small batch does not
 * queue behind a large request's DMAs on the copy engines (docs/bench/serving.md). With
 * `listed`, nothing is queued: where that one copy is the whole upload (no A gathered from
 * device memory after it), its list is the slot's first *listed entries; else
 * cudaErrorNotSupported. */
static cudaError_t upload(const cuda_engine_t *e, slot_t *s, const layout_t *L, const gemmd_batch_t *b,
                          uint32_t *listed) {
  int direct = 0;
  for (uint32_t i = 0; i < b->n_requests && !direct; i++) direct = gemmd_batch_a_direct(b, b->requests[i]);
  /* The A arena is the last block before D: when every request's A is read in place, no
   * kernel reads it, and it is not uploaded. */
  int a_in_place = b->n_requests > 0;
  for (uint32_t i = 0; i < b->n_requests && a_in_place; i++) a_in_place = (s->in_place[i] & IN_PLACE_A) != 0;
  const uint64_t in_bytes = a_in_place ? L->h.a_arena : L->in_bytes;
  if (!direct && in_bytes <= e->copy_kernel_bytes) {
    uint32_t n = 0;
    add_flat_copy(s, &n, s->host, s->dev, in_bytes);
    if (listed != NULL) { /* for a graph's node: only where nothing else is copied in */
      *listed = n;
      return device_a_list(s, L, b, n) == n ? cudaSuccess : cudaErrorNotSupported;
    }
    if (gemmd_gpu_copy_many(s->copies, n, s->stream) != GEMMD_OK) return cudaErrorLaunchFailure;
    return device_a_copies(s, L, b); /* a launch of its own: it writes over staged rows */
  }
  if (listed != NULL) return cudaErrorNotSupported;
  cudaError_t err = cudaSuccess;
  uint64_t from = 0; /* bytes of the pinned copy uploaded so far */
  for (uint32_t i = 0; i < b->n_requests && !err; i++) {
    const gemmd_request_t *r = b->requests[i];
    if (!gemmd_batch_a_direct(b, r)) continue;
    const uint64_t at = L->h.a_arena + r->a_offset, bytes = (uint64_t)r->m * r->k;
    if (at > from) err = cudaMemcpyAsync(s->dev + from, s->host + from, at - from, cudaMemcpyHostToDevice, s->stream);
    if (!err) err = host_dma(s->dev + at, (uint8_t *)(uintptr_t)r->a, bytes, cudaMemcpyHostToDevice, s->stream);
    from = at + bytes;
  }
  if (!err && from < in_bytes) {
    err = cudaMemcpyAsync(s->dev + from, s->host + from, in_bytes - from, cudaMemcpyHostToDevice, s->stream);
  }
  if (!err) err = device_a_copies(s, L, b);
  return err;
}

/* Marks a point of the batch's device work on its stream; inside a capture, as a node of
 * the graph, recorded at every replay. */
static cudaError_t mark(slot_t *s, cudaEvent_t ev, int capturing) {
  return capturing ? cudaEventRecordWithFlags(ev, s->stream, cudaEventRecordExternal) : cudaEventRecord(ev, s->stream);
}

/* The kernels a graph holds: quantize (if the batch has raw A), GEMM (the launches its
 * part mask names), with the GEMM's own device time between gemm_start and gemm_stop
 * unless `clocked` (the copy nodes around them time it). */
static cudaError_t enqueue_kernels(cuda_engine_t *e, slot_t *s, const layout_t *L, gemmd_batch_t *b,
                                   int capturing, int clocked) {
  if ((s->parts & PART_QUANTIZE) && gemmd_gpu_quantize_jobs(s->dev, s->stream) != GEMMD_OK) {
    return cudaGetLastError();
  }
  cudaError_t err = clocked ? cudaSuccess : mark(s, s->gemm_start, capturing);
  if (err) return err;
  if (!s->use_lt) {
    if (gemmd_gpu_gemm_parts_run_ws(e->kernel, s->dev, s->parts & GEMMD_GPU_PARTS_ALL, s->ws, s->stream) !=
        GEMMD_OK) {
      return cudaErrorLaunchFailure;
    }
  } else {
    /* One cuBLASLt call per group: table entries are known on the host. */
    const gemmd_group_params_t *t = (const gemmd_group_params_t *)(void *)(s->host + sizeof L->h);
    float *sa_lt = (float *)(void *)(s->dev + L->total - 256 - L->lt_scales);
    for (uint32_t g = 0; g < b->n_groups; g++) {
      const gemmd_group_params_t *p = &t[g];
      const gemmd_weight_t *w = b->group_weight[g];
      const dev_weight_t *dw = w->engine_handle;
      const float *b_lt = NULL;
      if (p->b_layout == GEMMD_SCALE_BLOCK_128X128) {
        b_lt = dw ? dw->scales_lt
                  : (const float *)(uintptr_t)(p->b_scales +
                                               4 * gemmd_scale_count(w->scale_layout, w->n, w->k));
        if (dw == NULL && gemmd_cublaslt_convert_b_scales((const float *)(uintptr_t)p->b_scales, p->n, p->k,
                                                          (float *)b_lt, s->stream) != GEMMD_OK) {
          return cudaErrorLaunchFailure;
        }
      }
      const float *sa = (const float *)(void *)(s->dev + L->h.sa_arena) + p->sa_offset;
      if (gemmd_cublaslt_convert_a_scales(sa, p->m, p->k, sa_lt + p->sa_offset, s->stream) != GEMMD_OK) {
        return cudaErrorLaunchFailure;
      }
      const gemmd_cublaslt_call_t call = {
          p->m, p->n, p->k, (gemmd_dtype_t)p->a_dtype, (gemmd_dtype_t)p->b_dtype, (gemmd_dtype_t)p->out_dtype,
          GEMMD_SCALE_BLOCK_1X128, (gemmd_scale_layout_t)p->b_layout,
          s->dev + L->h.a_arena + p->a_offset, p->lda, (const void *)(uintptr_t)p->b_data, p->ldb,
          sa_lt + p->sa_offset, b_lt ? b_lt : (const float *)(uintptr_t)p->b_scales,
          s->dev + L->h.d_arena + p->d_offset};
      const int rc = gemmd_cublaslt_gemm(e->lt, &call, s->stream);
      if (rc != GEMMD_OK) return rc == GEMMD_ENOTSUP ? cudaErrorNotSupported : cudaErrorLaunchFailure;
    }
  }
  return clocked ? cudaSuccess : mark(s, s->gemm_stop, capturing);
}

/* Captures the batch's kernels and instantiates them into *exec. copy_nodes 1 or 2: a
 * placeholder copy launch (an empty list of one copy) before them, and with 2 another (of
 * two) after, for copy_graph_t; `clocked`: no event nodes around the GEMM (CG_CLOCKED).
 * With `keep`, the graph is kept there (its nodes name what is set per batch), else
 * destroyed. */
static cudaError_t capture(cuda_engine_t *e, slot_t *s, const layout_t *L, gemmd_batch_t *b, int copy_nodes,
                           int clocked, cudaGraph_t *keep, cudaGraphExec_t *exec) {
  static const gemmd_gpu_copy_t none[2] = {{0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0}};
  cudaGraph_t g;
  cudaError_t err = cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeThreadLocal);
  if (err) return err;
  cudaError_t work = cudaSuccess;
  if (copy_nodes >= 1 && gemmd_gpu_copy_many(none, 1, s->stream) != GEMMD_OK) work = cudaErrorLaunchFailure;
  if (!work) work = enqueue_kernels(e, s, L, b, 1, clocked);
  if (!work && copy_nodes == 2 && gemmd_gpu_copy_many(none, 2, s->stream) != GEMMD_OK) work = cudaErrorLaunchFailure;
  err = cudaStreamEndCapture(s->stream, &g);
  if (work) {
    if (!err) cudaGraphDestroy(g);
    return work;
  }
  if (err) return err;
  err = cudaGraphInstantiate(exec, g, 0);
  if (err || keep == NULL) {
    cudaGraphDestroy(g);
  } else {
    *keep = g;
  }
  b->graph_captures++;
  return err;
}

/* A key for a cuBLASLt graph: everything its nodes depend on. */
static uint64_t lt_key(const gemmd_batch_t *b, const layout_t *L) {
  uint64_t h = 1469598103934665603ull;
  const uint64_t parts[] = {L->h.a_arena, L->h.sa_arena, L->h.d_arena, L->h.b_arena, L->total, L->h.n_quant_jobs > 0};
  for (size_t i = 0; i < 6; i++) h = (h ^ parts[i]) * 1099511628211ull;
  for (uint32_t g = 0; g < b->n_groups; g++) {
    const gemmd_group_params_t *p = &b->table[g];
    const uint64_t f[] = {p->m, p->n, p->k, p->a_dtype | p->b_dtype << 8 | p->b_layout << 16 | (uint64_t)p->out_dtype << 24,
                          p->a_offset, p->sa_offset, p->d_offset,
                          (uint64_t)(uintptr_t)b->group_weight[g]->engine_handle};
    for (size_t i = 0; i < 8; i++) h = (h ^ f[i]) * 1099511628211ull;
  }
  return h;
}

/* The batch's results, after its GEMM: into the pinned buffer for requests that read D
 * there (gRPC; a batch of shared-memory requests needs none of it), straight into
 * clients' registered arenas, and into regions of their device memory. Results of at most
 * copy_kernel_bytes, and those in device memory, go by one copy-kernel launch (the kernel
 * writes pinned host memory through its mapping, over PCIe); larger ones by DMA, a 2 MiB
 * piece of an arena each. An arena not pinned gets its result from the pinned buffer,
 * copied by a finishing thread (answer_batch). With `listed`, nothing is queued: the
 * copy-kernel entries are appended to the slot's list from entry *listed, which becomes
 * its new count, and a batch whose results need a DMA gets cudaErrorNotSupported. */
static cudaError_t result_copies(const cuda_engine_t *e, slot_t *s, const layout_t *L, const gemmd_batch_t *b,
                                 const char **step, uint32_t *listed) {
  const int by_kernel = align256(b->d_bytes) <= e->copy_kernel_bytes;
  int host_readers = 0;
  for (uint32_t i = 0; i < b->n_requests; i++) {
    const gemmd_request_t *r = b->requests[i];
    host_readers += r->d_dest == NULL || (!r->d_dest_pinned && !r->d_device);
  }
  cudaError_t err = cudaSuccess;
  uint32_t n = listed != NULL ? *listed : 0;
  uint8_t *const d_dev = s->dev + L->h.d_arena;
  if (host_readers > 0) {
    *step = "download";
    if (by_kernel) {
      add_flat_copy(s, &n, d_dev, s->host + L->h.d_arena, align256(b->d_bytes));
    } else if (listed != NULL) {
      return cudaErrorNotSupported;
    } else {
      err = cudaMemcpyAsync(s->host + L->h.d_arena, d_dev, align256(b->d_bytes), cudaMemcpyDeviceToHost, s->stream);
    }
  }
  *step = "result copies";
  for (uint32_t i = 0; i < b->n_requests && !err; i++) {
    const gemmd_request_t *r = b->requests[i];
    if (s->in_place[i] & IN_PLACE_D) continue; /* the GEMM wrote it there */
    if (r->d_device || (r->d_dest != NULL && r->d_dest_pinned && by_kernel && e->arena_by_kernel)) {
      add_flat_copy(s, &n, d_dev + r->d_offset, r->d_dest, r->d_bytes);
    } else if (r->d_dest != NULL && r->d_dest_pinned) {
      if (listed != NULL) return cudaErrorNotSupported;
      err = host_dma(d_dev + r->d_offset, r->d_dest, r->d_bytes, cudaMemcpyDeviceToHost, s->stream);
    }
  }
  if (listed != NULL) {
    *listed = n;
    return cudaSuccess;
  }
  if (!err && n > 0 && gemmd_gpu_copy_many(s->copies, n, s->stream) != GEMMD_OK) err = cudaErrorLaunchFailure;
  return err;
}

/* The graph of copy_graph_t for the batch's part mask and `form` (CG_*), captured on first
 * use, and its copy nodes: the copy kernel's nodes, told apart by their placeholders'
 * grids (one row of blocks for the upload's, two for the results'). */
static cudaError_t copy_graph(cuda_engine_t *e, slot_t *s, const layout_t *L, gemmd_batch_t *b, int form,
                              copy_graph_t **out) {
  copy_graph_t *c = &s->cg[s->parts][form];
  const int with_down = form != CG_UPLOAD;
  *out = c;
  if (c->exec != NULL) return cudaSuccess;
  cudaError_t err = capture(e, s, L, b, with_down ? 2 : 1, form == CG_CLOCKED, &c->graph, &c->exec);
  if (err) {
    c->exec = NULL;
    return err;
  }
  cudaGraphNode_t nodes[16];
  size_t all = sizeof nodes / sizeof nodes[0];
  err = cudaGraphGetNodes(c->graph, NULL, &all);
  if (!err && all <= sizeof nodes / sizeof nodes[0]) err = cudaGraphGetNodes(c->graph, nodes, &all);
  c->up = c->down = NULL;
  c->up_n = c->down_n = NOT_KEPT; /* they hold the placeholders */
  struct cudaKernelNodeParams copy_kernel; /* its function, as the copy library launches it */
  if (!err && gemmd_gpu_copy_node_params(NULL, 0, NULL, &s->up_node, &copy_kernel) != GEMMD_OK) {
    err = cudaErrorNotSupported;
  }
  for (size_t i = 0; !err && all <= sizeof nodes / sizeof nodes[0] && i < all; i++) {
    enum cudaGraphNodeType type;
    struct cudaKernelNodeParams p;
    if (cudaGraphNodeGetType(nodes[i], &type) != cudaSuccess || type != cudaGraphNodeTypeKernel ||
        cudaGraphKernelNodeGetParams(nodes[i], &p) != cudaSuccess || p.func != copy_kernel.func) {
      continue;
    }
    if (p.gridDim.y == 1) c->up = nodes[i];
    if (p.gridDim.y == 2) c->down = nodes[i];
  }
  cudaGetLastError(); /* a node whose parameters could not be read leaves no error behind */
  if (!err && (c->up == NULL || (with_down && c->down == NULL))) {
    err = cudaErrorNotSupported; /* not the graph this expects: the batch goes the other way */
  }
  if (err) {
    cudaGraphExecDestroy(c->exec);
    cudaGraphDestroy(c->graph);
    memset(c, 0, sizeof *c);
  }
  return err;
}

/* Makes copy node `node` of `exec` copy list[0..n) with `clock` (the same for a node every
 * time), unless it holds that list already (kept[0..*kept_n), copy_graph_t); `storage`
 * carries the parameters into the call. */
static cudaError_t set_copy_node(cudaGraphExec_t exec, cudaGraphNode_t node, gemmd_gpu_copy_node_t *storage,
                                 const gemmd_gpu_copy_t *list, uint32_t n, const gemmd_gpu_copy_clock_t *clock,
                                 gemmd_gpu_copy_t *kept, uint32_t *kept_n) {
  if (*kept_n == n && memcmp(kept, list, n * sizeof *list) == 0) return cudaSuccess;
  struct cudaKernelNodeParams p;
  if (gemmd_gpu_copy_node_params(list, n, clock, storage, &p) != GEMMD_OK) return cudaErrorInvalidValue;
  *kept_n = NOT_KEPT;
  const cudaError_t err = cudaGraphExecKernelNodeSetParams(exec, node, &p);
  if (!err && n <= KEPT_COPIES) {
    memcpy(kept, list, n * sizeof *list);
    *kept_n = n;
  }
  return err;
}

/* The batch as one graph launch with its copies (copy_graph_t), or cudaErrorNotSupported,
 * with nothing queued, where its upload or its results need more than one copy-kernel
 * launch each, or a DMA. */
static cudaError_t launch_with_copies(cuda_engine_t *e, slot_t *s, const layout_t *L, gemmd_batch_t *b,
                                      const char **step) {
  uint32_t n_up = 0;
  *step = "upload";
  cudaError_t err = upload(e, s, L, b, &n_up);
  uint32_t n_all = n_up;
  if (!err) err = result_copies(e, s, L, b, step, &n_all);
  if (err) return err;
  const uint32_t n_down = n_all - n_up;
  if (n_up > GEMMD_GPU_COPIES_PER_LAUNCH || n_down > GEMMD_GPU_COPIES_PER_LAUNCH) return cudaErrorNotSupported;
  *step = "graph capture";
  /* The copy clock times the GEMM of a batch that is alone on the GPU and has nothing but
   * the GEMM between its copies (no quantize kernel). Beside other batches its results
   * node may wait for SMs behind their kernels, a wait the clock would count as GEMM time;
   * and a measured run of its signature is timed by events, as cuBLASLt's runs are. */
  const int clocked = !(s->parts & PART_QUANTIZE) && !s->measuring &&
                      atomic_load_explicit(&e->n_launched, memory_order_acquire) == 0;
  const int form = clocked ? CG_CLOCKED : n_down > 0 ? CG_BOTH : CG_UPLOAD;
  copy_graph_t *c;
  err = copy_graph(e, s, L, b, form, &c);
  if (err == cudaErrorNotSupported) { /* the graph had another shape: never again */
    cudaGetLastError();
    e->graph_copies = 0;
    gemmd_log(GEMMD_LOG_WARN, "batches' copies stay out of their graphs", "reason=\"unexpected graph nodes\"");
  }
  if (err) return err;
  *step = "graph copies";
  const gemmd_gpu_copy_clock_t before = {s->clock_dev, s->clock_host, GEMMD_GPU_COPY_CLOCK_BEFORE};
  const gemmd_gpu_copy_clock_t after = {s->clock_dev, s->clock_host, GEMMD_GPU_COPY_CLOCK_AFTER};
  err = set_copy_node(c->exec, c->up, &s->up_node, s->copies, n_up, clocked ? &before : NULL, c->up_list, &c->up_n);
  if (!err && form != CG_UPLOAD) {
    err = set_copy_node(c->exec, c->down, &s->down_node, s->copies + n_up, n_down, clocked ? &after : NULL,
                        c->down_list, &c->down_n);
  }
  if (err) return err;
  s->gemm_clocked = clocked;
  if (clocked) { /* the clock's words; its end turns nonzero once the graph is done */
    for (int i = 0; i < GEMMD_GPU_COPY_CLOCK_HOST_WORDS; i++) s->clock_host[i] = 0;
  } else {
    *step = "event";
    err = cudaEventRecord(s->start, s->stream);
    if (err) return err;
  }
  *step = "graph launch";
  err = cudaGraphLaunch(c->exec, s->stream);
  b->graph_replays++;
  return err;
}

/* Queues the batch: its start event (none for a clocked graph, whose copy nodes time it),
 * its work, and its stop event (for a clocked graph too: how a failed launch is noticed). */
static cudaError_t launch(cuda_engine_t *e, slot_t *s, const layout_t *L, gemmd_batch_t *b,
                          const char **step) {
  s->gemm_clocked = 0;
  cudaError_t err = cudaSuccess;
  if (e->fault_after > 0 && e->batches + 1 == (uint64_t)e->fault_after) {
    gemmd_log(GEMMD_LOG_WARN, "injecting a device fault", "batch=%" PRIu64 " (--test-fault-after-batches)",
              e->batches + 1);
    fault_kernel_launch(s->stream);
  }
  if (e->graph_copies && !s->use_lt) {
    err = launch_with_copies(e, s, L, b, step);
    if (err != cudaErrorNotSupported) {
      *step = "event";
      if (!err) err = cudaEventRecord(s->stop, s->stream);
      e->batches++;
      return err;
    }
  }
  *step = "event";
  err = cudaEventRecord(s->start, s->stream);
  if (err) return err;
  *step = "upload";
  err = upload(e, s, L, b, NULL);
  if (err) return err;
  if (!e->use_graphs) {
    *step = "kernels";
    err = enqueue_kernels(e, s, L, b, 0, 0);
  } else {
    *step = "graph capture";
    cudaGraphExec_t exec;
    if (!s->use_lt) {
      if (s->exec[s->parts] == NULL) {
        err = capture(e, s, L, b, 0, 0, NULL, &s->exec[s->parts]);
        if (err) return err;
      }
      exec = s->exec[s->parts];
    } else {
      const uint64_t key = lt_key(b, L);
      lt_graph_t *hit = NULL, *oldest = &s->lt[0];
      for (int i = 0; i < LT_CACHE; i++) {
        if (s->lt[i].exec != NULL && s->lt[i].key == key) hit = &s->lt[i];
        if (s->lt[i].used < oldest->used) oldest = &s->lt[i];
      }
      if (hit == NULL) {
        if (oldest->exec != NULL) cudaGraphExecDestroy(oldest->exec);
        memset(oldest, 0, sizeof *oldest);
        err = capture(e, s, L, b, 0, 0, NULL, &oldest->exec);
        if (err) return err;
        oldest->key = key;
        hit = oldest;
      }
      hit->used = ++e->lt_clock;
      exec = hit->exec;
    }
    *step = "graph launch";
    err = cudaGraphLaunch(exec, s->stream);
    b->graph_replays++;
  }
  if (!err) err = result_copies(e, s, L, b, step, NULL);
  if (!err) err = cudaEventRecord(s->stop, s->stream);
  e->batches++;
  return err;
}

static void drop_copy_graphs(slot_t *s) {
  for (int i = 0; i < N_PART_MASKS; i++) {
    for (int j = 0; j < N_COPY_GRAPHS; j++) {
      copy_graph_t *c = &s->cg[i][j];
      if (c->exec) cudaGraphExecDestroy(c->exec);
      if (c->graph) cudaGraphDestroy(c->graph);
      memset(c, 0, sizeof *c);
    }
  }
}

/* Grows the slot's buffers (dropping graphs that point into the old ones). */
static cudaError_t ensure_capacity(slot_t *s, uint64_t bytes) {
  if (s->cap >= bytes) return cudaSuccess;
  uint64_t cap = s->cap ? s->cap : (64u << 20);
  while (cap < bytes) cap *= 2;
  for (int i = 0; i < N_PART_MASKS; i++) {
    if (s->exec[i]) cudaGraphExecDestroy(s->exec[i]);
    s->exec[i] = NULL;
  }
  drop_copy_graphs(s);
  for (int i = 0; i < LT_CACHE; i++) {
    if (s->lt[i].exec) cudaGraphExecDestroy(s->lt[i].exec);
    memset(&s->lt[i], 0, sizeof s->lt[i]);
  }
  cudaFree(s->dev);
  cudaFreeHost(s->host);
  s->dev = s->host = NULL;
  s->cap = 0;
  cudaError_t err = cudaMalloc((void **)&s->dev, cap);
  if (!err) err = cudaMallocHost((void **)&s->host, cap);
  if (!err) s->cap = cap;
  return err;
}

static void fail_batch(cuda_engine_t *e, gemmd_batch_t *b) {
  b->status = GEMMD_CODE_UNAVAILABLE;
  b->device_failed = 1;
  snprintf(b->message, sizeof b->message, "the GPU failed (%.180s); gemmd is restarting", e->failure);
}

/* ---- Which kernel ---------------------------------------------------------------------------- */

/* Batches cuBLASLt may run when the choice is by measured time: few groups (it takes one
 * call per group, and loses where a batch has many: docs/bench/kernels.md), every B with
 * 128×128 scales (A always has 1×128 ones here: the pairing it takes), and no FP32 output,
 * for which it does not meet docs/api.md §1's accuracy. */
enum { LT_MAX_GROUPS = 4 };
static int lt_candidate(const gemmd_batch_t *b) {
  if (b->n_groups == 0 || b->n_groups > LT_MAX_GROUPS) return 0;
  for (uint32_t g = 0; g < b->n_groups; g++) {
    const gemmd_group_params_t *p = &b->table[g];
    if (p->b_layout != GEMMD_SCALE_BLOCK_128X128 || p->out_dtype == GEMMD_DTYPE_FP32) return 0;
  }
  return 1;
}

/* Whether cuBLASLt has a plan for every group: a call it refused inside a capture would
 * fail the batch's launch, which the engine takes for a device failure. */
static int lt_plans(cuda_engine_t *e, const gemmd_batch_t *b) {
  for (uint32_t g = 0; g < b->n_groups; g++) {
    const gemmd_group_params_t *p = &b->table[g];
    const gemmd_weight_t *w = b->group_weight[g];
    const dev_weight_t *dw = w->engine_handle;
    const uint32_t ldb = dw != NULL ? dw->ldb : (w->k + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
    const gemmd_cublaslt_call_t call = {p->m, p->n, p->k, (gemmd_dtype_t)p->a_dtype, (gemmd_dtype_t)p->b_dtype,
                                        (gemmd_dtype_t)p->out_dtype, GEMMD_SCALE_BLOCK_1X128,
                                        GEMMD_SCALE_BLOCK_128X128, NULL, p->lda, NULL, ldb, NULL, NULL, NULL};
    const int rc = gemmd_cublaslt_supported(e->lt, &call);
    if (rc != GEMMD_OK) {
      gemmd_log(GEMMD_LOG_INFO, "cuBLASLt has no plan: gemmd's kernel for this signature",
                "m=%u n=%u k=%u lda=%u ldb=%u reason=\"%s\"", p->m, p->n, p->k, p->lda, ldb,
                gemmd_strerror(rc));
      return 0;
    }
  }
  return 1;
}

static void choose_kernel(cuda_engine_t *e, slot_t *s, gemmd_batch_t *b) {
  s->measuring = 0;
  s->use_lt = e->mode == MODE_CUBLASLT;
  if (e->mode == MODE_MEASURED && lt_candidate(b)) {
    s->sig = gemmd_kernel_signature(b->table, b->n_groups);
    s->use_lt = gemmd_kernel_choices_pick(e->choices, s->sig, &s->measuring) == GEMMD_KERNEL_CUBLASLT;
    if (s->use_lt && !lt_plans(e, b)) { /* gemmd's kernel for this signature, for good */
      gemmd_kernel_choices_decide(e->choices, s->sig, GEMMD_KERNEL_OWN);
      s->use_lt = 0;
      s->measuring = 0;
    }
  }
  b->kernel_lt = s->use_lt;
}

/* ---- Threads ---------------------------------------------------------------------------------- */

static void *stager_main(void *arg) {
  cuda_engine_t *e = arg;
  cudaSetDevice(e->device);
  for (;;) {
    pthread_mutex_lock(&e->mu);
    if (e->n_submitted == 0) spin_for_work(e, &e->n_submitted);
    while (e->n_submitted == 0 && !e->stop) pthread_cond_wait(&e->cv, &e->mu);
    if (e->n_submitted == 0) {
      pthread_mutex_unlock(&e->mu);
      return NULL;
    }
    gemmd_batch_t *b = e->submitted[0];
    b->marks.engine_start = gemmd_now_ns();
    memmove(&e->submitted[0], &e->submitted[1], --e->n_submitted * sizeof b);
    slot_t *s = NULL;
    while (s == NULL) {
      for (unsigned i = 0; i < e->n_slots; i++) {
        if (!e->slots[i].busy) {
          s = &e->slots[i];
          break;
        }
      }
      if (s == NULL) pthread_cond_wait(&e->cv, &e->mu);
    }
    s->busy = 1;
    pthread_mutex_unlock(&e->mu);

    s->batch = b;
    s->stream = b->piece ? s->bulk : s->urgent;
    b->engine_data = s;
    choose_kernel(e, s, b);
    layout_t L;
    lay_out(e, b, s->use_lt, &L);
    s->hdr = L.h;
    s->parts = (L.h.n_quant_jobs > 0 ? PART_QUANTIZE : 0) | gemmd_gpu_gemm_parts(b->table, b->n_groups);
    cudaError_t err = cudaSuccess;
    if (atomic_load(&e->failed)) {
      err = cudaErrorUnknown;
    } else {
      err = ensure_capacity(s, L.total);
      if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        b->status = GEMMD_CODE_RESOURCE_EXHAUSTED; /* not a device failure */
        snprintf(b->message, sizeof b->message, "no device memory for a %" PRIu64 "-byte batch", L.total);
        err = cudaErrorUnknown;
      } else if (!err && copies_room(s, b->n_requests) != 0) {
        b->status = GEMMD_CODE_RESOURCE_EXHAUSTED; /* not a device failure */
        snprintf(b->message, sizeof b->message, "no host memory for the batch's copy list");
        err = cudaErrorUnknown;
      } else if (!err) {
        const int prep = stage(e, s, b, &L);
        if (prep != GEMMD_OK) { /* the kernel refused the table: this batch fails, not the GPU */
          b->status = GEMMD_CODE_INTERNAL;
          snprintf(b->message, sizeof b->message, "the GEMM kernel could not take this batch: %s",
                   gemmd_strerror(prep));
          err = cudaErrorUnknown;
        } else {
          const char *step = "";
          b->marks.launch = gemmd_now_ns();
          err = launch(e, s, &L, b, &step);
          if (err) {
            char what[64];
            snprintf(what, sizeof what, "batch launch (%s)", step);
            cuda_failed(e, err, what);
          }
        }
      } else {
        cuda_failed(e, err, "batch buffers");
      }
    }
    if (err && b->status == GEMMD_CODE_OK) fail_batch(e, b);
    lock_soon(e);
    if (err) { /* nothing reached the device: the slot is free again now */
      s->busy = 0;
      s->batch = NULL;
      b->engine_data = NULL;
    }
    e->launched[e->n_launched] = (launched_t){b, err ? NULL : s};
    atomic_fetch_add_explicit(&e->n_launched, 1, memory_order_release); /* after the entry */
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
  }
}

/* The end of a batch with its status: results bound for shared-memory arenas that are not
 * pinned are copied there from the slot's pinned buffer, then engine.h's done (the
 * completions and their wake-ups, the post to the loop). */
static void answer_batch(cuda_engine_t *e, gemmd_batch_t *b) {
  b->marks.finishing = gemmd_now_ns();
  if (b->status == GEMMD_CODE_OK) {
    for (uint32_t i = 0; i < b->n_requests; i++) {
      gemmd_request_t *r = b->requests[i];
      if (r->d_dest != NULL && r->d != r->d_dest) {
        memcpy(r->d_dest, r->d, r->d_bytes);
        r->d = r->d_dest;
      }
    }
  }
  e->base.done(e->base.done_ctx, b);
}

/* With the mutex held: hands a batch with its status to the finishing threads, so that
 * one batch's copies and wake-ups never hold up noticing the next (answering on this
 * thread whenever the GPU had nothing else measured far slower at 8 clients:
 * docs/bench/serving.md). */
static void finish_batch(cuda_engine_t *e, gemmd_batch_t *b) {
  e->finished[e->n_finished++] = b;
  /* Not while finisher 0 polls for this one: a sleeping finisher's wake-up is a system
   * call made holding mu, and the finisher it woke would find the batch taken. */
  if (!e->hot_polling || e->n_finished > 1) pthread_cond_signal(&e->fin_cv);
}

/* Finisher 0 polls for work (--engine-spin-us) before it sleeps, so that a batch alone
 * pays no thread wake-up on its way back; the others sleep at once. */
static void *finisher_main(void *arg) {
  cuda_engine_t *e = ((finisher_arg_t *)arg)->e;
  const int hot = ((finisher_arg_t *)arg)->index == 0;
  pthread_mutex_lock(&e->mu);
  for (;;) {
    if (hot && e->n_finished == 0 && !e->completer_done) {
      e->hot_polling = 1;
      spin_for_work(e, &e->n_finished);
      e->hot_polling = 0;
    }
    while (e->n_finished == 0 && !e->completer_done) pthread_cond_wait(&e->fin_cv, &e->mu);
    if (e->n_finished == 0) break;
    gemmd_batch_t *b = e->finished[0];
    memmove(&e->finished[0], &e->finished[1], --e->n_finished * sizeof b);
    pthread_mutex_unlock(&e->mu);
    answer_batch(e, b);
    lock_soon(e);
  }
  pthread_mutex_unlock(&e->mu);
  return NULL;
}

static void *completer_main(void *arg) {
  cuda_engine_t *e = arg;
  cudaSetDevice(e->device);
  pthread_mutex_lock(&e->mu);
  for (;;) {
    if (e->n_launched == 0) spin_for_work(e, &e->n_launched);
    while (e->n_launched == 0 && !(e->stop && e->n_submitted == 0)) pthread_cond_wait(&e->cv, &e->mu);
    if (e->n_launched == 0) {
      e->completer_done = 1;
      pthread_cond_broadcast(&e->fin_cv);
      pthread_mutex_unlock(&e->mu);
      return NULL;
    }
    cudaError_t err;
    const unsigned at = wait_any_done(e, &err);
    const launched_t l = e->launched[at];
    memmove(&e->launched[at], &e->launched[at + 1], (--e->n_launched - at) * sizeof l);
    pthread_mutex_unlock(&e->mu);
    gemmd_batch_t *b = l.b;
    slot_t *s = l.s;
    if (s != NULL) {
      b->marks.seen_done = gemmd_now_ns();
      float ms = 0, gemm_ms = 0;
      if (!err && !s->gemm_clocked) { /* a clocked batch reads its clock below instead */
        err = cudaEventElapsedTime(&ms, s->start, s->stop);
        if (!err) err = cudaEventElapsedTime(&gemm_ms, s->gemm_start, s->gemm_stop);
      }
      if (err) {
        cuda_failed(e, err, "batch");
        fail_batch(e, b);
      } else {
        b->status = GEMMD_CODE_OK;
        b->compute_ns = (uint64_t)((double)ms * 1e6);
        b->gemm_ns = (uint64_t)((double)gemm_ms * 1e6);
        if (s->gemm_clocked) read_clock(s, b);
        if (s->measuring) {
          gemmd_kernel_choices_record(e->choices, s->sig, s->use_lt ? GEMMD_KERNEL_CUBLASLT : GEMMD_KERNEL_OWN, b->gemm_ns);
        }
        for (uint32_t i = 0; i < b->n_requests; i++) {
          gemmd_request_t *r = b->requests[i];
          r->d = r->d_dest != NULL && (r->d_dest_pinned || r->d_device) ? r->d_dest
                                                                         : s->host + s->hdr.d_arena + r->d_offset;
        }
      }
    }
    lock_soon(e);
    finish_batch(e, b);
  }
}

/* ---- The seam ---------------------------------------------------------------------------------- */

static int cuda_submit(gemmd_engine_t *base, gemmd_batch_t *b) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  lock_soon(e);
  if (e->n_submitted >= e->n_slots || e->stop) {
    pthread_mutex_unlock(&e->mu);
    return GEMMD_EAGAIN;
  }
  e->submitted[e->n_submitted++] = b;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
  return GEMMD_OK;
}

/* The batch is answered (engine.h): its slot (and staging memory) is free again; the
 * stager may take it at once. */
static void cuda_batch_release(gemmd_engine_t *base, gemmd_batch_t *b) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  slot_t *s = b->engine_data;
  if (s == NULL) return; /* released already (by done), or never on the device */
  lock_soon(e);
  s->busy = 0;
  s->batch = NULL;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
  b->engine_data = NULL;
}

static uint64_t cuda_memory_used(gemmd_engine_t *base) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  uint64_t n = atomic_load(&e->weight_bytes);
  for (unsigned i = 0; i < e->n_slots; i++) n += e->slots[i].cap;
  return n;
}

static void cuda_close(gemmd_engine_t *base) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  pthread_mutex_lock(&e->mu);
  e->stop = 1;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
  pthread_join(e->stager, NULL);
  pthread_join(e->completer, NULL);
  for (int i = 0; i < N_FINISHERS; i++) pthread_join(e->finishers[i], NULL);
  if (!atomic_load(&e->failed)) {
    for (unsigned i = 0; i < e->n_slots; i++) {
      slot_t *s = &e->slots[i];
      for (int j = 0; j < N_PART_MASKS; j++) {
        if (s->exec[j]) cudaGraphExecDestroy(s->exec[j]);
      }
      for (int j = 0; j < LT_CACHE; j++) {
        if (s->lt[j].exec) cudaGraphExecDestroy(s->lt[j].exec);
      }
      drop_copy_graphs(s);
      cudaFree(s->dev);
      cudaFree(s->ws);
      cudaFree(s->clock_dev);
      cudaFreeHost((void *)s->clock_host);
      cudaFreeHost(s->host);
      free(s->copies);
      free(s->in_place);
      cudaEventDestroy(s->start);
      cudaEventDestroy(s->stop);
      cudaEventDestroy(s->gemm_start);
      cudaEventDestroy(s->gemm_stop);
      if (s->urgent) cudaStreamDestroy(s->urgent);
      if (s->bulk) cudaStreamDestroy(s->bulk);
    }
    if (e->lt) gemmd_cublaslt_destroy(e->lt);
    for (int i = 0; i < 2; i++) {
      cudaFreeHost(e->up_host[i]);
      if (e->up_free[i]) cudaEventDestroy(e->up_free[i]);
    }
    if (e->up_stream) cudaStreamDestroy(e->up_stream);
  }
  if (e->choices != NULL && e->choices_path[0] != '\0') gemmd_kernel_choices_save(e->choices, e->choices_path);
  gemmd_kernel_choices_free(e->choices);
  pthread_mutex_destroy(&e->mu);
  gemmd_ipc_maps_destroy(&e->ipc_maps);
  pthread_mutex_destroy(&e->up_mu);
  pthread_cond_destroy(&e->cv);
  pthread_cond_destroy(&e->fin_cv);
  free(e);
}

/* Writes the kernel choices decided since the last save (uv pool: file I/O). */
static void cuda_save_state(gemmd_engine_t *base) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  if (e->choices == NULL || e->choices_path[0] == '\0') return;
  const int rc = gemmd_kernel_choices_save(e->choices, e->choices_path);
  if (rc < 0) {
    gemmd_log(GEMMD_LOG_WARN, "kernel choices not saved", "path=\"%s\" error=\"%s\"", e->choices_path, strerror(-rc));
  }
}

static const gemmd_engine_ops_t cuda_ops = {
    .save_state = cuda_save_state,
    .submit = cuda_submit,
    .weight_load = cuda_weight_load,
    .weight_quantize = cuda_weight_quantize,
    .weight_unload = cuda_weight_unload,
    .arena_register = cuda_arena_register,
    .region_open = cuda_region_open,
    .region_close = cuda_region_close,
    .arena_unregister = cuda_arena_unregister,
    .batch_release = cuda_batch_release,
    .memory_used = cuda_memory_used,
    .close = cuda_close,
};

int gemmd_engine_cuda_create(const gemmd_cuda_options_t *o, gemmd_engine_done_fn done, void *done_ctx,
                             gemmd_engine_t **out, char *why, size_t whylen) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    snprintf(why, whylen, "no usable CUDA device (%s)",
             err != cudaSuccess ? cudaGetErrorString(err) : "none found");
    cudaGetLastError();
    return GEMMD_ENOTSUP;
  }
  if (o->device < 0 || o->device >= count) {
    snprintf(why, whylen, "--device %d: there are %d CUDA devices", o->device, count);
    return GEMMD_ENOTSUP;
  }
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, o->device) != cudaSuccess || prop.major != 9) {
    snprintf(why, whylen, "device %d is %s (sm_%d%d); gemmd's kernels need sm_90", o->device,
             prop.name, prop.major, prop.minor);
    return GEMMD_ENOTSUP;
  }
  cuda_engine_t *e = calloc(1, sizeof *e);
  if (e == NULL) return GEMMD_ENOMEM;
  e->device = o->device;
  const char *k = o->kernel != NULL ? o->kernel : "wgmma";
  e->mode = strcmp(k, "cublaslt") == 0 ? MODE_CUBLASLT : strcmp(k, "measured") == 0 ? MODE_MEASURED : MODE_OWN;
  e->kernel = strcmp(k, "gemmd") == 0 ? GEMMD_GPU_KERNEL_SIMPLE : GEMMD_GPU_KERNEL_WGMMA;
  if (e->mode == MODE_MEASURED) {
    e->choices = gemmd_kernel_choices_create(o->choice_samples > 0 ? (unsigned)o->choice_samples : 3, 4096);
    if (e->choices == NULL) {
      free(e);
      return GEMMD_ENOMEM;
    }
    if (o->choices_path != NULL) {
      snprintf(e->choices_path, sizeof e->choices_path, "%s", o->choices_path);
      const int n = gemmd_kernel_choices_load(e->choices, e->choices_path);
      if (n >= 0 || n == -ENOENT) {
        gemmd_log(GEMMD_LOG_INFO, "kernel choices loaded", "path=\"%s\" signatures=%d", e->choices_path, n < 0 ? 0 : n);
      } else {
        gemmd_log(GEMMD_LOG_WARN, "kernel choices not read; measuring again", "path=\"%s\" error=\"%s\"",
                  e->choices_path, strerror(-n));
      }
    }
  }
  e->use_graphs = o->graphs;
  e->graph_copies = o->graphs;
  e->fault_after = o->fault_after;
  e->spin_ns = o->spin_us > 0 ? (uint64_t)o->spin_us * 1000u : 0;
  e->copy_kernel_bytes = o->copy_kernel_bytes > 0 ? (uint64_t)o->copy_kernel_bytes : 0;
  if (cudaDeviceGetAttribute(&e->arena_by_kernel, cudaDevAttrCanUseHostPointerForRegisteredMem, o->device) !=
      cudaSuccess) {
    e->arena_by_kernel = 0;
    cudaGetLastError();
  }
  e->base.ops = &cuda_ops;
  e->base.backend = "cuda";
  e->n_slots = o->slots >= 1 && o->slots <= MAX_SLOTS ? (unsigned)o->slots : 2;
  e->base.slots = e->n_slots;
  e->base.quantizes_a = 1;
  e->base.row_align = ROW_ALIGN;
  e->base.done = done;
  e->base.done_ctx = done_ctx;
  if (cudaDeviceGetPCIBusId(e->base.pci_bus_id, sizeof e->base.pci_bus_id, o->device) != cudaSuccess) {
    e->base.pci_bus_id[0] = '\0';
    cudaGetLastError();
  }
  snprintf(e->base.device, sizeof e->base.device, "%.64s (sm_%d%d, %d SMs, %zu MiB)", prop.name,
           prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem >> 20);
  snprintf(e->base.kernel, sizeof e->base.kernel, "%s%s",
           e->mode == MODE_CUBLASLT                  ? "cublaslt"
           : e->mode == MODE_MEASURED               ? "gemmd wgmma or cublaslt, by measured time"
           : e->kernel == GEMMD_GPU_KERNEL_WGMMA ? "gemmd wgmma (TMA + WGMMA)"
                                                     : "gemmd simple (mma.sync)",
           e->use_graphs ? ", graphs" : ", eager");
  pthread_mutex_init(&e->mu, NULL);
  pthread_mutex_init(&e->up_mu, NULL);
  gemmd_ipc_maps_init(&e->ipc_maps, ipc_open, ipc_close, e);
  pthread_condattr_t monotonic;
  pthread_condattr_init(&monotonic);
  pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
  pthread_cond_init(&e->cv, &monotonic); /* the completion thread's timed waits */
  pthread_condattr_destroy(&monotonic);
  pthread_cond_init(&e->fin_cv, NULL);
  err = cudaSetDevice(e->device);
  int lowest = 0, highest = 0;
  if (!err) err = cudaDeviceGetStreamPriorityRange(&lowest, &highest);
  for (unsigned i = 0; !err && i < e->n_slots; i++) {
    err = cudaStreamCreateWithPriority(&e->slots[i].urgent, cudaStreamNonBlocking, highest);
    if (!err) err = cudaStreamCreateWithPriority(&e->slots[i].bulk, cudaStreamNonBlocking, lowest);
    e->slots[i].stream = e->slots[i].urgent;
    if (!err) err = cudaEventCreate(&e->slots[i].start);
    if (!err) err = cudaEventCreate(&e->slots[i].stop);
    if (!err) err = cudaEventCreate(&e->slots[i].gemm_start);
    if (!err) err = cudaEventCreate(&e->slots[i].gemm_stop);
    const size_t clock_dev = GEMMD_GPU_COPY_CLOCK_DEV_WORDS * sizeof(unsigned long long);
    if (!err) err = cudaMalloc((void **)&e->slots[i].clock_dev, clock_dev);
    if (!err) err = cudaMemset(e->slots[i].clock_dev, 0, clock_dev);
    if (!err) {
      err = cudaMallocHost((void **)&e->slots[i].clock_host,
                           GEMMD_GPU_COPY_CLOCK_HOST_WORDS * sizeof(unsigned long long));
    }
    /* Split-K batches on the slots' streams may run at once: a workspace each. */
    if (!err && e->mode != MODE_CUBLASLT && e->kernel == GEMMD_GPU_KERNEL_WGMMA) {
      err = cudaMalloc(&e->slots[i].ws, gemmd_gpu_gemm_workspace_bytes());
      if (!err) err = cudaMemset(e->slots[i].ws, 0, gemmd_gpu_gemm_workspace_bytes());
    }
  }
  if (!err) err = cudaStreamCreateWithFlags(&e->up_stream, cudaStreamNonBlocking);
  for (int i = 0; i < 2 && !err; i++) {
    err = cudaMallocHost((void **)&e->up_host[i], STAGE_BYTES);
    if (!err) err = cudaEventCreateWithFlags(&e->up_free[i], cudaEventDisableTiming);
  }
  if (!err) err = cudaDeviceSynchronize(); /* the workspaces are zero before any batch */
  if (!err && e->mode != MODE_OWN && gemmd_cublaslt_create(64u << 20, &e->lt) != GEMMD_OK) err = cudaErrorUnknown;
  if (err) {
    snprintf(why, whylen, "CUDA set-up failed: %s", cudaGetErrorString(err));
    gemmd_kernel_choices_free(e->choices);
    free(e);
    return GEMMD_ENOTSUP;
  }
  /* Named for top -H, perf and gdb. */
  pthread_create(&e->stager, NULL, stager_main, e);
  pthread_setname_np(e->stager, "gemmd-stager");
  pthread_create(&e->completer, NULL, completer_main, e);
  pthread_setname_np(e->completer, "gemmd-complete");
  for (int i = 0; i < N_FINISHERS; i++) {
    e->finisher_args[i].e = e;
    e->finisher_args[i].index = i;
    pthread_create(&e->finishers[i], NULL, finisher_main, &e->finisher_args[i]);
    pthread_setname_np(e->finishers[i], "gemmd-finish");
  }
  *out = &e->base;
  return GEMMD_OK;
}

/* --test-fault-after-batches: a real sticky device error, as a bad kernel would cause. */
static int fault_kernel_launch(cudaStream_t stream) { return gemmd_cuda_inject_fault(stream); }
