// The WGMMA kernel's one instrumentation switch, GEMMD_WGMMA_STAMPS (0 in gemmd's build,
// where every function here is empty). Built with 1 (//kernels/bench:gemm_bench_stamps),
// each CTA writes the global timer (ns) and its SM's clock at each point of a launch in
// StampPoint, and a timeline of each consumer warpgroup's WGMMAs over the ring's last
// round of K blocks, which gemm_bench --stamps reads back (kernels/gpu_gemm_bench.h):
// where the fixed cost of a short launch goes and whether the two warpgroups' WGMMAs
// overlap. Built with 2, the timeline is of each warpgroup's first 2 · kMaxStages K blocks
// instead (where a small-M unit's early blocks lose time). Results stay right either way.
#ifndef GEMMD_KERNELS_WGMMA_STAMPS_CUH_
#define GEMMD_KERNELS_WGMMA_STAMPS_CUH_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "kernels/errors.h"
#include "kernels/wgmma/layout.cuh"

#ifndef GEMMD_WGMMA_STAMPS
#define GEMMD_WGMMA_STAMPS 0
#endif

namespace gemmd::wgmma {

// Whether this build stamps: the roles test it before work done only for the stamps.
constexpr bool kStamps = GEMMD_WGMMA_STAMPS != 0;

// The points a CTA stamps (thread 0 / the TMA thread / consumer warpgroup 0's thread 0),
// in gemm_bench --stamps' order.
enum StampPoint : uint32_t {
  kStampEntry,        // thread 0 at the kernel's start
  kStampHeader,       // thread 0: the batch header's kind read
  kStampSched,        // thread 0: the group tile count known (from the header for one group,
                      // else the prefix sums' total read from the scheduling area)
  kStampSynced,       // TMA thread: past the CTA's barrier setup, __syncthreads and setmaxnreg
  kStampPrefetched,   // TMA thread: then a one-group batch's two maps' prefetches issued
  kStampUnit,         // TMA thread: its first unit's group and tile known (locate)
  kStampAcquired,     // TMA thread: then its two maps' acquire fences passed
  kStampLocated,      // TMA thread: then the group's fields read (K, rows: the load's bytes)
  kStampFirstLoads,   // TMA thread: the first stage's loads issued
  kStampFirstScales,  // scale warp, lane 0: the first stage's scale copies issued
  kStampFirstFull,    // consumer 0: the first stage has landed
  kStampFirstTile,    // consumer 0: its first unit written out
  kStampLastTile,     // consumer 0: its last unit written out
  kStampPoints
};
// Their names, in StampPoint's order (gemmd_gpu_gemm_stamp_name: gemm_bench's labels).
constexpr const char *kStampNames[] = {"entry",      "header",     "sched",    "synced",  "prefetched",
                                       "unit",       "acquired",   "located",  "loads",   "scales",
                                       "first_full", "first_tile", "last_tile"};
static_assert(sizeof kStampNames / sizeof kStampNames[0] == kStampPoints, "a name per stamp point");
constexpr uint32_t kStampCtas = 256;
// The timeline: per CTA, consumer warpgroup, K block (stage + kStages · phase of the ring's
// last round, at most 2 · kMaxStages) and 64-row half, the SM clock when the half's WGMMAs
// were issued (0) and when they had completed (1) (the last blocks' values stay); and (2)
// for half 0 when the warpgroup began to wait for the block's full barrier, for half 1 when
// it had released the stage.
constexpr uint32_t kWgStampValues = 3;

#if GEMMD_WGMMA_STAMPS
__device__ unsigned long long g_stamps[kStampCtas][kStampPoints][2];
__device__ unsigned long long g_wg_stamps[kStampCtas][2][2 * kMaxStages][2][kWgStampValues];
#endif

#if GEMMD_WGMMA_STAMPS == 2
// Each warpgroup's count of K blocks begun, in shared memory.
__device__ __forceinline__ uint32_t *wg_first_counts() {
  __shared__ uint32_t counts[2];
  return counts;
}
#endif

// Zeroes the warpgroups' block counts (STAMPS=2), with the barriers' init (thread 0).
__device__ __forceinline__ void stamps_init() {
#if GEMMD_WGMMA_STAMPS == 2
  wg_first_counts()[0] = wg_first_counts()[1] = 0;
#endif
}

__device__ __forceinline__ void wg_stamp([[maybe_unused]] uint32_t wg, [[maybe_unused]] uint32_t block,
                                         [[maybe_unused]] uint32_t h, [[maybe_unused]] uint32_t done) {
#if GEMMD_WGMMA_STAMPS
  if (threadIdx.x % 128 == 0 && blockIdx.x < kStampCtas && wg < 2 && h < 2) {
    unsigned long long clk;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(clk));
#if GEMMD_WGMMA_STAMPS == 2
    uint32_t &count = wg_first_counts()[wg];
    block = h == 0 && done == 2 ? count++ : count - 1;  // the block's wait begins: a new block
    if (block >= 2 * kMaxStages) return;
#endif
    g_wg_stamps[blockIdx.x][wg][block][h][done] = clk;
  }
#endif
}

// Stamps `point` once `dep` (a value the point waits for) is in a register.
__device__ __forceinline__ void stamp([[maybe_unused]] uint32_t point, [[maybe_unused]] uint32_t dep = 0) {
#if GEMMD_WGMMA_STAMPS
  unsigned long long ns, clk;
  asm volatile(
      "{\n.reg .pred p;\nsetp.eq.u32 p, %2, 0xFFFFFFFF;\n@!p mov.u64 %0, %%globaltimer;\n@p mov.u64 %0, 0;\n"
      "mov.u64 %1, %%clock64;\n}"
      : "=l"(ns), "=l"(clk)
      : "r"(dep)
      : "memory");
  if (blockIdx.x < kStampCtas) {
    g_stamps[blockIdx.x][point][0] = ns;
    g_stamps[blockIdx.x][point][1] = clk;
  }
#endif
}

// Host: the stamps of the last launch copied to `out`, or with `out` null zeroed;
// GEMMD_ENOTSUP in builds without them.
#if GEMMD_WGMMA_STAMPS
template <typename T>
int read_stamps(const T &symbol, uint64_t *out) {
  void *at = nullptr;
  if (cudaGetSymbolAddress(&at, symbol) != cudaSuccess) return GEMMD_EDEVICE;
  const cudaError_t rc =
      out == nullptr ? cudaMemset(at, 0, sizeof(T)) : cudaMemcpy(out, at, sizeof(T), cudaMemcpyDeviceToHost);
  return rc == cudaSuccess ? GEMMD_OK : GEMMD_EDEVICE;
}
inline int read_point_stamps(uint64_t *out) { return read_stamps(g_stamps, out); }
inline int read_wg_stamps(uint64_t *out) { return read_stamps(g_wg_stamps, out); }
#else
inline int read_point_stamps(uint64_t *) { return GEMMD_ENOTSUP; }
inline int read_wg_stamps(uint64_t *) { return GEMMD_ENOTSUP; }
#endif

}  // namespace gemmd::wgmma

#endif  // GEMMD_KERNELS_WGMMA_STAMPS_CUH_
