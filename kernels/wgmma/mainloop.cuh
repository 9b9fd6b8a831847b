// The WGMMA kernel's main loop. Producer warpgroup: thread 0 issues each K block's TMA
// loads of A and B into the ring (produce); warp 1 copies the same stages' scales
// (load_scales). Consumer warpgroups: per K block, wait for the stage, issue its WGMMAs into
// a block accumulator, release the stage and promote the block into the FP32 totals with
// its scales (k_block; k_block_halves for 256-row tiles). kernel.cu's consume_tile runs a
// tile's K blocks.
#ifndef GEMMD_KERNELS_WGMMA_MAINLOOP_CUH_
#define GEMMD_KERNELS_WGMMA_MAINLOOP_CUH_

#include <stdint.h>

#include "kernels/gpu_gemm_device.cuh"
#include "kernels/group_table.h"
#include "kernels/wgmma/layout.cuh"
#include "kernels/wgmma/ptx.cuh"
#include "kernels/wgmma/scheduler.cuh"
#include "kernels/wgmma/stamps.cuh"

namespace gemmd::wgmma {

// A consumer warp is done with a stage (its WGMMAs reading it have completed): one arrive
// per warp, not per thread.
__device__ __forceinline__ void release_stage(uint64_t *bar) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) {
    mbar_arrive(bar);
  }
}

// release_stage for tiles of kind K: paired tiles' stages hold the other CTA's multicast
// too, so it waits for the consumers of both CTAs.
template <typename K>
__device__ __forceinline__ void release_stage_of(uint64_t *bar) {
  if constexpr (K::kPair) {
    __syncwarp();
    if (threadIdx.x % 32 == 0) {
      mbar_arrive(bar);
      mbar_arrive_peer(bar);
    }
  } else {
    release_stage(bar);
  }
}

// ---- Producer: TMA loads -------------------------------------------------------------------

