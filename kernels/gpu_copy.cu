// gemmd_gpu_copy_many (gpu_copy.h): one launch per GEMMD_GPU_COPIES_PER_LAUNCH copies, the
// copies by value in the kernel's parameters (under the 4 KB that every launch may carry),
// so a captured or a plain launch needs no upload of its list; gemmd_gpu_copy_node_params
// gives the same launch as a captured node's new parameters, with the copy clock where asked.
// Block (x, y) copies a share of copy y: 16 bytes a thread where both sides and the pitches
// allow, else byte by byte.
#include <cuda_runtime.h>
#include <stddef.h>

#include "kernels/errors.h"
#include "kernels/gpu_copy.h"

namespace {

constexpr int kThreads = 256;
constexpr uint32_t kMaxBlocksPerCopy = 256;

struct CopyList {
  gemmd_gpu_copy_t c[GEMMD_GPU_COPIES_PER_LAUNCH];
  gemmd_gpu_copy_clock_t clock;
};
static_assert(sizeof(CopyList) <= 4000, "a launch's parameters stay under 4 KB");
static_assert(offsetof(CopyList, clock) == offsetof(gemmd_gpu_copy_node_t, clock) &&
                  sizeof(CopyList) <= offsetof(gemmd_gpu_copy_node_t, arg),
              "a node's storage holds one launch's parameters");

// The clock's device words: the BEFORE launch's start and end, and the AFTER launch's
// count of blocks done.
enum { kDevBeforeStart, kDevBeforeEnd, kDevAfterBlocks, kDevWords };
static_assert(static_cast<int>(kDevWords) == static_cast<int>(GEMMD_GPU_COPY_CLOCK_DEV_WORDS),
              "gpu_copy.h counts the clock's device words");

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void __launch_bounds__(kThreads) copy_many(const CopyList list) {
  const gemmd_gpu_copy_clock_t &clock = list.clock;
  const bool first_block = blockIdx.x == 0 && blockIdx.y == 0;
  if (clock.role == GEMMD_GPU_COPY_CLOCK_BEFORE && first_block && threadIdx.x == 0) {
    clock.dev[kDevBeforeStart] = global_ns();
  }
  // The AFTER role's start, and the BEFORE launch's words loaded now and written after the
  // copy, so that neither round trip delays this block's share.
  const bool starts = clock.role == GEMMD_GPU_COPY_CLOCK_AFTER && threadIdx.x == 0 && first_block;
  unsigned long long now = 0, before_start = 0, before_end = 0;
  if (starts) {
    now = global_ns();
    before_start = *reinterpret_cast<volatile unsigned long long *>(clock.dev + kDevBeforeStart);
    before_end = *reinterpret_cast<volatile unsigned long long *>(clock.dev + kDevBeforeEnd);
  }
  const gemmd_gpu_copy_t &c = list.c[blockIdx.y];
  const uint8_t *src = reinterpret_cast<const uint8_t *>(c.src);
  uint8_t *dst = reinterpret_cast<uint8_t *>(c.dst);
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * kThreads;
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const bool wide = ((c.src | c.dst | c.row_bytes | c.src_pitch | c.dst_pitch) & 15) == 0;
  if (wide) {
    const uint32_t per_row = c.row_bytes / 16;
    const uint64_t total = static_cast<uint64_t>(c.rows) * per_row;
    for (uint64_t i = first; i < total; i += stride) {
      const uint64_t r = i / per_row, v = i % per_row;
      *reinterpret_cast<uint4 *>(dst + r * c.dst_pitch + v * 16) =
          *reinterpret_cast<const uint4 *>(src + r * c.src_pitch + v * 16);
    }
  } else {
    const uint64_t total = static_cast<uint64_t>(c.rows) * c.row_bytes;
    for (uint64_t i = first; i < total; i += stride) {
      const uint64_t r = i / c.row_bytes, b = i % c.row_bytes;
      dst[r * c.dst_pitch + b] = src[r * c.src_pitch + b];
    }
  }
  if (starts) {
    clock.host[GEMMD_GPU_COPY_CLOCK_BEFORE_START] = before_start;
    clock.host[GEMMD_GPU_COPY_CLOCK_BEFORE_END] = before_end;
    clock.host[GEMMD_GPU_COPY_CLOCK_AFTER_START] = now;
    clock.dev[kDevBeforeEnd] = 0;
  }
  if (clock.role == GEMMD_GPU_COPY_CLOCK_BEFORE) {  // the launch's end: its last block's
    __syncthreads();
    if (threadIdx.x == 0) atomicMax(clock.dev + kDevBeforeEnd, global_ns());
  } else if (clock.role == GEMMD_GPU_COPY_CLOCK_AFTER) {
    // Each block's writes are made visible to the host before it counts itself, so the
    // last one to count writes the end after every copy of the launch (and the words
    // above) can be seen.
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence_system();
      unsigned long long *blocks = clock.dev + kDevAfterBlocks;
      const unsigned long long all = static_cast<unsigned long long>(gridDim.x) * gridDim.y;
      if (atomicAdd(blocks, 1ull) == all - 1) {
        *blocks = 0;
        __threadfence_system();
        clock.host[GEMMD_GPU_COPY_CLOCK_AFTER_END] = global_ns();
      }
    }
  }
}

