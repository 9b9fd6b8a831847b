/* The engine seam: what runs a batch. The CPU engine (engine_cpu.c) and the CUDA engine
 * (engine_cuda.c, issue 5) sit behind the same table of functions.
 *
 * The loop submits a planned batch when the engine has a free slot; the engine runs it
 * on its own threads and calls `done` (from one of them) when the batch has a status,
 * and the results are in place: batch->status, compute_ns, and for OK every request's
 * d points at its rows. `done` must not block; gemmd's posts the batch back to the loop.
 *
 * A batch holds its slot until batch_release: on the loop once it has answered the batch,
 * or earlier, from the thread that called `done`, when `done` answered every request
 * itself (request.h answer_early) and nothing reads the engine's copy of the results
 * again (batch->slot_freed then says so).
 */
#ifndef GEMMD_DAEMON_ENGINE_H_
#define GEMMD_DAEMON_ENGINE_H_

#include <stddef.h>

#include "daemon/batch.h"
#include "daemon/weight.h"

typedef struct gemmd_engine_s gemmd_engine_t;

/* The granularity of arena registration: registrations start and end at multiples of it
 * (or the arena's ends), and no DMA crosses one. */
#define GEMMD_PIN_CHUNK ((size_t)2 << 20)
typedef void (*gemmd_engine_done_fn)(void *ctx, gemmd_batch_t *batch);

typedef struct gemmd_engine_ops_s {
  /* Queues a batch; returns 0, or an error when it cannot (then done never runs). */
  int (*submit)(gemmd_engine_t *e, gemmd_batch_t *batch);
  /* Makes the engine's copy of a weight (device upload); 0 or an error. Runs on a uv pool
   * thread (registration) or the start-up loader's (loader.h), while batches run: it touches
   * only the weight and thread-safe engine state. */
  int (*weight_load)(gemmd_engine_t *e, gemmd_weight_t *w);
  /* Quantizes a BF16/FP16/FP32 weight (no scales of its own, rows dense) to E4M3 with
   * 128×128 scales into host memory, bit for bit what kernels/quantize.h gives (the CUDA
   * engine: on the GPU). GEMMD_ENOTSUP or GEMMD_ENOMEM: the caller quantizes on the host.
   * Any thread that registers weights. May be NULL. */
  int (*weight_quantize)(gemmd_engine_t *e, const gemmd_operand_t *src, uint8_t *dst, float *scales);
  /* Drops the engine's copy; only called when no batch uses the weight. */
  void (*weight_unload)(gemmd_engine_t *e, gemmd_weight_t *w);
  /* Part of a shared-memory client's arena is in use / the arena is going away: the CUDA
   * engine registers [base, base + bytes) (cudaHostRegister) so that A and D move by DMA
   * straight from and into it. The range's ends are GEMMD_PIN_CHUNK-aligned or the
   * arena's own; unregister takes back exactly the ranges registered. Runs on a uv pool
   * thread while batches run; takes a while (populates and pins every page). Requests say
   * what of theirs is registered (request.h a_pinned, d_dest_pinned). May be NULL. */
  int (*arena_register)(gemmd_engine_t *e, void *base, size_t bytes);
  void (*arena_unregister)(gemmd_engine_t *e, void *base, size_t bytes);
  /* A shared-memory client's region of its own device memory (docs/shm-protocol.md §7):
   * `kind` GEMMD_SHM_REGION_FD with `fd` (kept open by the caller, closed by it after), or
   * GEMMD_SHM_REGION_CUDA_IPC with the 64-byte `handle`. Maps at least `bytes` of it and
   * returns its base, where the engine reads A and writes D in place, and whether that is
   * device memory the host must not touch (the requests' a_device, d_device), or a gRPC
   * code with msg. The CPU engine's device memory is the host's: it maps the fd (a memfd);
   * the CUDA engine opens IPC handles. Runs on a uv pool thread (opening takes a while).
   * close unmaps, on the loop, when no request uses the region. NULL: no regions here. */
  int (*region_open)(gemmd_engine_t *e, int kind, int fd, const uint8_t handle[64], uint64_t bytes,
                     void **base, int *on_device, char *msg, size_t n);
  void (*region_close)(gemmd_engine_t *e, void *base, uint64_t bytes);
  /* Frees the engine's arenas of a finished batch and its slot, once its requests are
   * answered: on the loop, or on the thread that called `done` (see above). */
  void (*batch_release)(gemmd_engine_t *e, gemmd_batch_t *batch);
  /* Writes what the engine learned and keeps across starts (the CUDA engine's kernel
   * choices, kernel_choice.h), if anything changed. uv pool thread. May be NULL. */
  void (*save_state)(gemmd_engine_t *e);
  /* Device memory the engine holds, in bytes. */
  uint64_t (*memory_used)(gemmd_engine_t *e);
  /* Stops the workers (no batch may be in flight) and frees the engine. */
  void (*close)(gemmd_engine_t *e);
} gemmd_engine_ops_t;

struct gemmd_engine_s {
  const gemmd_engine_ops_t *ops;
  const char *backend;   /* "cpu" or "cuda" */
  char device[128];      /* what it runs on, for logs and gemmd_build_info */
  char pci_bus_id[32];   /* the GPU's PCI address ("0000:3b:00.0"; "" without a GPU), for NVML */
  char kernel[64];       /* the GEMM implementation, for ServerStats */
  unsigned slots;        /* batches it accepts at once */
  int quantizes_a;       /* takes BF16/FP16/FP32 A as sent and quantizes it itself */
  uint32_t row_align;    /* bytes the rows of A must be multiples of (gemmd_batch_plan) */
  gemmd_engine_done_fn done;
  void *done_ctx;
};

/* The CPU engine: batches run group by group through kernels/cpu_gemm.h on `threads`
 * threads (0: every online CPU); batches of at most inline_flops run on the thread that
 * submits them (done is then called before submit returns). */
int gemmd_engine_cpu_create(int threads, double inline_flops, gemmd_engine_done_fn done,
                            void *done_ctx, gemmd_engine_t **out);

/* The CUDA engine (engine_cuda.c, built with a CUDA toolkit): device `device` must be an
 * sm_90 GPU. kernel: "wgmma", "gemmd", "cublaslt" or "measured" (wgmma or cuBLASLt per
 * batch, by measured time: kernel_choice.h); graphs: capture and replay batches.
 * fault_after: tests only, 0 = never; else make the device fail on that batch.
 * spin_us: the staging and completion threads poll this long for work / for the GPU
 * before they sleep (0: sleep at once). slots: batches in flight at once (1..8), each with
 * its own device buffer, pinned copy and stream. copy_kernel_bytes: a batch's upload and
 * its results of at most this many bytes each go by copy kernel over PCIe (0: by DMA).
 * Returns 0, or GEMMD_ENOTSUP with why (no GPU, not sm_90, built without CUDA). */
typedef struct gemmd_cuda_options_s {
  int device;
  const char *kernel;
  int graphs;
  int64_t fault_after;
  int64_t spin_us;
  int64_t slots;
  int64_t choice_samples;   /* kernel "measured": runs of each kernel before a signature is decided */
  const char *choices_path; /* kernel "measured": where the choices persist (NULL: nowhere) */
  int64_t copy_kernel_bytes;
} gemmd_cuda_options_t;

int gemmd_engine_cuda_create(const gemmd_cuda_options_t *o, gemmd_engine_done_fn done,
                             void *done_ctx, gemmd_engine_t **out, char *why, size_t whylen);

#endif /* GEMMD_DAEMON_ENGINE_H_ */