// The producer warpgroup's thread 0: for each unit of the CTA and each of its K blocks,
// wait for the stage to be empty, arm its "full" barrier with the bytes to come, and issue
// two TMA loads: A rows m0.. (BM, or fewer for a small group: a_box_rows) and B rows
// n0..n0+BN-1, 128 bytes of K each, 128-byte swizzled. TMA fills rows past m or n and bytes
// past k with zeros. A one-group batch's two maps are prefetched first, so their fetch
// overlaps the first unit's locating reads.
template <typename K, uint32_t BN>
__device__ __forceinline__ void produce(const BatchView &v, uint8_t *ring, Barriers &bars) {
  using R = Ring<K, BN>;
  uint32_t stage = 0, phase = 0, last_group = 0xFFFFFFFFu, loads = 0;
  if (v.n_groups == 1) {
    tmap_prefetch(v.tmaps);
    tmap_prefetch(v.tmaps + GEMMD_GPU_TMAP_BYTES);
  }
  if (kStamps) stamp(kStampPrefetched);
  for (uint32_t t = first_unit<K>(); t < v.total_tiles; t += unit_step<K>()) {
    const TileRef tr = locate_unit<K, BN>(v, t);
    if (kStamps && loads == 0) stamp(kStampUnit, tr.n0);
    const uint8_t *tm_a = v.tmaps + (size_t)tr.group * kMapsPerGroup * GEMMD_GPU_TMAP_BYTES;
    const uint8_t *tm_b = tm_a + GEMMD_GPU_TMAP_BYTES;
    if (tr.group != last_group) {
      tmap_acquire(tm_a);
      tmap_acquire(tm_b);
      last_group = tr.group;
    }
    if (kStamps && loads == 0) stamp(kStampAcquired);
    const gemmd_group_params_t &g = v.table[tr.group];
    const uint32_t kblocks = gemmd_ceil_div(g.k, BK), bytes = (a_box_rows(g.m, K::BM) + BN) * BK;
    const KRange kr = k_range<K>(tr, kblocks);
    if (kStamps && loads == 0) stamp(kStampLocated, bytes);
    for (uint32_t kb = kr.kb0; kb < kr.kb1; kb++) {
      mbar_wait(&bars.empty[stage], phase ^ 1);
      uint8_t *dst = ring + stage * R::kStageBytes;
      mbar_arrive_expect_tx(&bars.full[stage], bytes);
      if constexpr (K::kPair) {
        // This CTA's half of A's rows, multicast: both halves land in each CTA (the other
        // CTA's bytes may be counted before this arms the barrier: the phase still waits
        // for this thread's arrival). A group of fewer rows than the tile: rank 0 brings
        // them all.
        const uint32_t rank = cluster_rank();
        if (g.m >= K::BM) {
          tma_load_2d_multicast(dst + rank * (K::BM / 2) * BK, tm_a, &bars.full[stage], kb * BK,
                                tr.m0 + rank * (K::BM / 2));
        } else if (rank == 0) {
          tma_load_2d_multicast(dst, tm_a, &bars.full[stage], kb * BK, tr.m0);
        }
      } else {
        tma_load_2d(dst, tm_a, &bars.full[stage], kb * BK, tr.m0);
      }
      tma_load_2d(dst + K::kStageA, tm_b, &bars.full[stage], kb * BK, tr.n0);
      if (kStamps && loads == 0) stamp(kStampFirstLoads);
      loads++;
      if (++stage == R::kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
}

// ---- Producer: scales ----------------------------------------------------------------------

// 256-row tiles copy their scales in chunks of four K blocks (ScaleChunk) where K is a
// multiple of 4·128 of at least this many blocks (K >= 4096; at K <= 2048 chunks were 1-3%
// slower than per-block copies, docs/bench/kernels.md), and A's scales and the unit's row
// of B's are 16-byte aligned. Per block the scale warp copies 4 bytes per row, a quarter of
// the LSU's shared-memory wavefronts at 4096x7168x16384: chunks take 3-5% off the long-K
// cases.
constexpr uint32_t kChunkMinKBlocks = 32;

// Where a unit's scales are, and whether they come in chunks.
struct ScaleSource {
  const float *sa, *sb;  // sb: the unit's row of B's 128×128 block scales, or null
  uint32_t m0, m, kblocks;
  uint32_t sb_next;  // from sb to the row its columns cross into (next_scale_row)
  bool chunked;
};

// Where a tile of BN columns at n0 crosses into the next row of B's 128×128 block scales
// (widths that do not divide 128; n0 is a multiple of BN, so at most one row boundary):
// that row's offset from the tile's own, kblocks, else 0 (the tile's own row again).
template <uint32_t BN>
__device__ __forceinline__ uint32_t next_scale_row(const TileRef &tr, const gemmd_group_params_t &g,
                                                   uint32_t kblocks) {
  return 128 % BN != 0 && tr.n0 % 128 + BN > 128 && tr.n0 / 128 + 1 < gemmd_ceil_div(g.n, 128) ? kblocks : 0;
}

template <typename K, uint32_t BN>
__device__ __forceinline__ ScaleSource scale_source(const BatchView &v, const TileRef &tr,
                                                    const gemmd_group_params_t &g) {
  ScaleSource s;
  s.kblocks = gemmd_ceil_div(g.k, BK);
  s.sa = v.sa_arena + g.sa_offset;
  s.sb = g.b_layout == GEMMD_SCALE_BLOCK_128X128
             ? reinterpret_cast<const float *>(g.b_scales) + (size_t)(tr.n0 / 128) * s.kblocks
             : nullptr;
  s.m0 = tr.m0;
  s.m = g.m;
  s.sb_next = next_scale_row<BN>(tr, g, s.kblocks);
  s.chunked = kScaleChunkBytes<K, BN> != 0 && s.kblocks % 4 == 0 && s.kblocks >= kChunkMinKBlocks &&
              reinterpret_cast<uintptr_t>(s.sa) % 16 == 0 &&
              (s.sb == nullptr || reinterpret_cast<uintptr_t>(s.sb) % 16 == 0);
  return s;
}

// The scale warp's copies for one unit whose scales come in chunks: chunk c holds K blocks
// 4c..4c+3 of the unit's BM rows of A's scales (rows past m clamped to m - 1) and of B's
// block scales, 16 bytes per row (one cp.async per lane and 32 rows). Two chunks are in
// flight: chunk c + 2 is copied into c's slot once c's four stages are filled. Each stage's
// scales are then plain shared-memory stores, which each lane's arrival on the stage's
// "full" barrier releases. (Copying ahead across units, so a unit's first chunk is in
// flight before it begins, was slower: docs/bench/kernels.md.)
template <typename K, uint32_t BN>
__device__ __forceinline__ void load_scale_chunks(uint8_t *ring, Barriers &bars, const ScaleSource &s,
                                                  uint32_t &stage, uint32_t &phase) {
  using R = Ring<K, BN>;
  const uint32_t lane = threadIdx.x % 32, chunks = s.kblocks / 4;
  auto issue = [&](uint32_t c) {
    if (c < chunks) {
      ScaleChunk<K::BM, BN> &dst = R::chunk(ring, c % 2);
      // Not unrolled: the rows' addresses are remade per chunk, not held in the warp's 40
      // registers (unrolled, ptxas kept them and spilled).
#pragma unroll 1
      for (uint32_t i = 0; i < K::BM / 32; i++) {
        cp_async_16(dst.a[lane + 32 * i], s.sa + (size_t)min(s.m0 + lane + 32 * i, s.m - 1) * s.kblocks + 4 * c);
      }
      if (lane == 0 && s.sb != nullptr) cp_async_16(dst.b, s.sb + 4 * c);
      if constexpr (ScaleChunk<K::BM, BN>::kNext) {
        if (lane == 1 && s.sb != nullptr) cp_async_16(dst.b + 4, s.sb + s.sb_next + 4 * c);
      }
    }
    cp_async_commit();  // empty past the unit's last chunk: every chunk is one group
  };
  issue(0);
  issue(1);
  for (uint32_t c = 0; c < chunks; c++) {
    cp_async_wait<1>();  // this lane's copies of chunk c have landed
    __syncwarp();        // and every lane's
    const ScaleChunk<K::BM, BN> &src = R::chunk(ring, c % 2);
#pragma unroll
    for (uint32_t j = 0; j < 4; j++) {
      mbar_wait(&bars.empty[stage], phase ^ 1);
      StageScales<K::BM> &dst = R::scales(ring, stage);
#pragma unroll
      for (uint32_t i = 0; i < K::BM / 32; i++) dst.a[lane + 32 * i] = src.a[lane + 32 * i][j];
      if (lane == 0) dst.b = src.b[j];
      if constexpr (ScaleChunk<K::BM, BN>::kNext) {
        if (lane == 1) dst.b_next = src.b[4 + j];
      }
      mbar_arrive(&bars.full[stage]);
      if (++stage == R::kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
    __syncwarp();  // every lane has read chunk c
    issue(c + 2);
  }
}

// The producer warpgroup's second warp: for every stage the TMA thread fills, the A scales
// of the tile's BM rows (rows past m clamped to m - 1: their results are never stored) and
// B's 128×128 block scale, by cp.async; each lane's arrival on the stage's "full" barrier
// comes when its copies have landed. Consumers read them from shared memory, so no global
// load latency or scale register sits in their K loop.
template <typename K, uint32_t BN>
__device__ __forceinline__ void load_scales(const BatchView &v, uint8_t *ring, Barriers &bars) {
  using R = Ring<K, BN>;
  const uint32_t lane = threadIdx.x % 32;
  uint32_t stage = 0, phase = 0, loads = 0;
  for (uint32_t t = first_unit<K>(); t < v.total_tiles; t += unit_step<K>()) {
    const TileRef tr = locate_unit<K, BN>(v, t);
    const gemmd_group_params_t &g = v.table[tr.group];
    const uint32_t kblocks = gemmd_ceil_div(g.k, BK);
    const KRange kr = k_range<K>(tr, kblocks);
    const float *sa = v.sa_arena + g.sa_offset;
    if constexpr (kScaleChunkBytes<K, BN> != 0) {
      const ScaleSource s = scale_source<K, BN>(v, tr, g);
      if (s.chunked) {
        load_scale_chunks<K, BN>(ring, bars, s, stage, phase);
        continue;
      }
    }
    uint32_t row_off[K::BM / 32];
#pragma unroll
    for (uint32_t i = 0; i < K::BM / 32; i++) row_off[i] = min(tr.m0 + lane + 32 * i, g.m - 1) * kblocks;
    const float *sb = g.b_layout == GEMMD_SCALE_BLOCK_128X128
                          ? reinterpret_cast<const float *>(g.b_scales) + (size_t)(tr.n0 / 128) * kblocks
                          : nullptr;
    const uint32_t sb_next = next_scale_row<BN>(tr, g, kblocks);
    for (uint32_t kb = kr.kb0; kb < kr.kb1; kb++) {
      mbar_wait(&bars.empty[stage], phase ^ 1);
      StageScales<K::BM> &dst = R::scales(ring, stage);
#pragma unroll
      for (uint32_t i = 0; i < K::BM / 32; i++) cp_async_4(&dst.a[lane + 32 * i], sa + row_off[i] + kb);
      if (lane == 0 && sb != nullptr) cp_async_4(&dst.b, sb + kb);
      if (128 % BN != 0 && lane == 1 && sb != nullptr) cp_async_4(&dst.b_next, sb + sb_next + kb);
      cp_async_arrive(&bars.full[stage]);
      if (kStamps && lane == 0 && loads == 0) stamp(kStampFirstScales);
      loads++;
      if (++stage == R::kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
}

// ---- Consumers: WGMMAs and promotion -------------------------------------------------------

// Issues the 4 WGMMAs of one 128-byte K block as one commit group, operands given by their
// descriptors' address fields (a_lo, b_lo; each WGMMA's 32 bytes of K are 2 further on,
// inside the swizzle atom); d is written when that group has completed.
template <uint32_t BN, bool kAE5M2, bool kBE5M2>
__device__ __forceinline__ void issue_block(float (&d)[BN / 2], uint32_t a_lo, uint32_t b_lo) {
  __syncwarp();  // .aligned: the warp arrives together after its barrier wait
  wgmma_fence();
#pragma unroll
  for (uint32_t kk = 0; kk < BK / 32; kk++) {
    WgmmaM64K32<BN, kAE5M2, kBE5M2>::run(d, desc_of_lo(a_lo + kk * 2), desc_of_lo(b_lo + kk * 2), kk > 0 ? 1u : 0u);
  }
  wgmma_commit();
}

// The address fields of a stage's operands for issue_block, from the stage's own field
// `lo`: A from row `a_row` of the stage's tile, and B.
template <typename K>
__device__ __forceinline__ void operands_at(uint32_t lo, uint32_t a_row, uint32_t &a_lo, uint32_t &b_lo) {
  a_lo = lo + a_row * (BK / 16);
  b_lo = lo + K::kStageA / 16;
}

// The same for stage `stage` of the ring.
template <typename K, uint32_t BN>
__device__ __forceinline__ void stage_operands(uint8_t *ring, uint32_t stage, uint32_t a_row, uint32_t &a_lo,
                                               uint32_t &b_lo) {
  operands_at<K>(desc_lo(ring) + stage * (Ring<K, BN>::kStageBytes / 16), a_row, a_lo, b_lo);
}

// As promote, for a tile whose column groups j >= jb (8 columns each) take B's next scale:
// s0n, s1n instead of s0, s1.
template <uint32_t R>
__device__ __forceinline__ void promote_cross(float (&total)[R], const float (&blk)[R], float s0, float s1, float s0n,
                                              float s1n, uint32_t jb) {
#pragma unroll
  for (uint32_t j = 0; j < R / 4; j++) {
    const float a = j < jb ? s0 : s0n, b = j < jb ? s1 : s1n;
    total[j * 4 + 0] += blk[j * 4 + 0] * a;
    total[j * 4 + 1] += blk[j * 4 + 1] * a;
    total[j * 4 + 2] += blk[j * 4 + 2] * b;
    total[j * 4 + 3] += blk[j * 4 + 3] * b;
  }
}

// total += blk · scale: accumulator element j*4 + {0,1} is row r (scale s0), {2,3} row r + 8
// (s1).
template <uint32_t R>
__device__ __forceinline__ void promote(float (&total)[R], const float (&blk)[R], float s0, float s1) {
#pragma unroll
  for (uint32_t j = 0; j < R / 4; j++) {
    total[j * 4 + 0] += blk[j * 4 + 0] * s0;
    total[j * 4 + 1] += blk[j * 4 + 1] * s0;
    total[j * 4 + 2] += blk[j * 4 + 2] * s1;
    total[j * 4 + 3] += blk[j * 4 + 3] * s1;
  }
}

// One K block: wait for its stage, issue its WGMMAs into `blk` and read its scales (row
// `r` of the tile and r + 8; B's block scale if `b_block`) while they run, wait for them,
// release the stage and promote: total += blk · sa · sb. One block in flight per consumer
// warpgroup: while one promotes, the other's WGMMAs keep the tensor cores busy. (Two
// blocks in flight, promoting the last while the next runs, needs a third accumulator
// array; it was slower nearly everywhere: docs/bench/kernels.md.)
// `jb`: where the tile's columns cross into B's next 128 (in groups of 8; only for widths
// that do not divide 128).
template <typename K, uint32_t BN, bool kAE5M2, bool kBE5M2>
__device__ __forceinline__ void k_block(float (&total)[BN / 2], float (&blk)[BN / 2], uint32_t &stage, uint32_t &phase,
                                        uint8_t *ring, Barriers &bars, uint32_t wg, uint32_t r, bool b_block,
                                        uint32_t jb) {
  using R = Ring<K, BN>;
  if (kStamps) wg_stamp(wg, stage + R::kStages * phase, 0, 2);
  mbar_wait(&bars.full[stage], phase);
  uint32_t a_lo, b_lo;
  stage_operands<K, BN>(ring, stage, wg * 64, a_lo, b_lo);
  if (kStamps) wg_stamp(wg, stage + R::kStages * phase, 0, 0);
  issue_block<BN, kAE5M2, kBE5M2>(blk, a_lo, b_lo);
  const StageScales<K::BM> &sc = R::scales(ring, stage);
  const float sb = b_block ? ld_shared_f32(&sc.b) : 1.0f;
  const float sa0 = ld_shared_f32(&sc.a[r]), sa1 = ld_shared_f32(&sc.a[r + 8]);
  const float s0 = sa0 * sb, s1 = sa1 * sb;
  if constexpr (128 % BN != 0) {
    const float sbn = b_block ? ld_shared_f32(&sc.b_next) : 1.0f;
    wgmma_wait<0>();
    release_stage_of<K>(&bars.empty[stage]);
    promote_cross(total, blk, s0, s1, sa0 * sbn, sa1 * sbn, jb);
  } else {
    wgmma_wait<0>();
    if (kStamps) wg_stamp(wg, stage + R::kStages * phase, 0, 1);
    release_stage_of<K>(&bars.empty[stage]);
    promote(total, blk, s0, s1);
  }
  if (++stage == R::kStages) {
    stage = 0;
    phase ^= 1;
  }
}

// What a warpgroup of a 256-row tile carries from one K block to the next: the next block
// is set up in the shadow of this block's last WGMMAs.
struct Shadow {
  uint32_t full0;  // shared address of bars.full[0]
  uint32_t lo0;    // the ring's descriptor field (stage 0)
  uint32_t lo;     // the stage's
  bool ready;      // the stage's full barrier was seen complete (no wait needed)
};

// One K block of a warpgroup with several 64-row halves: each half's WGMMAs go into the
// one block accumulator `blk` and are promoted into that half's part of `total` before the
// next half is issued; the stage is released after the last half. The next block's stage,
// phase and descriptor field are set while the last half's WGMMAs run, and sh.ready says
// whether its full barrier had completed then (`next`: the unit has a next block; if not,
// the next tile's first block waits), so after the last half's promotion the next block's
// WGMMAs issue at once when its data has landed (every 256-row case ~2% faster than
// setting it up after the promotion).
template <typename K, uint32_t BN, bool kAE5M2, bool kBE5M2>
__device__ __forceinline__ void k_block_halves(float (&total)[K::kHalves * BN / 2], float (&blk)[BN / 2],
                                               uint32_t &stage, uint32_t &phase, uint8_t *ring, Barriers &bars,
                                               uint32_t wg, uint32_t r, bool b_block, Shadow &sh, bool next,
                                               [[maybe_unused]] uint32_t jb) {
  using R = Ring<K, BN>;
  static_assert(128 % BN == 0 || BN == 96, "256-row tiles have widths that divide 128, or 96");
  const uint32_t this_stage = stage, this_block = stage + R::kStages * phase;
  if (kStamps) wg_stamp(wg, this_block, 0, 2);
  if (!sh.ready) mbar_wait(&bars.full[stage], phase);
  const StageScales<K::BM> &sc = R::scales(ring, stage);
  const float sb = b_block ? ld_shared_f32(&sc.b) : 1.0f;
  [[maybe_unused]] float sbn = 1.0f;  // B's next row of scales (widths that do not divide 128)
  if constexpr (128 % BN != 0) sbn = b_block ? ld_shared_f32(&sc.b_next) : 1.0f;
#pragma unroll
  for (uint32_t h = 0; h < K::kHalves; h++) {
    uint32_t a_lo, b_lo;
    operands_at<K>(sh.lo, wg * K::kWgRows + h * 64, a_lo, b_lo);
    if (kStamps) wg_stamp(wg, this_block, h, 0);
    issue_block<BN, kAE5M2, kBE5M2>(blk, a_lo, b_lo);
    const float sa0 = ld_shared_f32(&sc.a[r + h * 64]), sa1 = ld_shared_f32(&sc.a[r + h * 64 + 8]);
    const float s0 = sa0 * sb, s1 = sa1 * sb;
    if (h + 1 == K::kHalves) {
      // In the shadow of the last half's WGMMAs: the next block's stage, phase and
      // descriptor field, and whether its data has landed. The asm keeps them here.
      uint32_t next_stage = stage + 1, next_phase = phase, next_lo = sh.lo + R::kStageBytes / 16;
      if (next_stage == R::kStages) {
        next_stage = 0;
        next_phase ^= 1;
        next_lo = sh.lo0;
      }
      asm volatile("" : "+r"(next_stage), "+r"(next_phase), "+r"(next_lo));
      sh.ready = next && mbar_test_wait_at(sh.full0 + next_stage * 8, next_phase);
      stage = next_stage;
      phase = next_phase;
      sh.lo = next_lo;
    }
    wgmma_wait<0>();
    if (kStamps) wg_stamp(wg, this_block, h, 1);
    if (h + 1 == K::kHalves) release_stage_of<K>(&bars.empty[this_stage]);
    if (kStamps && h + 1 == K::kHalves) wg_stamp(wg, this_block, 1, 2);
    if constexpr (128 % BN != 0) {
      promote_cross(*reinterpret_cast<float(*)[BN / 2]>(&total[h * (BN / 2)]), blk, s0, s1, sa0 * sbn, sa1 * sbn, jb);
    } else {
      promote(*reinterpret_cast<float(*)[BN / 2]>(&total[h * (BN / 2)]), blk, s0, s1);
    }
  }
}

// A unit's K blocks for a warpgroup none of whose rows are the group's: only keeps the ring
// turning (each stage waited for and released).
template <typename K, uint32_t BN>
__device__ __forceinline__ void skip_k_blocks(const KRange &kr, Barriers &bars, uint32_t &stage, uint32_t &phase) {
  using R = Ring<K, BN>;
  for (uint32_t kb = kr.kb0; kb < kr.kb1; kb++) {
    mbar_wait(&bars.full[stage], phase);
    release_stage_of<K>(&bars.empty[stage]);
    if (++stage == R::kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
}

}  // namespace gemmd::wgmma

#endif  // GEMMD_KERNELS_WGMMA_MAINLOOP_CUH_