// Checks a list as gemmd_gpu_copy_many documents.
int check(const gemmd_gpu_copy_t *copies, uint32_t n) {
  if (n > 0 && copies == nullptr) return GEMMD_EINVAL;
  for (uint32_t i = 0; i < n; i++) {
    const gemmd_gpu_copy_t &c = copies[i];
    if (c.rows > 1 && (c.src_pitch < c.row_bytes || c.dst_pitch < c.row_bytes)) return GEMMD_EINVAL;
    if (c.rows > 0 && c.row_bytes > 0 && (c.src == 0 || c.dst == 0)) return GEMMD_EINVAL;
  }
  return GEMMD_OK;
}

// One launch's list and its grid: enough blocks that each thread of the largest copy moves
// one 16-byte vector, at most kMaxBlocksPerCopy (a thread's next load waits for its store,
// and a load from pinned host memory is a PCIe round trip, µs, so a small copy from the
// host takes one), and one row of blocks per copy (at least one, of an empty list).
dim3 fill(const gemmd_gpu_copy_t *copies, uint32_t count, CopyList *list) {
  uint64_t largest = 0;
  for (uint32_t i = 0; i < count; i++) {
    list->c[i] = copies[i];
    const uint64_t bytes = static_cast<uint64_t>(copies[i].rows) * copies[i].row_bytes;
    largest = bytes > largest ? bytes : largest;
  }
  if (count == 0) list->c[0] = gemmd_gpu_copy_t{};
  uint64_t blocks = (largest + kThreads * 16 - 1) / (kThreads * 16);
  blocks = blocks < 1 ? 1 : blocks > kMaxBlocksPerCopy ? kMaxBlocksPerCopy : blocks;
  return dim3(static_cast<uint32_t>(blocks), count > 0 ? count : 1);
}

}  // namespace

extern "C" int gemmd_gpu_copy_many(const gemmd_gpu_copy_t *copies, uint32_t n, cudaStream_t stream) {
  if (check(copies, n) != GEMMD_OK) return GEMMD_EINVAL;
  for (uint32_t at = 0; at < n; at += GEMMD_GPU_COPIES_PER_LAUNCH) {
    const uint32_t count = n - at < GEMMD_GPU_COPIES_PER_LAUNCH ? n - at : GEMMD_GPU_COPIES_PER_LAUNCH;
    CopyList list;
    list.clock = gemmd_gpu_copy_clock_t{};
    const dim3 grid = fill(copies + at, count, &list);
    copy_many<<<grid, kThreads, 0, stream>>>(list);
    if (cudaGetLastError() != cudaSuccess) return GEMMD_EDEVICE;
  }
  return GEMMD_OK;
}

extern "C" int gemmd_gpu_copy_node_params(const gemmd_gpu_copy_t *copies, uint32_t n,
                                          const gemmd_gpu_copy_clock_t *clock, gemmd_gpu_copy_node_t *storage,
                                          struct cudaKernelNodeParams *params) {
  if (n > GEMMD_GPU_COPIES_PER_LAUNCH || storage == nullptr || params == nullptr) return GEMMD_EINVAL;
  if (check(copies, n) != GEMMD_OK) return GEMMD_EINVAL;
  if (clock != nullptr && clock->role != GEMMD_GPU_COPY_CLOCK_OFF &&
      (clock->dev == nullptr || clock->host == nullptr ||
       (clock->role != GEMMD_GPU_COPY_CLOCK_BEFORE && clock->role != GEMMD_GPU_COPY_CLOCK_AFTER))) {
    return GEMMD_EINVAL;
  }
  CopyList *list = reinterpret_cast<CopyList *>(storage);
  list->clock = clock != nullptr ? *clock : gemmd_gpu_copy_clock_t{};
  const dim3 grid = fill(copies, n, list);
  storage->arg = list;
  *params = cudaKernelNodeParams{};
  params->func = reinterpret_cast<void *>(copy_many);
  params->gridDim = grid;
  params->blockDim = dim3(kThreads);
  params->kernelParams = &storage->arg;
  return GEMMD_OK;
}
