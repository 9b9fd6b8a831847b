// The Hopper instructions the WGMMA kernel uses, one inline-asm wrapper each: shared-memory
// access and named barriers, clusters, mbarriers, TMA loads and stores, cp.async, and the
// WGMMA fences and shared-memory descriptors. The WGMMA instructions themselves, one per
// width and input-type pair, are generated: wgmma_ops.cuh (tools/gen/wgmma_ops.py).
#ifndef GEMMD_KERNELS_WGMMA_PTX_CUH_
#define GEMMD_KERNELS_WGMMA_PTX_CUH_

#include <stdint.h>

#include "kernels/wgmma/wgmma_ops.cuh"

namespace gemmd::wgmma {

// ---- Shared memory and named barriers ------------------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ float ld_shared_f32(const float *p) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(smem_addr(p)));
  return v;
}

__device__ __forceinline__ void st_shared_u32(void *p, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(smem_addr(p)), "r"(v) : "memory");
}

__device__ __forceinline__ uint4 ld_shared_v4(const void *p) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(smem_addr(p))
               : "memory");
  return v;
}

// The 128 threads of consumer warpgroup `wg` meet (named barrier 1 + wg; 0 is
// __syncthreads').
__device__ __forceinline__ void warpgroup_sync(uint32_t wg) {
  asm volatile("bar.sync %0, 128;" ::"r"(1 + wg) : "memory");
}

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// ---- Clusters ------------------------------------------------------------------------------

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// Every thread of both CTAs of the cluster meets here (memory ordered across them).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// ---- mbarriers -----------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

// Makes the barriers' initialization visible to the cluster's other threads and to TMA.
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// An arrive on the barrier at the same shared-memory offset in the cluster's other CTA
// (release at CTA scope: with .release.cluster ptxas put MEMBAR.ALL.GPU before each one,
// 1.3-1.4x the time; the WGMMAs have finished reading the stage when the consumers arrive).
__device__ __forceinline__ void mbar_arrive_peer(uint64_t *bar) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(cluster_rank() ^ 1u)
      : "memory");
}

// Whether the phase with this parity of the barrier at shared address `bar` has completed,
// without blocking.
__device__ __forceinline__ bool mbar_test_wait_at(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ bool mbar_try_wait(uint64_t *bar, uint32_t parity) {
  uint32_t done = 0;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// A barrier that never completes is a kernel bug (or a fault): after this long the kernel
// traps, so the engine sees a device error instead of a hang.
constexpr uint64_t kHangNs = 4000000000ull;

// Waits until the phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  if (mbar_try_wait(bar, parity)) return;
  const uint64_t start = global_ns();
  while (!mbar_try_wait(bar, parity)) {
    if (global_ns() - start > kHangNs) __trap();
  }
}

// ---- TMA -----------------------------------------------------------------------------------

// The tensor map was written by the host into global memory (the batch upload): order
// this thread's later tensor-map reads after that write. System scope, as the CUDA
// programming guide's example for a map written with cudaMemcpy has it.
__device__ __forceinline__ void tmap_acquire(const void *tmap) {
  asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;" ::"l"(tmap) : "memory");
}

// Brings the global line at `p` into L2 (a hint).
__device__ __forceinline__ void prefetch_l2(const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Brings a tensor map into the TMA unit's descriptor cache ahead of its first use.
__device__ __forceinline__ void tmap_prefetch(const void *tmap) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(tmap) : "memory");
}

// Rows y.. of the map's 2D tensor, bytes x.. of each, into `dst`; completion counted on `bar`.
__device__ __forceinline__ void tma_load_2d(void *dst, const void *tmap, uint64_t *bar, uint32_t x, uint32_t y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          smem_addr(dst)),
      "l"(tmap), "r"(x), "r"(y), "r"(smem_addr(bar))
      : "memory");
}

// As tma_load_2d, into the same offset of both CTAs' shared memory, completion counted on
// the barrier at `bar`'s offset in each.
__device__ __forceinline__ void tma_load_2d_multicast(void *dst, const void *tmap, uint64_t *bar, uint32_t x,
                                                      uint32_t y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
      "%3}], [%4], %5;" ::"r"(smem_addr(dst)),
      "l"(tmap), "r"(x), "r"(y), "r"(smem_addr(bar)), "h"((uint16_t)3)
      : "memory");
}

// A box of D from shared memory to columns x.., rows y.. of the map's tensor (TMA; rows
// and columns past the tensor are not written). The issuing thread's stores form bulk
// groups.
__device__ __forceinline__ void tma_store_2d(const void *tmap, const void *src, uint32_t x, uint32_t y) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(tmap), "r"(x),
               "r"(y), "r"(smem_addr(src))
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// This thread's bulk stores have read their shared memory (it may be overwritten).
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// This thread's bulk stores are complete (written to global memory).
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// Orders this thread's shared-memory writes before later reads by the async proxy (TMA).
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Byte offset of `off` in a box swizzled as the tensor map's SWIZZLE_{32,64,128}B for rows
// of `row_bytes` (32, 64 or 128): 16-byte chunk bits XOR the 128-byte line bits.
__device__ __forceinline__ uint32_t swizzled(uint32_t off, uint32_t row_bytes) {
  const uint32_t mask = row_bytes / 16 - 1;
  return off ^ (((off >> 7) & mask) << 4);
}

// ---- cp.async ------------------------------------------------------------------------------

// 4 bytes from global to shared memory, asynchronously.
__device__ __forceinline__ void cp_async_4(void *dst, const void *src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}

// 16 bytes from global to shared memory, asynchronously (L2 only), and the groups that
// cp.async.wait_group counts.
__device__ __forceinline__ void cp_async_16(void *dst, const void *src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <uint32_t kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// One of `bar`'s expected arrivals, made when this thread's cp.asyncs so far have landed.
__device__ __forceinline__ void cp_async_arrive(uint64_t *bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// ---- WGMMA ---------------------------------------------------------------------------------

// Shared-memory matrix descriptors: K-major rows of 128 bytes, 128-byte swizzle, 8-row
// groups 1024 bytes apart (SBO; the leading offset is unused for swizzled K-major), for the
// address field `lo` (bits 0-13: the shared-memory address / 16). Shared addresses are
// below 2^18, so adding (byte offset / 16) to `lo` never carries out of the field: a K
// block's descriptors are its stage's field plus constants, which ptxas keeps in uniform
// registers (rebuilt from the stage's pointer in vector registers for every block, they
// cost 9–13% at M = 4096; docs/bench/kernels.md).
__device__ __forceinline__ uint32_t desc_lo(const void *p) { return smem_addr(p) >> 4; }
__device__ __forceinline__ uint64_t desc_of_lo(uint32_t lo) {
  return uint64_t(lo) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

template <uint32_t kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Gives a warpgroup's registers up to `kRegs` per thread, or takes them up to it (the
// producer warpgroup gives its registers to the consumers).
template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}

}  // namespace gemmd::wgmma

#endif  // GEMMD_KERNELS_WGMMA_PTX_CUH_
