// The Hopper grouped FP8 GEMM (issue 6): TMA loads into a shared-memory ring guarded by
// mbarriers, one producer warp and two consumer warpgroups (setmaxnreg), WGMMA
// m64nNk32 with FP32 promotion every 128 of K, a persistent grid over every group of the
// device-resident batch (group_table.h) that gpu_gemm.cu routes here (all but FP32
// outputs).
//
// Per output tile of BM × tile_n (group g, rows m0.., columns n0..; BM 128 or 256 by the
// batch's kind of tile, tile_n the batch's: 16..128, or 96 or 192 for ROWS128_WIDE, or 96 for
// ROWS256):
//   producer warpgroup, thread 0: for each 128-wide K block, wait for the stage to be
//     empty, arm its "full" barrier with the bytes to come, and issue two TMA loads: A rows
//     m0.. (BM, or fewer for a small group: a_box_rows) and B rows n0..n0+tile_n-1, 128
//     bytes of K each, 128-byte swizzled. TMA fills rows past m or n and bytes past k with
//     zeros.
//   producer warpgroup, warp 1: the same stages' scales (A's for the tile's BM rows, B's
//     128×128 block) by cp.async into the stage's StageScales; its 32 lanes are the other
//     arrivals the "full" barrier waits for.
//   consumers (warpgroups 1 and 2, rows +0 and +BM/2), one K block at a time: wait "full",
//     issue the block's four WGMMAs (K = 32 each) into the block accumulator, read its
//     scales from shared memory while they run, wait for them, release the stage ("empty",
//     one arrive per warp) and promote: total += block · sa(row, kb) · sb(n-block, kb)
//     (128×128 B scales; 1 otherwise). While one warpgroup promotes, the other's WGMMAs
//     keep the tensor cores busy. With 256-row tiles each warpgroup does this for its two
//     64-row halves in turn.
//   epilogue: B's per-row or per-tensor scale, rounding to BF16/FP16, the warpgroup's rows
//     staged in shared memory and written out in 16-byte pieces, or by TMA tensor stores
//     (the TMA-store kind); direct stores from registers for FP32 outputs or rows that are
//     not 16-byte aligned.
//
// The host side (gemmd_gpu_gemm_prepare) picks the kind and tile_n and writes, into the
// batch before its upload, three tensor maps per group (A in the batch's A arena, B
// wherever the weight lives, D for TMA stores) and the groups' tile prefix sums; the kernel
// binary-searches those to map a tile to its group (or divides, where every group has as
// many tiles). The grid (one CTA per SM) and the code
// are fixed (every tile_n, and every kind the build has, is compiled in and chosen at run
// time from the header), so a captured graph replays for any batch.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdint.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <mutex>
#include <type_traits>

#include "kernels/errors.h"
#include "kernels/gpu_gemm.h"
#include "kernels/gpu_gemm_device.cuh"
#include "kernels/gpu_gemm_kernels.h"
#include "kernels/sm90_wgmma_ops.cuh"
#include "kernels/tmap_cache.h"

// Timing probes (kernels:gemm_bench_probe{1..6}, docs/bench/kernels.md), to place the time
// of one K block without hardware counters. Their results are wrong by design:
//   1: B is loaded only in a tile's first K block (half the bytes from L2 at width 128);
//   2: no WGMMAs (the ring's load rate alone);
//   3: nothing is loaded after the ring's first pass (the consumers' rate alone);
//   4: as 3, and no promotion (the WGMMAs' rate alone; one register is promoted);
//   5: no output stores (what the epilogue's stores cost per tile);
//   6: as 4, plus as many FFMAs as the promotion on registers no WGMMA writes;
//   7: A's scales are copied only in a tile's first K block (what their per-block copies
//      cost: a 4-byte cp.async per row, a quarter of the LSU's shared wavefronts at
//      4096x7168x16384 in session 13's ncu source counters; built with scales per block).
//   8: 256-row tiles skip the promotion of each K block's last half (one register kept);
//   9: 256-row tiles skip the promotion of each K block's first half: beside 8, whether a
//      promotion costs more where it stands between two K blocks (session 15). Both keep
//      gemmd's scale chunks.
//  12: staged tiles of 128 columns or fewer are staged in shared memory and read back, but
//      not stored (beside 5, which skips the whole epilogue: the global stores' share;
//      session 18).
// (Probe 10, two accumulators per 256-row warpgroup, measured in session 15, is kept as
// adab552:docs/bench/raw/2026-12-02-s15-probe10.patch; probe 11, each CTA's stores into its own
// window of D, measured in session 18, as docs/bench/raw/2026-12-02-s18-epionce-probe11.patch.)
#ifndef GEMMD_WGMMA_PROBE
#define GEMMD_WGMMA_PROBE 0
#endif
// The kinds of tile compiled in, as a mask of 1 << gemmd_tile_kind_t: each kind is its own
// kernel (all three in one kernel made ROWS128 itself 2–3 µs slower at short K and small M:
// code size; docs/bench/kernels.md, session 5). gemmd's build has all five; the probes
// ROWS128 alone unless they say otherwise; a kind not built is GEMMD_ENOTSUP when forced,
// and where the rule picks it the batch gets the first kind built.
#ifndef GEMMD_WGMMA_KINDS
#define GEMMD_WGMMA_KINDS (GEMMD_WGMMA_PROBE != 0 ? 1u : 31u)
#endif
#define GEMMD_WGMMA_BUILT(kind) ((GEMMD_WGMMA_KINDS >> (kind)) & 1u)
// v21, `early` (GEMMD_WGMMA_EARLY, 1 unless built with 0): a launch's first loads wait
// for fewer dependent global reads. The stamps probe (session 14) put a small-M launch's
// first stage at ~4.5 us after the CTA starts: the header (~0.5), the tile prefix sums'
// total (~0.4), the first group's fields (~0.8), then the TMA unit's fetch of the maps and
// the data (~2.3). Here the group's fields are prefetched into L2 with the header, a
// one-group batch takes its tile count from the header (group_tiles_of: no prefix-sum
// read), and the TMA thread prefetches a one-group batch's two maps before it locates its
// first unit: M <= 128 1-3% faster. (Session 14's first form acquired and prefetched the
// maps in the prologue, before the CTA's barrier, with the tile count a plain select:
// 1.06-1.28x the time everywhere, 4096x32768x512 too.)
#ifndef GEMMD_WGMMA_EARLY
#define GEMMD_WGMMA_EARLY 1
#endif
// v27, `prologue` (GEMMD_WGMMA_PROLOGUE, 1 unless built with 0): in the kernels of one
// kind (not the joint kernel), the batch header's read overlaps the CTA's setup (barrier
// init and the CTA's barrier come first, the header's fields are used after them), and the
// first group's tensor maps are prefetched into L2 at the kernel's entry, where a batch of
// one group keeps them (its scheduling area at byte kPrologueMaps: the header, its row and
// up to two quantization jobs take less, rounded up to 256 by gemmd's engine and
// gemm_bench), so the TMA unit's fetch of the maps is an L2 hit. Small M: the first stage
// lands ~0.3 us sooner (median of the stamps: 4.46 us, session 20's v26 4.77), M <= 128
// 0.94-1.02x the time, mostly 0.97-0.99x (six runs in three calls, both orders; decode
// 0.99-1.00x). Prefetching the group's table row into L1 too (prologue2) made them up to
// 14% slower, and locating a one-group batch's units from m and k read at entry
// (prologue3) up to 10% slower at K <= 2048 (session 21;
// adab552:docs/bench/raw/2026-12-02-s21-r256w88-prologue2.patch, -prologue3.patch).
#ifndef GEMMD_WGMMA_PROLOGUE
#define GEMMD_WGMMA_PROLOGUE 1
#endif
// Probe `stamps` (GEMMD_WGMMA_STAMPS=1; gemmd's build otherwise, results right): each CTA
// writes the global timer (ns) and its SM's clock at each point of a launch in StampPoint
// (kStampPoints), which gemm_bench --stamps reads back (gemmd_gpu_gemm_stamps): where the
// fixed cost of a short launch goes (the batch header, the CTA's setup, the table, the
// first loads, the first tile, the last).
#ifndef GEMMD_WGMMA_STAMPS
#define GEMMD_WGMMA_STAMPS 0
#endif
// v22, `shadow` (GEMMD_WGMMA_SHADOW, 1 unless built with 0): in 256-row tiles the next K
// block's work that does not need this block's accumulators (its stage, phase and
// descriptor field, and a non-blocking test of its full barrier) is done while this
// block's last WGMMAs run, between their issue and the wait for them, so after the last
// half's promotion the next block's WGMMAs issue at once when its data has landed. Session
// 15's timeline had a warpgroup take ~560 clk from its last half's completion to the next
// block's issue (~200 between halves); shadow made every 256-row case ~2% faster.
#ifndef GEMMD_WGMMA_SHADOW
#define GEMMD_WGMMA_SHADOW 1
#endif
// v23, `r256w96` (GEMMD_WGMMA_ROWS256_96; 1 in gemmd's build, 0 in the probes'): 256-row
// tiles of 96 columns too (paired, as every 256-row tile), a tile's columns past a row of
// B's 128×128 scales promoted with the next row's scale as ROWS128_WIDE does; the rule
// gives them the batches it gave ROWS128_WIDE's 192 columns (the same tile area:
// 4096x2112x7168 is 352 tiles either way, but 256-row pairs bring 28 KB per SM and K block
// from L2 where 128 x 192 tiles bring 40). 4096x2112x7168 0.95-0.96x the time (session 16);
// the joint kernel grew from 54,000 to 73,288 instructions, its other widths as fast.
#ifndef GEMMD_WGMMA_ROWS256_96
#define GEMMD_WGMMA_ROWS256_96 (GEMMD_WGMMA_PROBE == 0 ? 1 : 0)
#endif
// ROWS256 batches run in wgmma_gemm_kernel_joint (every unsplit kind's code in one kernel,
// faster for ROWS256: see there) in builds with every kind, as paired tiles (v19): in 2-CTA
// clusters, the two CTAs on adjacent column tiles of the same 256 rows, each loading half
// of A's rows multicast into both (a third fewer L2 -> SM bytes per K block at width 128:
// 2-4% off the long-K M >= 4096 cases; docs/bench/kernels.md, session 12). Probe builds of
// fewer kinds run ROWS256 unpaired in a kernel of its own.
#ifndef GEMMD_WGMMA_JOINT_ROWS256
#if (GEMMD_WGMMA_KINDS & 15u) == 15u
#define GEMMD_WGMMA_JOINT_ROWS256 1
#else
#define GEMMD_WGMMA_JOINT_ROWS256 0
#endif
#endif
// The kind a batch gets when the rule's kind is not built: the first that is.
#define GEMMD_WGMMA_FALLBACK_KIND                                                 \
  (GEMMD_WGMMA_BUILT(GEMMD_TILE_ROWS128)             ? GEMMD_TILE_ROWS128           \
   : GEMMD_WGMMA_BUILT(GEMMD_TILE_ROWS128_TMA_STORE) ? GEMMD_TILE_ROWS128_TMA_STORE \
   : GEMMD_WGMMA_BUILT(GEMMD_TILE_ROWS256)           ? GEMMD_TILE_ROWS256           \
                                                     : GEMMD_TILE_ROWS128_SPLIT)

namespace {

// Tile kinds (gemmd_tile_kind_t, group_table.h), chosen per batch on the host with the
// tile width (gemmd_batch_header_t.tile_kind and .tile_n), each its own kernel (every width
// compiled in; a kernel launched on a batch of another kind does nothing), so a graph
// captured per kind replays for any batch of that kind:
//   ROWS128: BM = 128 (two consumer warpgroups × 64 rows); the epilogue stages the tile in
//     shared memory and writes 16-byte pieces;
//   ROWS128_TMA_STORE: the same tile; the staged tile leaves by TMA tensor stores (a
//     third tensor map per group, for D), which the warpgroup does not wait for;
//   ROWS256: BM = 256, each consumer warpgroup 128 rows in two 64-row halves that share
//     one block accumulator (B read once per 256 rows: fewer bytes per FLOP); in 2-CTA
//     clusters whose CTAs take adjacent column tiles and share A's rows by multicast
//     (GEMMD_WGMMA_JOINT_ROWS256: the host counts the tiles of a pair's width); 16..128
//     columns, and 96 (v23: promoted across B's scale rows as ROWS128_WIDE's);
//   ROWS128_SPLIT: ROWS128 tiles whose K is cut into header.k_splits parts (split-K), each
//     part a unit of the persistent grid; each part's FP32 sums go to a workspace and the
//     last part of a tile to arrive adds them all (in part order) and writes the tile;
//   ROWS128_WIDE: ROWS128 tiles of 96 or 192 columns, widths that do not divide 128 (a
//     tile's columns may cross into the next row of B's 128×128 scales: those columns are
//     promoted with that row's scale). A kernel of their own: compiled into ROWS128's they
//     more than doubled its code, and ROWS128 got up to 7% slower at K = 512 (session 10).
// tile_n (16..128 columns; 96 or 192 for ROWS128_WIDE) gives the persistent grid tiles for
// every SM even when N is small (decode). The ring's stage count follows from the stage
// size.
constexpr uint32_t BK = 128;  // bytes of K per stage = one scale block = the swizzle width
constexpr uint32_t kConsumers = 2;
constexpr uint32_t kThreads = 128 * (1 + kConsumers);
constexpr uint32_t kRingBytes = 227 * 1024 - 2048;  // dynamic shared memory for the ring
constexpr uint32_t kMaxStages = 16;
// prologue: where a one-group batch has its tensor maps (its scheduling area's start).
[[maybe_unused]] constexpr uint32_t kPrologueMaps = 256;

template <uint32_t kKind, uint32_t kRows, bool kTmaStoreOut, bool kSplitK = false>
struct Kind {
  static constexpr uint32_t kId = kKind;  // gemmd_tile_kind_t
  static constexpr uint32_t BM = kRows;
  static constexpr bool kTmaStore = kTmaStoreOut;
  static constexpr bool kSplit = kSplitK;
  static constexpr uint32_t kWgRows = BM / kConsumers;  // a consumer warpgroup's rows of the tile
  static constexpr uint32_t kHalves = kWgRows / 64;     // its 64-row WGMMA passes per K block
  static constexpr uint32_t kStageA = BM * BK;
  // Tiles in 2-CTA cluster pairs sharing A's rows (the joint kernel's ROWS256).
  static constexpr bool kPair = GEMMD_WGMMA_JOINT_ROWS256 && kKind == GEMMD_TILE_ROWS256;
  static_assert(!(kTmaStore && kHalves > 1), "TMA stores are built for 64-row warpgroups");
  static_assert(!(kSplit && (kTmaStore || kHalves > 1)), "split-K is built for ROWS128");
};
using KindRows128 = Kind<GEMMD_TILE_ROWS128, 128, false>;
using KindRows128TmaStore = Kind<GEMMD_TILE_ROWS128_TMA_STORE, 128, true>;
using KindRows256 = Kind<GEMMD_TILE_ROWS256, 256, false>;
using KindRows128Split = Kind<GEMMD_TILE_ROWS128_SPLIT, 128, false, true>;
using KindRows128Wide = Kind<GEMMD_TILE_ROWS128_WIDE, 128, false>;

// A stage's scales, copied in by the producer warpgroup's second warp (cp.async): A's for
// the tile's BM rows at the stage's K block, and B's 128×128 block scale (b_next: the next
// row of them, for tiles whose columns cross into it).
template <uint32_t BM>
struct StageScales {
  float a[BM];
  float b;
  float b_next;
  float pad[2];
};

// Scales in chunks (v20, GEMMD_WGMMA_SCALE_CHUNKS, 256-row tiles with K >= 4096): the
// scale warp copies A's and B's scales four K blocks at a time, 16 bytes per row (one
// cp.async per lane and 32 rows), into one of two chunks in shared memory, and fills each
// stage's scales from there; per K block it copied 4 bytes per row, a quarter of the LSU's
// shared-memory wavefronts at 4096x7168x16384 (ncu source counters): 3-5% off the long-K
// cases (docs/bench/kernels.md, session 13). Groups whose scales cannot or should not come
// in chunks (scale_source) keep the per-block copies, as do the probe builds but 8, 9 and
// 12.
#ifndef GEMMD_WGMMA_SCALE_CHUNKS
#define GEMMD_WGMMA_SCALE_CHUNKS \
  (GEMMD_WGMMA_PROBE == 0 || GEMMD_WGMMA_PROBE == 8 || GEMMD_WGMMA_PROBE == 9 || GEMMD_WGMMA_PROBE == 12 ? 1 : 0)
#endif
// Widths that do not divide 128 also take the next row of B's block scales (b[4..7]).
template <uint32_t BM, uint32_t BN>
struct ScaleChunk {
  static constexpr bool kNext = 128 % BN != 0;
  float a[BM][4];
  float b[kNext ? 8 : 4];
};
template <typename K, uint32_t BN>
constexpr uint32_t kScaleChunkBytes =
    GEMMD_WGMMA_SCALE_CHUNKS && K::BM == 256 ? 2 * sizeof(ScaleChunk<K::BM, BN>) : 0;

// The TMA-store epilogue's staging, per consumer warpgroup: BN / kCols boxes of 64 rows ×
// kCols 2-byte values, dense and swizzled as D's tensor map reads them.
template <uint32_t BN>
struct TmaBoxes {
  static constexpr uint32_t kCols = BN < 64 ? BN : 64;
  static constexpr uint32_t kBytes = 64 * kCols * 2;
  static constexpr uint32_t kWgBytes = 64 * BN * 2;
};

template <typename K, uint32_t BN>
struct Ring {
  static constexpr uint32_t kStageBytes = K::kStageA + BN * BK;
  static constexpr uint32_t kPerStage = kStageBytes + sizeof(StageScales<K::BM>);
  // The output staging area: with TMA stores, per consumer warpgroup, 64 rows × BN 2-byte
  // values as TmaBoxes<BN> boxes (1024-aligned); otherwise the tile's BM rows of BN 2-byte
  // values, each row padded by 16 bytes where needed so a warp's pair writes (8 rows × 4
  // pairs) fall in 32 different banks (an odd number of 16-byte pieces per row).
  static constexpr uint32_t kOutPitch = BN * 2 + ((BN * 2 / 16) % 2 == 0 ? 16 : 0);
  static constexpr uint32_t kOutBytes = K::kTmaStore ? 2 * 64 * BN * 2 + 1024 : K::BM * kOutPitch;
  static constexpr uint32_t kChunkBytes = kScaleChunkBytes<K, BN>;
  static constexpr uint32_t kStages = (kRingBytes - kOutBytes - kChunkBytes) / kPerStage < kMaxStages
                                          ? (kRingBytes - kOutBytes - kChunkBytes) / kPerStage
                                          : kMaxStages;
  // The stages' tiles (1024-byte aligned), then their scales, then the scale chunks (if
  // any), then the output staging.
  __device__ static StageScales<K::BM> &scales(uint8_t *ring, uint32_t stage) {
    return reinterpret_cast<StageScales<K::BM> *>(ring + kStages * kStageBytes)[stage];
  }
  __device__ static ScaleChunk<K::BM, BN> &chunk(uint8_t *ring, uint32_t i) {
    return reinterpret_cast<ScaleChunk<K::BM, BN> *>(ring + kStages * kStageBytes +
                                                 kStages * sizeof(StageScales<K::BM>))[i];
  }
  __device__ static uint8_t *out_staging(uint8_t *ring) {
    const uint32_t at = kStages * kStageBytes + kStages * sizeof(StageScales<K::BM>) + kChunkBytes;
    return ring + (K::kTmaStore ? (at + 1023) / 1024 * 1024 : at);
  }
  static_assert(kStages >= 2 && kStages * kPerStage + kOutBytes + kChunkBytes <= kRingBytes, "the ring fits");
  static_assert(sizeof(StageScales<K::BM>) % 16 == 0 && sizeof(ScaleChunk<K::BM, BN>) % 16 == 0,
                "the chunks and the output staging stay 16-byte aligned");
  static_assert(kStageBytes % 1024 == 0, "128B-swizzled tiles are 1024-byte aligned");
  // n0 is a multiple of BN: a tile's columns cross at most one row boundary of B's scales.
  static_assert(BN % 8 == 0 && (128 % BN == 0 || BN == 96 || BN == 192), "a width the kernel handles");
};
constexpr uint32_t kSmemBytes = kRingBytes + 1024 /* alignment */;

static_assert(BK == GEMMD_SCALE_BLOCK, "promotion once per scale block");
static_assert(GEMMD_GPU_TMAP_BYTES == 128, "a CUtensorMap is 128 bytes");
// Tensor maps per group in the batch's scheduling area: A, B, and D (written only for the
// TMA-store kind).
constexpr uint32_t kMapsPerGroup = 3;

// Rows of A one TMA box brings for tiles of bm rows: all bm for big groups; for a small
// group only its rows rounded up to 8 (one swizzle atom), so a decode batch does not
// stream zeros into shared memory. Rows of the tile past the box hold stale bytes: they
// feed only accumulator rows past m, which are never stored. The host encodes A's map
// with the same box.
__host__ __device__ __forceinline__ uint32_t a_box_rows(uint32_t m, uint32_t bm) {
  return m >= bm ? bm : (m + 7) / 8 * 8;
}

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

[[maybe_unused]] __device__ __forceinline__ uint4 ld_shared_v4(const void *p) {
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

// stamps: the points a CTA stamps (thread 0 / the TMA thread / consumer warpgroup 0's
// thread 0), in gemm_bench --stamps' order.
enum StampPoint : uint32_t {
  kStampEntry,       // thread 0 at the kernel's start
  kStampHeader,      // thread 0: the batch header's kind read
  kStampSched,       // thread 0: the group tile count known (v21: from the header for one
                     // group, else the prefix sums' total read from the scheduling area)
  kStampSynced,      // TMA thread: past the CTA's barrier setup, __syncthreads and setmaxnreg
  kStampPrefetched,  // TMA thread: then a one-group batch's two maps' prefetches issued (early)
  kStampUnit,        // TMA thread: its first unit's group and tile known (locate)
  kStampAcquired,    // TMA thread: then its two maps' acquire fences passed
  kStampLocated,     // TMA thread: then the group's fields read (K, rows: the load's bytes)
  kStampFirstLoads,  // TMA thread: the first stage's loads issued
  kStampFirstScales, // scale warp, lane 0: the first stage's scale copies issued
  kStampFirstFull,   // consumer 0: the first stage has landed
  kStampFirstTile,   // consumer 0: its first unit written out
  kStampLastTile,    // consumer 0: its last unit written out
  kStampPoints
};
// Their names, in StampPoint's order (gemmd_gpu_gemm_stamp_name: gemm_bench's labels).
constexpr const char *kStampNames[] = {"entry",   "header", "sched",      "synced",     "prefetched", "unit",    "acquired",
                                       "located", "loads",  "scales", "first_full", "first_tile", "last_tile"};
static_assert(sizeof kStampNames / sizeof kStampNames[0] == kStampPoints, "a name per stamp point");
constexpr uint32_t kStampCtas = 256;
#if GEMMD_WGMMA_STAMPS
__device__ unsigned long long g_stamps[kStampCtas][kStampPoints][2];
#endif
// stamps: per CTA, consumer warpgroup, K block of the ring's last round (stage + kStages ·
// phase, at most 2 · kMaxStages) and 64-row half: the SM clock when the half's WGMMAs were
// issued (0) and when they had completed (1) (the last blocks' values stay), to see whether
// the two warpgroups' WGMMAs run one after the other or together; and (2) for half 0 when
// the warpgroup began to wait for the block's full barrier, for half 1 when it had released
// the stage.
[[maybe_unused]] constexpr uint32_t kWgStampValues = 3;
#if GEMMD_WGMMA_STAMPS
__device__ unsigned long long g_wg_stamps[kStampCtas][2][2 * kMaxStages][2][kWgStampValues];
#endif
// Probe `stamps2` (GEMMD_WGMMA_STAMPS=2): the same timeline of each warpgroup's first
// 2 · kMaxStages K blocks instead (its own count of blocks begun, in shared memory, zeroed
// with the barriers' init), to see where a small-M unit's early blocks lose time.
#if GEMMD_WGMMA_STAMPS == 2
__device__ __forceinline__ uint32_t *wg_first_counts() {
  __shared__ uint32_t counts[2];
  return counts;
}
#endif
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

// ---- mbarriers -----------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// A consumer warp is done with a stage (its WGMMAs reading it have completed): one arrive
// per warp, not per thread.
__device__ __forceinline__ void release_stage(uint64_t *bar) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) {
    mbar_arrive(bar);
  }
}

[[maybe_unused]] __device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// Every thread of both CTAs of the cluster meets here (memory ordered across them).
[[maybe_unused]] __device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// An arrive on the barrier at the same shared-memory offset in the cluster's other CTA
// (release at CTA scope: with .release.cluster ptxas put MEMBAR.ALL.GPU before each one,
// 1.3-1.4x the time; the WGMMAs have finished reading the stage when the consumers arrive).
[[maybe_unused]] __device__ __forceinline__ void mbar_arrive_peer(uint64_t *bar) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(cluster_rank() ^ 1u)
      : "memory");
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

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// Whether the phase with this parity has completed, without blocking (shadow).
[[maybe_unused]] __device__ __forceinline__ bool mbar_test_wait_at(uint32_t bar, uint32_t parity) {
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
// traps, so the engine sees a device error instead of a hang. Built with
// -DGEMMD_WGMMA_DEBUG it first prints where it was stuck (a printf call serializes the
// kernel's WGMMAs, so only then).
constexpr uint64_t kHangNs = 4000000000ull;

__device__ __forceinline__ void report_hang(uint64_t *bar, uint32_t parity) {
#ifdef GEMMD_WGMMA_DEBUG
  printf("gemmd wgmma kernel: block %u thread %u stuck on mbarrier at smem 0x%x, parity %u\n", blockIdx.x, threadIdx.x,
         smem_addr(bar), parity);
#else
  (void)bar;
  (void)parity;
#endif
  __trap();
}

// Waits until the phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  if (mbar_try_wait(bar, parity)) return;
  const uint64_t start = global_ns();
  while (!mbar_try_wait(bar, parity)) {
    if (global_ns() - start > kHangNs) report_hang(bar, parity);
  }
}

// ---- TMA -----------------------------------------------------------------------------------

// The tensor map was written by the host into global memory (the batch upload): order
// this thread's later tensor-map reads after that write. System scope, as the CUDA
// programming guide's example for a map written with cudaMemcpy has it (v26; until v25
// .gpu, which every test also passed): no time measured either way (session 20, call 2).
__device__ __forceinline__ void tmap_acquire(const void *tmap) {
  asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;" ::"l"(tmap) : "memory");
}

// Brings the global line at `p` into L2 (a hint).
[[maybe_unused]] __device__ __forceinline__ void prefetch_l2(const void *p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// Brings a tensor map into the TMA unit's descriptor cache ahead of its first use.
[[maybe_unused]] __device__ __forceinline__ void tmap_prefetch(const void *tmap) {
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
[[maybe_unused]] __device__ __forceinline__ void tma_load_2d_multicast(void *dst, const void *tmap, uint64_t *bar, uint32_t x,
                                                      uint32_t y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
      "%3}], [%4], %5;" ::"r"(smem_addr(dst)),
      "l"(tmap), "r"(x), "r"(y), "r"(smem_addr(bar)), "h"((uint16_t)3)
      : "memory");
}

// 4 bytes from global to shared memory, asynchronously (cp.async).
__device__ __forceinline__ void cp_async_4(void *dst, const void *src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}

// 16 bytes from global to shared memory, asynchronously (cp.async, L2 only), and the
// groups that cp.async.wait_group counts.
[[maybe_unused]] __device__ __forceinline__ void cp_async_16(void *dst, const void *src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
[[maybe_unused]] __device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <uint32_t kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// One of `bar`'s expected arrivals, made when this thread's cp.asyncs so far have landed.
__device__ __forceinline__ void cp_async_arrive(uint64_t *bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// A box of D from shared memory to columns x.., rows y.. of the map's tensor (TMA; rows
// and columns past the tensor are not written). The issuing thread's stores form bulk
// groups.
[[maybe_unused]] __device__ __forceinline__ void tma_store_2d(const void *tmap, const void *src, uint32_t x, uint32_t y) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(tmap), "r"(x),
               "r"(y), "r"(smem_addr(src))
               : "memory");
}
[[maybe_unused]] __device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// This thread's bulk stores have read their shared memory (it may be overwritten).
[[maybe_unused]] __device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// This thread's bulk stores are complete (written to global memory).
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// Orders this thread's shared-memory writes before later reads by the async proxy (TMA).
[[maybe_unused]] __device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Byte offset of `off` in a box swizzled as the tensor map's SWIZZLE_{32,64,128}B for rows
// of `row_bytes` (32, 64 or 128): 16-byte chunk bits XOR the 128-byte line bits.
[[maybe_unused]] __device__ __forceinline__ uint32_t swizzled(uint32_t off, uint32_t row_bytes) {
  const uint32_t mask = row_bytes / 16 - 1;
  return off ^ (((off >> 7) & mask) << 4);
}

// ---- WGMMA ---------------------------------------------------------------------------------

// Shared-memory matrix descriptors: K-major rows of 128 bytes, 128-byte swizzle, 8-row
// groups 1024 bytes apart (SBO; the leading offset is unused for swizzled K-major), for the
// address field `lo` (bits 0-13: the shared-memory address / 16). Shared addresses are
// below 2^18, so adding (byte offset / 16) to `lo` never carries out of the field: a K
// block's descriptors are its stage's field plus constants, which ptxas keeps in uniform
// registers (v17: rebuilt from the stage's pointer in vector registers for every block,
// they cost 9–13% at M = 4096; docs/bench/kernels.md).
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

// Issues the 4 WGMMAs of one 128-byte K block as one commit group, operands given by their
// descriptors' address fields (a_lo, b_lo; each WGMMA's 32 bytes of K are 2 further on,
// inside the swizzle atom); d is written when that group has completed.
template <uint32_t BN, bool kAE5M2, bool kBE5M2>
__device__ __forceinline__ void issue_block(float (&d)[BN / 2], uint32_t a_lo, uint32_t b_lo) {
  if constexpr (GEMMD_WGMMA_PROBE == 2) return;
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

// ---- Tiles ---------------------------------------------------------------------------------

struct TileRef {
  uint32_t group, m0, n0;
  uint32_t tile;       // the output tile (the unit less its K part)
  uint32_t part;       // its K part, of `parts` (split-K; else 0 of 1)
};

// Unit t of the batch: with split-K (`parts` > 1) part t / tiles of output tile t % tiles,
// else tile t. A tile's group, rows and columns. The group: t / group_tiles where every
// group has group_tiles tiles (decode batches: no load), else a binary search over the
// prefix sums (one dependent global load per step, ~7 for 128 groups, at every tile).
// Within a group, consecutive tiles walk M first, so CTAs running together share B tiles.
template <typename K, uint32_t BN>
__device__ __forceinline__ TileRef locate(const gemmd_group_params_t *table, const uint32_t *starts, uint32_t n_groups,
                                          uint32_t group_tiles, uint32_t t, uint32_t parts = 1, uint32_t tiles = 0) {
  uint32_t part = 0;
  if (K::kSplit && parts > 1) {
    part = t / tiles;
    t -= part * tiles;
  }
  uint32_t lo = 0, local = t;
  if (group_tiles != 0) {
    lo = t / group_tiles;
    local = t - lo * group_tiles;
  } else {
    uint32_t hi = n_groups;
    while (hi - lo > 1) {
      const uint32_t mid = (lo + hi) / 2;
      if (starts[mid] <= t) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    local = t - starts[lo];
  }
  const uint32_t m_tiles = gemmd_ceil_div(table[lo].m, K::BM);
  return {lo, (local % m_tiles) * K::BM, (local / m_tiles) * BN, t, part};
}

// The K blocks [kb0, kb1) of a unit whose tile has `kblocks`: all, or its part's even share.
struct KRange {
  uint32_t kb0, kb1;
};
template <typename K>
__device__ __forceinline__ KRange k_range(const TileRef &tr, uint32_t kblocks, uint32_t parts) {
  if (K::kSplit && parts > 1) return {tr.part * kblocks / parts, (tr.part + 1) * kblocks / parts};
  return {0, kblocks};
}

struct Barriers {
  uint64_t full[kMaxStages];
  uint64_t empty[kMaxStages];
};

// What every role of the kernel reads from the batch.
struct BatchView {
  const gemmd_group_params_t *table;
  const uint32_t *starts;  // tile prefix sums, n_groups + 1, then group_tiles
  uint32_t group_tiles;    // every group's tiles where all have as many, else 0 (starts[n_groups + 1])
  const uint8_t *tmaps;    // kMapsPerGroup per group: A, B, D
  const float *sa_arena;
  uint8_t *d_arena;
  uint32_t n_groups, total_tiles;
  uint32_t parts, tiles;  // split-K: K parts per tile (1: none), output tiles (total_tiles / parts)
  float *ws;              // split-K's workspace (ROWS128_SPLIT)
};

// BatchView::group_tiles (v.tiles and v.starts set): with `early` a one-group batch's are
// the batch's, no prefix sums read (through an asm, so the compiler cannot specialize the
// kernel on the value).
__device__ __forceinline__ uint32_t group_tiles_of(const BatchView &v) {
  if (!GEMMD_WGMMA_EARLY) return v.starts[v.n_groups + 1];
  uint32_t group_tiles = v.n_groups == 1 ? v.tiles : v.starts[v.n_groups + 1];
  asm volatile("mov.u32 %0, %0;" : "+r"(group_tiles));
  return group_tiles;
}

// The units of this CTA: from first_unit, every unit_step. Paired tiles (K::kPair): a unit
// is a pair of adjacent column tiles of the same rows (the host counts the tiles of a width
// 2·BN), the cluster's; its CTA of rank r takes the pair's column tile r, or, where the
// group has no such tile, the pair's first again (both write the same values).
template <typename K>
__device__ __forceinline__ uint32_t first_unit() {
  return K::kPair ? blockIdx.x / 2 : blockIdx.x;
}
template <typename K>
__device__ __forceinline__ uint32_t unit_step() {
  return K::kPair ? gridDim.x / 2 : gridDim.x;
}
template <typename K, uint32_t BN>
__device__ __forceinline__ TileRef locate_unit(const BatchView &v, uint32_t t) {
  if constexpr (K::kPair) {
    TileRef tr = locate<K, 2 * BN>(v.table, v.starts, v.n_groups, v.group_tiles, t);
    const uint32_t n0 = tr.n0 + cluster_rank() * BN;
    if (n0 < v.table[tr.group].n) tr.n0 = n0;
    return tr;
  } else {
    return locate<K, BN>(v.table, v.starts, v.n_groups, v.group_tiles, t, v.parts, v.tiles);
  }
}

template <typename K, uint32_t BN>
__device__ __forceinline__ void produce(const BatchView &v, uint8_t *ring, Barriers &bars) {
  using R = Ring<K, BN>;
  uint32_t stage = 0, phase = 0, last_group = 0xFFFFFFFFu, loads = 0;
  if (GEMMD_WGMMA_EARLY && v.n_groups == 1) {  // early: the maps' fetch under the locating reads
    tmap_prefetch(v.tmaps);
    tmap_prefetch(v.tmaps + GEMMD_GPU_TMAP_BYTES);
  }
  if (GEMMD_WGMMA_STAMPS) stamp(kStampPrefetched);
  for (uint32_t t = first_unit<K>(); t < v.total_tiles; t += unit_step<K>()) {
    const TileRef tr = locate_unit<K, BN>(v, t);
    if (GEMMD_WGMMA_STAMPS && loads == 0) stamp(kStampUnit, tr.n0);
    const uint8_t *tm_a = v.tmaps + (size_t)tr.group * kMapsPerGroup * GEMMD_GPU_TMAP_BYTES;
    const uint8_t *tm_b = tm_a + GEMMD_GPU_TMAP_BYTES;
    if (tr.group != last_group) {
      tmap_acquire(tm_a);
      tmap_acquire(tm_b);
      last_group = tr.group;
    }
    if (GEMMD_WGMMA_STAMPS && loads == 0) stamp(kStampAcquired);
    const gemmd_group_params_t &g = v.table[tr.group];
    const uint32_t kblocks = gemmd_ceil_div(g.k, BK), bytes = (a_box_rows(g.m, K::BM) + BN) * BK;
    const KRange kr = k_range<K>(tr, kblocks, v.parts);
    if (GEMMD_WGMMA_STAMPS && loads == 0) stamp(kStampLocated, bytes);
    for (uint32_t kb = kr.kb0; kb < kr.kb1; kb++) {
      mbar_wait(&bars.empty[stage], phase ^ 1);
      uint8_t *dst = ring + stage * R::kStageBytes;
      if ((GEMMD_WGMMA_PROBE == 3 || GEMMD_WGMMA_PROBE == 4 || GEMMD_WGMMA_PROBE == 6) && loads >= R::kStages) {
        mbar_arrive(&bars.full[stage]);
      } else {
        const bool load_b = !(GEMMD_WGMMA_PROBE == 1 && kb > 0);  // probe 1: B only at first
        mbar_arrive_expect_tx(&bars.full[stage], load_b ? bytes : a_box_rows(g.m, K::BM) * BK);
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
        if (load_b) tma_load_2d(dst + K::kStageA, tm_b, &bars.full[stage], kb * BK, tr.n0);
      }
      if (GEMMD_WGMMA_STAMPS && loads == 0) stamp(kStampFirstLoads);
      loads++;
      if (++stage == R::kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
}

// Where a unit's scales are, and whether they come in chunks (GEMMD_WGMMA_SCALE_CHUNKS,
// above): K a multiple of 4·128, A's scales and the unit's row of B's 16-byte aligned, and
// at least GEMMD_WGMMA_CHUNK_MIN_KBLOCKS K blocks (K >= 4096: at K <= 2048 chunks were 1-3%
// slower; docs/bench/kernels.md, session 13).
#ifndef GEMMD_WGMMA_CHUNK_MIN_KBLOCKS
#define GEMMD_WGMMA_CHUNK_MIN_KBLOCKS 32
#endif
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
  s.chunked = kScaleChunkBytes<K, BN> != 0 && s.kblocks % 4 == 0 && s.kblocks >= GEMMD_WGMMA_CHUNK_MIN_KBLOCKS &&
              reinterpret_cast<uintptr_t>(s.sa) % 16 == 0 &&
              (s.sb == nullptr || reinterpret_cast<uintptr_t>(s.sb) % 16 == 0);
  return s;
}

// The scale warp's copies for one unit whose scales come in chunks: chunk c holds K blocks
// 4c..4c+3 of the unit's BM rows of A's scales (rows past m clamped to m - 1) and of B's
// block scales. Two chunks are in flight: chunk c + 2 is copied into c's slot once c's four
// stages are filled. Each stage's scales are then plain shared-memory stores, which each
// lane's arrival on the stage's "full" barrier releases. (Copying ahead across units, so a
// unit's first chunk is in flight before it begins, was slower: session 13's chunkstream.)
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
    const KRange kr = k_range<K>(tr, kblocks, v.parts);
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
      if ((GEMMD_WGMMA_PROBE == 3 || GEMMD_WGMMA_PROBE == 4 || GEMMD_WGMMA_PROBE == 6) && loads >= R::kStages) {
        mbar_arrive(&bars.full[stage]);
      } else {
        StageScales<K::BM> &dst = R::scales(ring, stage);
        if (!(GEMMD_WGMMA_PROBE == 7 && kb > kr.kb0)) {  // probe 7: A's only in the first block
#pragma unroll
          for (uint32_t i = 0; i < K::BM / 32; i++) cp_async_4(&dst.a[lane + 32 * i], sa + row_off[i] + kb);
        }
        if (lane == 0 && sb != nullptr) cp_async_4(&dst.b, sb + kb);
        if (128 % BN != 0 && lane == 1 && sb != nullptr) cp_async_4(&dst.b_next, sb + sb_next + kb);
        cp_async_arrive(&bars.full[stage]);
        if (GEMMD_WGMMA_STAMPS && lane == 0 && loads == 0) stamp(kStampFirstScales);
      }
      loads++;
      if (++stage == R::kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
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

template <uint32_t R>
__device__ __forceinline__ void promote(float (&total)[R], const float (&blk)[R], float s0, float s1) {
  if constexpr (GEMMD_WGMMA_PROBE != 4 && GEMMD_WGMMA_PROBE != 6) {
#pragma unroll
    for (uint32_t j = 0; j < R / 4; j++) {
      total[j * 4 + 0] += blk[j * 4 + 0] * s0;
      total[j * 4 + 1] += blk[j * 4 + 1] * s0;
      total[j * 4 + 2] += blk[j * 4 + 2] * s1;
      total[j * 4 + 3] += blk[j * 4 + 3] * s1;
    }
  } else {
    total[0] += blk[0] * s0;  // keeps the WGMMAs (ptxas drops those whose results are unused)
  }
  if constexpr (GEMMD_WGMMA_PROBE == 6) {
    // As many FFMAs as the promotion, on registers no WGMMA writes: is their cost the
    // instructions themselves or reading the accumulators the tensor cores write?
#pragma unroll
    for (uint32_t j = 0; j < R; j++) total[j] = total[j] * s0 + s1;
  }
}

// One K block: wait for its stage, issue its WGMMAs into `blk` and read its scales (row
// `r` of the tile and r + 8; B's block scale if `b_block`) while they run, wait for them,
// release the stage and promote: total += blk · sa · sb. One block in flight per consumer
// warpgroup: while one promotes, the other's WGMMAs keep the tensor cores busy. (Two
// blocks in flight, promoting the last while the next runs, needs a third accumulator
// array; it was slower nearly everywhere: v10 in docs/bench/kernels.md.)
// `jb`: where the tile's columns cross into B's next 128 (in groups of 8; only for widths
// that do not divide 128).
template <typename K, uint32_t BN, bool kAE5M2, bool kBE5M2>
__device__ __forceinline__ void k_block(float (&total)[BN / 2], float (&blk)[BN / 2], uint32_t &stage, uint32_t &phase,
                                        uint8_t *ring, Barriers &bars, uint32_t wg, uint32_t r, bool b_block,
                                        uint32_t jb) {
  using R = Ring<K, BN>;
  if (GEMMD_WGMMA_STAMPS) wg_stamp(wg, stage + R::kStages * phase, 0, 2);
  mbar_wait(&bars.full[stage], phase);
  uint32_t a_lo, b_lo;
  stage_operands<K, BN>(ring, stage, wg * 64, a_lo, b_lo);
  if (GEMMD_WGMMA_STAMPS) wg_stamp(wg, stage + R::kStages * phase, 0, 0);
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
    if (GEMMD_WGMMA_STAMPS) wg_stamp(wg, stage + R::kStages * phase, 0, 1);
    release_stage_of<K>(&bars.empty[stage]);
    promote(total, blk, s0, s1);
  }
  if (++stage == R::kStages) {
    stage = 0;
    phase ^= 1;
  }
}

// What a warpgroup carries from one K block of a 256-row tile to the next (shadow).
struct Shadow {
  uint32_t full0;  // shared address of bars.full[0]
  uint32_t lo0;    // the ring's descriptor field (stage 0)
  uint32_t lo;     // the stage's
  bool ready;      // the stage's full barrier was seen complete (no wait needed)
};

// One K block of a warpgroup with several 64-row halves: each half's WGMMAs go into the
// one block accumulator `blk` and are promoted into that half's part of `total` before the
// next half is issued; the stage is released after the last half. With shadow the next
// block's stage, phase and descriptor field are set while the last half's WGMMAs run, and
// sh.ready says whether its full barrier had completed then (`next`: the unit has a next
// block; if not, the next tile's first block waits).
template <typename K, uint32_t BN, bool kAE5M2, bool kBE5M2>
__device__ __forceinline__ void k_block_halves(float (&total)[K::kHalves * BN / 2], float (&blk)[BN / 2],
                                               uint32_t &stage, uint32_t &phase, uint8_t *ring, Barriers &bars,
                                               uint32_t wg, uint32_t r, bool b_block,
                                               [[maybe_unused]] Shadow &sh, [[maybe_unused]] bool next,
                                               [[maybe_unused]] uint32_t jb) {
  using R = Ring<K, BN>;
  static_assert(128 % BN == 0 || GEMMD_WGMMA_ROWS256_96, "256-row tiles have widths that divide 128 (r256w96: 96)");
  const uint32_t this_stage = stage, this_block = stage + R::kStages * phase;
  if (GEMMD_WGMMA_STAMPS) wg_stamp(wg, this_block, 0, 2);
  if (!GEMMD_WGMMA_SHADOW || !sh.ready) mbar_wait(&bars.full[stage], phase);
  const StageScales<K::BM> &sc = R::scales(ring, stage);
  const float sb = b_block ? ld_shared_f32(&sc.b) : 1.0f;
  [[maybe_unused]] float sbn = 1.0f;  // B's next row of scales (widths that do not divide 128)
  if constexpr (128 % BN != 0) sbn = b_block ? ld_shared_f32(&sc.b_next) : 1.0f;
#pragma unroll
  for (uint32_t h = 0; h < K::kHalves; h++) {
    uint32_t a_lo, b_lo;
    if (GEMMD_WGMMA_SHADOW) {
      operands_at<K>(sh.lo, wg * K::kWgRows + h * 64, a_lo, b_lo);
    } else {
      stage_operands<K, BN>(ring, stage, wg * K::kWgRows + h * 64, a_lo, b_lo);
    }
    if (GEMMD_WGMMA_STAMPS) wg_stamp(wg, this_block, h, 0);
    issue_block<BN, kAE5M2, kBE5M2>(blk, a_lo, b_lo);
    const float sa0 = ld_shared_f32(&sc.a[r + h * 64]), sa1 = ld_shared_f32(&sc.a[r + h * 64 + 8]);
    const float s0 = sa0 * sb, s1 = sa1 * sb;
    if (GEMMD_WGMMA_SHADOW && h + 1 == K::kHalves) {
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
    if (GEMMD_WGMMA_STAMPS) wg_stamp(wg, this_block, h, 1);
    if (h + 1 == K::kHalves) release_stage_of<K>(&bars.empty[this_stage]);
    if (GEMMD_WGMMA_STAMPS && h + 1 == K::kHalves) wg_stamp(wg, this_block, 1, 2);
    if ((GEMMD_WGMMA_PROBE == 8 && h + 1 == K::kHalves) || (GEMMD_WGMMA_PROBE == 9 && h == 0)) {
      total[h * (BN / 2)] += blk[0] * s0;  // keeps the WGMMAs (ptxas drops those whose results are unused)
    } else if constexpr (128 % BN != 0) {
      promote_cross(*reinterpret_cast<float(*)[BN / 2]>(&total[h * (BN / 2)]), blk, s0, s1, sa0 * sbn, sa1 * sbn, jb);
    } else {
      promote(*reinterpret_cast<float(*)[BN / 2]>(&total[h * (BN / 2)]), blk, s0, s1);
    }
  }
  if (!GEMMD_WGMMA_SHADOW && ++stage == R::kStages) {
    stage = 0;
    phase ^= 1;
  }
}

// Split-K's workspace (gemmd_gpu_gemm_workspace_bytes; zeroed once, before first use): for
// each unit of the grid's first wave (units ≤ gridDim.x: the host splits only batches that
// fit one wave) and each
// consumer warpgroup, 64 × 128 floats of partial sums in the accumulators' register order
// (thread tid's element i at i·128 + tid: coalesced, no index math); then an arrival
// counter per output tile and warpgroup, which the tile's last part sets back to zero.
constexpr uint32_t kSplitSlotFloats = 64 * 128;

constexpr uint64_t split_ws_bytes(uint32_t grid) {
  return (uint64_t)grid * kConsumers * (kSplitSlotFloats * 4 + 4);
}

// A unit's part of its tile's sums: written to the workspace; the part that arrives last
// adds all parts in part order (the same sum whichever comes last) into `total` and
// returns true: it writes the tile. The others return false.
template <uint32_t BN>
__device__ __forceinline__ bool add_parts(const BatchView &v, const TileRef &tr, uint32_t wg, uint32_t tid,
                                          float (&total)[BN / 2]) {
  constexpr uint32_t kRegs = BN / 2;
  __shared__ uint32_t arrivals[kConsumers];  // the parts of the warpgroup's tile that arrived before it
  float *const partials = v.ws;
  uint32_t *const counter = reinterpret_cast<uint32_t *>(v.ws + (size_t)gridDim.x * kConsumers * kSplitSlotFloats) +
                            tr.tile * kConsumers + wg;
  auto slot = [&](uint32_t part) {
    return partials + ((size_t)(part * v.tiles + tr.tile) * kConsumers + wg) * kSplitSlotFloats + tid;
  };
  float *mine = slot(tr.part);
#pragma unroll
  for (uint32_t i = 0; i < kRegs; i++) __stcg(mine + i * 128, total[i]);
  __threadfence();  // the sums are visible before the arrival that announces them
  warpgroup_sync(wg);
  if (tid == 0) arrivals[wg] = atomicAdd(counter, 1u);
  warpgroup_sync(wg);
  if (*reinterpret_cast<volatile uint32_t *>(&arrivals[wg]) + 1 < v.parts) return false;
  __threadfence();  // every other part's sums are read after their arrivals
  float sum[kRegs];
#pragma unroll
  for (uint32_t i = 0; i < kRegs; i++) sum[i] = 0.0f;
  for (uint32_t p = 0; p < v.parts; p++) {
    const float *theirs = slot(p);
#pragma unroll
    for (uint32_t i = 0; i < kRegs; i++) sum[i] += p == tr.part ? total[i] : __ldcg(theirs + i * 128);
  }
#pragma unroll
  for (uint32_t i = 0; i < kRegs; i++) total[i] = sum[i];
  if (tid == 0) *counter = 0;  // for the next launch
  return true;
}

// One tile for consumer warpgroup `wg` (rows +kWgRows·wg of the tile, in kHalves 64-row
// halves).
template <typename K, uint32_t BN, bool kAE5M2, bool kBE5M2>
__device__ __forceinline__ void consume_tile(const BatchView &v, const gemmd_group_params_t &g, const TileRef &tr,
                                             bool tr_last, uint8_t *ring, Barriers &bars, uint32_t &stage, uint32_t &phase,
                                             uint32_t wg) {
  using R = Ring<K, BN>;
  constexpr uint32_t kRegs = BN / 2, kHalves = K::kHalves, kWgRows = K::kWgRows;
  const uint32_t tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  const KRange kr = k_range<K>(tr, gemmd_ceil_div(g.k, BK), v.parts);
  if (tr.m0 + wg * kWgRows >= g.m) {
    // None of this warpgroup's rows are the group's: only keep the ring turning (every
    // K part of the tile does the same, so split-K has nothing to add either).
    for (uint32_t kb = kr.kb0; kb < kr.kb1; kb++) {
      mbar_wait(&bars.full[stage], phase);
      release_stage_of<K>(&bars.empty[stage]);
      if (++stage == R::kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
    if (K::kTmaStore && tid == 0 && tr_last) bulk_wait_all();  // earlier tiles' stores
    return;
  }
  const uint32_t row0 = tr.m0 + wg * kWgRows + warp * 16 + lane / 4, row1 = row0 + 8;  // in half 0
  const uint32_t r = row0 - tr.m0;  // the tile's row, for the stage's scales
  const bool b_block = g.b_layout == GEMMD_SCALE_BLOCK_128X128;
  const uint32_t jb = (128 - tr.n0 % 128) / 8;  // column groups before B's next 128
  // Whether the epilogue stages the tile: half outputs, rows a multiple of 16 bytes, D
  // 16-byte aligned (the host encodes D's map for the same groups).
  auto stages_tile = [](const gemmd_group_params_t &p, const uint8_t *d) {
    return p.out_dtype != GEMMD_DTYPE_FP32 && p.n % 8 == 0 && reinterpret_cast<uintptr_t>(d) % 16 == 0;
  };
  // With TMA stores D's map is fetched now, off the tile's critical path.
  const uint8_t *tm_d = v.tmaps + ((size_t)tr.group * kMapsPerGroup + 2) * GEMMD_GPU_TMAP_BYTES;
  if (K::kTmaStore && tid == 0 && stages_tile(g, v.d_arena + g.d_offset)) {
    tmap_acquire(tm_d);
    tmap_prefetch(tm_d);
  }
  float total[kHalves * kRegs];
#pragma unroll
  for (uint32_t i = 0; i < kHalves * kRegs; i++) total[i] = 0.0f;
  if constexpr (kHalves > 1) {
    float blk[kRegs];
    Shadow sh;
    if (GEMMD_WGMMA_SHADOW) {
      sh.full0 = smem_addr(&bars.full[0]);
      sh.lo0 = desc_lo(ring);
      asm volatile("" : "+r"(sh.full0), "+r"(sh.lo0));  // computed once, kept in registers
      sh.lo = sh.lo0 + stage * (R::kStageBytes / 16);
      sh.ready = false;
    }
    for (uint32_t kb = kr.kb0; kb < kr.kb1; kb++) {
      k_block_halves<K, BN, kAE5M2, kBE5M2>(total, blk, stage, phase, ring, bars, wg, r, b_block, sh, kb + 1 < kr.kb1,
                                            jb);
    }
  } else {
    float blk0[kRegs], blk1[kRegs];
    // Two K blocks per iteration, into two accumulator arrays that take turns: the same
    // work as one array, but ptxas schedules it better (v10 vs v10a in
    // docs/bench/kernels.md).
    for (uint32_t kb = kr.kb0; kb < kr.kb1; kb += 2) {
      k_block<K, BN, kAE5M2, kBE5M2>(total, blk0, stage, phase, ring, bars, wg, r, b_block, jb);
      if (kb + 1 < kr.kb1) k_block<K, BN, kAE5M2, kBE5M2>(total, blk1, stage, phase, ring, bars, wg, r, b_block, jb);
    }
  }
  if constexpr (K::kSplit) {
    if (v.parts > 1 && !add_parts<BN>(v, tr, wg, tid, total)) return;  // not the tile's last part
  }
  // Epilogue: accumulator element j*4 + {0,1} is (row0, col), {2,3} is (row1, col), with
  // col = n0 + 8j + 2·(lane % 4) + {0, 1}. The group's fields are copied out of the table
  // first: D may alias it as far as the compiler knows, so every store would otherwise
  // re-read them.
  const uint32_t m = g.m, n = g.n;
  const uint8_t out_dtype = g.out_dtype, b_layout = g.b_layout;
  uint8_t *D = v.d_arena + g.d_offset;
  const float *SB = reinterpret_cast<const float *>(g.b_scales);
  const float sb_tensor = b_layout == GEMMD_SCALE_TENSOR ? SB[0] : 1.0f;
  // Column pair j's B scales (per-row B: one per column; otherwise the tensor's or 1).
  auto col_scales = [&](uint32_t col, float &c0, float &c1) {
    c0 = c1 = sb_tensor;
    if (b_layout == GEMMD_SCALE_ROW) {
      c0 = col < n ? SB[col] : 0.0f;
      c1 = col + 1 < n ? SB[col + 1] : 0.0f;
    }
  };
  // Probe 5 skips the stores on a condition the compiler cannot know is always true, so
  // the math that feeds them stays.
  if (GEMMD_WGMMA_PROBE == 5 && v.n_groups != 0xFFFFFFFFu) return;
  if (stages_tile(g, D)) {
    // Through shared memory: the warpgroup's 64 × BN rounded values are staged there, then
    // written out as 16-byte pieces, a warp covering whole rows (coalesced); direct stores
    // from the accumulator layout touch 8 rows per instruction in 4-byte pieces and cost
    // half the time of short-K shapes (probe 5, docs/bench/kernels.md).
    const uint32_t r0 = warp * 16 + lane / 4;  // row0 within the warpgroup's 64
    if constexpr (K::kTmaStore) {
      // The tile leaves by TMA stores that thread 0 issues and the TMA unit performs while
      // the warpgroup goes on to its next tile; before the staging area is written again,
      // the last tile's stores must have read it.
      const uint32_t row_base = tr.m0 + wg * 64;
      using Boxes = TmaBoxes<BN>;
      uint8_t *stage_out = R::out_staging(ring) + wg * Boxes::kWgBytes;
      constexpr uint32_t kRowBytes = Boxes::kCols * 2;
      if (tid == 0) bulk_wait_read();
      warpgroup_sync(wg);
#pragma unroll
      for (uint32_t j = 0; j < kRegs / 4; j++) {
        const uint32_t c = 8 * j + 2 * (lane % 4);
        float c0, c1;
        col_scales(tr.n0 + c, c0, c1);
        const float *t = total + j * 4;
        const uint32_t box = (c / Boxes::kCols) * Boxes::kBytes, cb = (c % Boxes::kCols) * 2;
        st_shared_u32(stage_out + swizzled(box + r0 * kRowBytes + cb, kRowBytes),
                      gemmd_pack_pair(out_dtype, t[0] * c0, t[1] * c1));
        st_shared_u32(stage_out + swizzled(box + (r0 + 8) * kRowBytes + cb, kRowBytes),
                      gemmd_pack_pair(out_dtype, t[2] * c0, t[3] * c1));
      }
      fence_async_shared();
      warpgroup_sync(wg);
      if (tid == 0) {
#pragma unroll
        for (uint32_t b = 0; b < BN / Boxes::kCols; b++) {
          if (tr.n0 + b * Boxes::kCols < n) {
            tma_store_2d(tm_d, stage_out + b * Boxes::kBytes, tr.n0 + b * Boxes::kCols, row_base);
          }
        }
        bulk_commit();
        if (tr_last) bulk_wait_all();  // the CTA's shared memory outlives its stores
      }
    } else {
#pragma unroll
      for (uint32_t h = 0; h < kHalves; h++) {  // each 64-row half of the warpgroup's rows
        const uint32_t row_base = tr.m0 + wg * kWgRows + h * 64;
        uint8_t *stage_out = R::out_staging(ring) + (wg * kHalves + h) * 64 * R::kOutPitch;
        warpgroup_sync(wg);  // the last tile's staged rows have all been written out
#pragma unroll
        for (uint32_t j = 0; j < kRegs / 4; j++) {
          const uint32_t c = 8 * j + 2 * (lane % 4);
          float c0, c1;
          col_scales(tr.n0 + c, c0, c1);
          const float *t = total + h * kRegs + j * 4;
          st_shared_u32(stage_out + r0 * R::kOutPitch + c * 2, gemmd_pack_pair(out_dtype, t[0] * c0, t[1] * c1));
          st_shared_u32(stage_out + (r0 + 8) * R::kOutPitch + c * 2, gemmd_pack_pair(out_dtype, t[2] * c0, t[3] * c1));
        }
        warpgroup_sync(wg);
        constexpr uint32_t kChunks = BN / 8;  // 16-byte pieces per row
        if constexpr (BN <= 128) {
          // All of the thread's pieces (at most 8) read first, then stored inside the group:
          // the reads' latencies overlap instead of each store waiting for its own read
          // behind a branch (v18; at width 192 this spilled, so that keeps a read per store).
          constexpr uint32_t kPieces = (64 * kChunks + 127) / 128;
          uint4 piece[kPieces];
#pragma unroll
          for (uint32_t u = 0; u < kPieces; u++) {
            const uint32_t i = tid + u * 128, r = i / kChunks, ch = i % kChunks;
            if (i < 64 * kChunks) piece[u] = ld_shared_v4(stage_out + r * R::kOutPitch + ch * 16);
          }
#pragma unroll
          for (uint32_t u = 0; u < kPieces; u++) {
            const uint32_t i = tid + u * 128, r = i / kChunks, ch = i % kChunks, row = row_base + r,
                           col = tr.n0 + ch * 8;
            // Probe 12 stages and reads the tile but stores nothing (on a condition the
            // compiler cannot know is always true).
            if (GEMMD_WGMMA_PROBE == 12 && v.n_groups != 0xFFFFFFFFu) continue;
            if (i < 64 * kChunks && row < m && col < n) {
              *reinterpret_cast<uint4 *>(D + ((size_t)row * n + col) * 2) = piece[u];
            }
          }
        } else {
#pragma unroll 4
          for (uint32_t i = tid; i < 64 * kChunks; i += 128) {
            const uint32_t r = i / kChunks, ch = i % kChunks, row = row_base + r, col = tr.n0 + ch * 8;
            if (row < m && col < n) {
              const uint4 piece = ld_shared_v4(stage_out + r * R::kOutPitch + ch * 16);
              *reinterpret_cast<uint4 *>(D + ((size_t)row * n + col) * 2) = piece;
            }
          }
        }
      }
    }
    return;
  }
  // Direct from registers (FP32 out, or rows not 16-byte aligned): each pair of columns
  // goes out in one store.
#pragma unroll
  for (uint32_t h = 0; h < kHalves; h++) {
    const uint32_t hr0 = row0 + h * 64, hr1 = row1 + h * 64;
#pragma unroll
    for (uint32_t j = 0; j < kRegs / 4; j++) {
      const uint32_t col = tr.n0 + 8 * j + 2 * (lane % 4);
      if (col >= n) continue;
      float c0, c1;
      col_scales(col, c0, c1);
      const float *t = total + h * kRegs + j * 4;
      if (col + 1 < n) {
        if (hr0 < m) gemmd_store_out_pair(D, out_dtype, (size_t)hr0 * n + col, t[0] * c0, t[1] * c1);
        if (hr1 < m) gemmd_store_out_pair(D, out_dtype, (size_t)hr1 * n + col, t[2] * c0, t[3] * c1);
      } else {
        if (hr0 < m) gemmd_store_out(D, out_dtype, (size_t)hr0 * n + col, t[0] * c0);
        if (hr1 < m) gemmd_store_out(D, out_dtype, (size_t)hr1 * n + col, t[2] * c0);
      }
    }
  }
  if (K::kTmaStore && tid == 0 && tr_last) bulk_wait_all();  // earlier tiles' stores
}

template <typename K, uint32_t BN>
__device__ __forceinline__ void consume(const BatchView &v, uint8_t *ring, Barriers &bars, uint32_t wg) {
  uint32_t stage = 0, phase = 0;
  const bool stamper = GEMMD_WGMMA_STAMPS && wg == 0 && threadIdx.x % 128 == 0;
  if (stamper && first_unit<K>() < v.total_tiles) {
    mbar_wait(&bars.full[0], 0);  // (waited again by the first K block: the phase stays done)
    stamp(kStampFirstFull);
  }

  for (uint32_t t = first_unit<K>(); t < v.total_tiles; t += unit_step<K>()) {
    const TileRef tr = locate_unit<K, BN>(v, t);
    const bool last = t + unit_step<K>() >= v.total_tiles;  // the CTA's last tile
    // By reference: the fields are read from the table (L1) where used, not held in
    // registers through the K loop.
    const gemmd_group_params_t &g = v.table[tr.group];
    const bool ae5 = g.a_dtype == GEMMD_DTYPE_FP8_E5M2, be5 = g.b_dtype == GEMMD_DTYPE_FP8_E5M2;
    if (!ae5 && !be5) {
      consume_tile<K, BN, false, false>(v, g, tr, last, ring, bars, stage, phase, wg);
    } else if (!ae5 && be5) {
      consume_tile<K, BN, false, true>(v, g, tr, last, ring, bars, stage, phase, wg);
    } else if (ae5 && !be5) {
      consume_tile<K, BN, true, false>(v, g, tr, last, ring, bars, stage, phase, wg);
    } else {
      consume_tile<K, BN, true, true>(v, g, tr, last, ring, bars, stage, phase, wg);
    }
    if (stamper && t == first_unit<K>()) stamp(kStampFirstTile);
    if (stamper && last) stamp(kStampLastTile);
  }
}

// Runs f(std::integral_constant<uint32_t, BN>{}) for the batch's tile width BN: every
// width is compiled in, and each role picks its instance from the batch header.
template <typename F>
__device__ __forceinline__ void with_tile_n(uint32_t tile_n, F &&f) {
  switch (tile_n) {
    case 128:
      return f(std::integral_constant<uint32_t, 128>{});
    case 64:
      return f(std::integral_constant<uint32_t, 64>{});
    case 32:
      return f(std::integral_constant<uint32_t, 32>{});
    default:
      return f(std::integral_constant<uint32_t, 16>{});
  }
}

// with_tile_n for ROWS256: with r256w96, 96 columns too.
template <typename F>
__device__ __forceinline__ void with_rows256_width(uint32_t tile_n, F &&f) {
  if constexpr (GEMMD_WGMMA_ROWS256_96 != 0) {
    if (tile_n == 96) return f(std::integral_constant<uint32_t, 96>{});
  }
  return with_tile_n(tile_n, f);
}

// with_tile_n for the kernel of kind K: ROWS128_WIDE has 96 and 192 columns only.
template <typename K, typename F>
__device__ __forceinline__ void with_kind_width(uint32_t tile_n, F &&f) {
  if constexpr (K::kId == GEMMD_TILE_ROWS128_WIDE) {
    if (tile_n == 192) return f(std::integral_constant<uint32_t, 192>{});
    return f(std::integral_constant<uint32_t, 96>{});
  } else if constexpr (K::kId == GEMMD_TILE_ROWS256) {
    return with_rows256_width(tile_n, f);
  } else {
    return with_tile_n(tile_n, f);
  }
}

// The CTA's barriers: thread 0 initializes the ring's, then every thread meets.
__device__ __forceinline__ void setup_barriers(Barriers &bars) {
  if (threadIdx.x == 0) {
    for (uint32_t s = 0; s < kMaxStages; s++) {
      mbar_init(&bars.full[s], 1 + 32);  // the TMA thread, the scale warp's lanes
      mbar_init(&bars.empty[s], 4 * kConsumers);  // one per consumer warp
    }
#if GEMMD_WGMMA_STAMPS == 2
    wg_first_counts()[0] = wg_first_counts()[1] = 0;
#endif
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
}

// The kernel of tile kind K; on a batch prepared for another kind it returns at once.
template <typename K>
__global__ void __launch_bounds__(kThreads, 1) wgmma_gemm_kernel(const uint8_t *batch, float *ws) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ Barriers bars;
  uint8_t *ring = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));

  if (threadIdx.x == 0) stamp(kStampEntry);
  if (GEMMD_WGMMA_EARLY && threadIdx.x == 32) prefetch_l2(batch + sizeof(gemmd_batch_header_t));  // the first group
  if (GEMMD_WGMMA_PROLOGUE && threadIdx.x == 64) {  // the first group's maps (A, B), a one-group batch's
    prefetch_l2(batch + kPrologueMaps);
    prefetch_l2(batch + kPrologueMaps + GEMMD_GPU_TMAP_BYTES);
  }
#if GEMMD_WGMMA_PROLOGUE
  // The header's fields are read before the CTA's setup and used after it.
  const gemmd_batch_header_t header = *reinterpret_cast<const gemmd_batch_header_t *>(batch);
  setup_barriers(bars);
  const gemmd_batch_header_t *hdr = &header;
#else
  const auto *hdr = reinterpret_cast<const gemmd_batch_header_t *>(batch);
#endif
  if (hdr->tile_kind != K::kId) return;
  if (threadIdx.x == 0) stamp(kStampHeader);
  BatchView v;
  v.n_groups = hdr->n_groups;
  v.total_tiles = hdr->total_tiles;
  v.parts = K::kSplit && hdr->k_splits > 1 ? hdr->k_splits : 1;
  v.tiles = v.total_tiles / v.parts;
  v.ws = ws;
  v.table = reinterpret_cast<const gemmd_group_params_t *>(batch + sizeof(gemmd_batch_header_t));
  v.tmaps = batch + hdr->sched_arena;
  v.starts = reinterpret_cast<const uint32_t *>(v.tmaps + (size_t)v.n_groups * kMapsPerGroup * GEMMD_GPU_TMAP_BYTES);
  v.group_tiles = group_tiles_of(v);
  if (threadIdx.x == 0) stamp(kStampSched, v.group_tiles);
  v.sa_arena = reinterpret_cast<const float *>(batch + hdr->sa_arena);
  v.d_arena = const_cast<uint8_t *>(batch) + hdr->d_arena;
  const uint32_t tile_n = hdr->tile_n;

  if (!GEMMD_WGMMA_PROLOGUE) setup_barriers(bars);

  // The producer warpgroup gives its registers to the consumers; each role then runs the
  // batch's tile width.
  if (threadIdx.x < 128) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x / 32 == 1) {
      return with_kind_width<K>(tile_n, [&](auto bn) { load_scales<K, decltype(bn)::value>(v, ring, bars); });
    }
    if (threadIdx.x != 0) return;
    stamp(kStampSynced);
    return with_kind_width<K>(tile_n, [&](auto bn) { produce<K, decltype(bn)::value>(v, ring, bars); });
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  // Warp-uniform; through a shuffle ptxas knows it, and keeps what derives from it (the
  // WGMMA descriptors) in uniform registers.
  const uint32_t wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0) - 1;
  with_kind_width<K>(tile_n, [&](auto bn) { consume<K, decltype(bn)::value>(v, ring, bars, wg); });
}

#if GEMMD_WGMMA_JOINT_ROWS256
// Runs f(K{}, std::integral_constant<uint32_t, BN>{}) for tile kind `kind` (ROWS256,
// ROWS128_TMA_STORE, else ROWS128) and width `tile_n`.
template <typename F>
__device__ __forceinline__ void with_kind(uint32_t kind, uint32_t tile_n, F &&f) {
  if (kind == GEMMD_TILE_ROWS256) {
    return with_rows256_width(tile_n, [&](auto bn) { f(KindRows256{}, bn); });
  }
  if (kind == GEMMD_TILE_ROWS128_TMA_STORE) {
    return with_tile_n(tile_n, [&](auto bn) { f(KindRows128TmaStore{}, bn); });
  }
  return with_tile_n(tile_n, [&](auto bn) { f(KindRows128{}, bn); });
}

// ROWS256 batches run in this kernel: the three unsplit kinds' code in one function (as
// session 5's kinds3 build had it), picked by the header's kind. Here ptxas issues each
// 64-row half's four QGMMAs back to back (their descriptors made ahead), as it does not in a
// kernel of ROWS256 alone: 6–11% faster at M ≥ 4096, measured in one call against the
// kernel of its own (docs/bench/kernels.md, session 8 call 5). A batch of another kind
// returns at once (checked on a copy the compiler cannot see through, so it keeps the other
// kinds' code).
// It runs in 2-CTA clusters (launch_joint_pairs), its ROWS256 tiles paired (K::kPair): both
// CTAs' barriers exist before either CTA's loads or arrivals reach the other, and neither
// leaves before the other is done, so the producer warpgroup's idle threads wait at the
// closing cluster barrier instead of exiting.
// Its body is wgmma_gemm_kernel's with that dispatch, written out: sharing the two through
// helpers moved registers and instructions in both kernels' SASS (tried in session 8), and
// these are the measured ones.
__global__ void __launch_bounds__(kThreads, 1) wgmma_gemm_kernel_joint(const uint8_t *batch, float *ws) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ Barriers bars;
  uint8_t *ring = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));

  if (threadIdx.x == 0) stamp(kStampEntry);
  if (GEMMD_WGMMA_EARLY && threadIdx.x == 32) prefetch_l2(batch + sizeof(gemmd_batch_header_t));  // the first group
  const auto *hdr = reinterpret_cast<const gemmd_batch_header_t *>(batch);
  const uint32_t kind = hdr->tile_kind;
  uint32_t opaque_kind;  // the same value, hidden from the compiler by the asm
  asm volatile("mov.u32 %0, %1;" : "=r"(opaque_kind) : "r"(kind));
  if (opaque_kind != KindRows256::kId) return;
  if (threadIdx.x == 0) stamp(kStampHeader);
  BatchView v;
  v.n_groups = hdr->n_groups;
  v.total_tiles = hdr->total_tiles;
  v.parts = 1;
  v.tiles = v.total_tiles;
  v.ws = ws;
  v.table = reinterpret_cast<const gemmd_group_params_t *>(batch + sizeof(gemmd_batch_header_t));
  v.tmaps = batch + hdr->sched_arena;
  v.starts = reinterpret_cast<const uint32_t *>(v.tmaps + (size_t)v.n_groups * kMapsPerGroup * GEMMD_GPU_TMAP_BYTES);
  v.group_tiles = group_tiles_of(v);
  if (threadIdx.x == 0) stamp(kStampSched, v.group_tiles);
  v.sa_arena = reinterpret_cast<const float *>(batch + hdr->sa_arena);
  v.d_arena = const_cast<uint8_t *>(batch) + hdr->d_arena;
  const uint32_t tile_n = hdr->tile_n;

  if (threadIdx.x == 0) {
    for (uint32_t s = 0; s < kMaxStages; s++) {
      mbar_init(&bars.full[s], 1 + 32);
      mbar_init(&bars.empty[s], 2 * 4 * kConsumers);  // every consumer warp of both CTAs
    }
#if GEMMD_WGMMA_STAMPS == 2
    wg_first_counts()[0] = wg_first_counts()[1] = 0;
#endif
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cluster_sync();  // both CTAs' barriers exist before either's loads or arrivals reach the other
  if (threadIdx.x < 128) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x / 32 == 1) {
      with_kind(kind, tile_n,
                [&](auto k, auto bn) { load_scales<decltype(k), decltype(bn)::value>(v, ring, bars); });
    } else if (threadIdx.x == 0) {
      stamp(kStampSynced);
      with_kind(kind, tile_n, [&](auto k, auto bn) { produce<decltype(k), decltype(bn)::value>(v, ring, bars); });
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    // Warp-uniform; through a shuffle ptxas knows it, and keeps what derives from it (the
    // WGMMA descriptors) in uniform registers.
    const uint32_t wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0) - 1;
    with_kind(kind, tile_n, [&](auto k, auto bn) { consume<decltype(k), decltype(bn)::value>(v, ring, bars, wg); });
  }
  // Neither CTA leaves while the other may still multicast into it or arrive on its
  // barriers.
  __syncwarp();
  cluster_sync();
}
#endif

// ---- Host side -----------------------------------------------------------------------------

PFN_cuTensorMapEncodeTiled_v12000 g_encode = nullptr;
std::once_flag g_encode_once;

void load_encode() {
  void *fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess) {
    g_encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }
}

// Every map this process encoded, by its inputs (tmap_cache.h); made on first use.
gemmd::TmapCache &map_cache() {
  static gemmd::TmapCache cache;
  return cache;
}

// A 2D map over `rows` rows of `cols` bytes, `ld` bytes apart, at `addr`: boxes of 128
// bytes × box_rows rows, 128-byte swizzle, zeros outside (past k as well as past m or n).
// Encoded once per distinct set of inputs (map_cache).
bool encode_now(void *out, uint64_t addr, uint32_t cols, uint32_t ld, uint32_t rows, uint32_t box_rows) {
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {ld};
  const cuuint32_t box[2] = {BK, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  return g_encode(static_cast<CUtensorMap *>(out), CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, reinterpret_cast<void *>(addr),
                  dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool encode(void *out, uint64_t addr, uint32_t cols, uint32_t ld, uint32_t rows, uint32_t box_rows) {
  return map_cache().get(gemmd::TmapKey{addr, 0, cols, ld, rows, BK, box_rows}, out,
                         [&](void *dst) { return encode_now(dst, addr, cols, ld, rows, box_rows); });
}

// D's map for the TMA-store epilogue: n columns × m rows of 2-byte values (rows n apart), boxes
// of 64 rows × min(tile_n, 64) columns, swizzled as the kernel stages them.
bool encode_d_now(void *out, uint64_t addr, uint32_t n, uint32_t m, uint32_t tile_n) {
  const uint32_t box_cols = tile_n < 64 ? tile_n : 64;
  const cuuint64_t dims[2] = {n, m};
  const cuuint64_t strides[1] = {(cuuint64_t)n * 2};
  const cuuint32_t box[2] = {box_cols, 64};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUtensorMapSwizzle swizzle = box_cols == 64   ? CU_TENSOR_MAP_SWIZZLE_128B
                                     : box_cols == 32 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                      : CU_TENSOR_MAP_SWIZZLE_32B;
  return g_encode(static_cast<CUtensorMap *>(out), CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, reinterpret_cast<void *>(addr),
                  dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                  CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool encode_d(void *out, uint64_t addr, uint32_t n, uint32_t m, uint32_t tile_n) {
  return map_cache().get(gemmd::TmapKey{addr, 1, n, 2 * n, m, tile_n, 64}, out,
                         [&](void *dst) { return encode_d_now(dst, addr, n, m, tile_n); });
}

int sm_count() {
  static int sms = 0;
  if (sms == 0) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      sms = 132;
    }
  }
  return sms;
}

// The groups the WGMMA kernel runs: all but FP32 outputs (gpu_gemm.cu says why).
bool runs_here(const gemmd_group_params_t &p) { return p.out_dtype != GEMMD_DTYPE_FP32; }

uint32_t kind_rows(uint32_t kind) { return kind == GEMMD_TILE_ROWS256 ? 256 : 128; }

// The tile width with the least estimated time for tiles of `bm` rows: waves of tiles over
// the SMs times the average tile's K blocks times the cost of one K block at that width.
// The cost model was fitted to the v3 width sweep on the H200 (docs/bench/kernels.md): a K
// block takes about 219 ns + 2.66 ns per tile column when memory-bound; wider tiles stream
// more bytes per stage, narrower tiles give more SMs work. Ties go to the wider tile.
// The tiles of `bm` rows × `tn` columns of the groups the WGMMA kernel runs, and their K
// blocks summed over the tiles.
struct TileCount {
  uint64_t tiles;
  double kblocks;
};

TileCount count_tiles(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t bm, uint32_t tn) {
  TileCount c = {0, 0.0};
  for (uint32_t g = 0; g < n_groups; g++) {
    if (!runs_here(table[g])) continue;
    const uint64_t t = (uint64_t)((table[g].m + bm - 1) / bm) * ((table[g].n + tn - 1) / tn);
    c.tiles += t;
    c.kblocks += (double)t * ((table[g].k + BK - 1) / BK);
  }
  return c;
}

// The fewest rows and columns among the groups the WGMMA kernel runs (0xFFFFFFFF with none).
struct GroupExtent {
  uint32_t min_m, min_n;
};
GroupExtent group_extent(const gemmd_group_params_t *table, uint32_t n_groups) {
  GroupExtent e = {0xFFFFFFFFu, 0xFFFFFFFFu};
  for (uint32_t g = 0; g < n_groups; g++) {
    if (runs_here(table[g])) {
      e.min_m = std::min(e.min_m, table[g].m);
      e.min_n = std::min(e.min_n, table[g].n);
    }
  }
  return e;
}

struct WidthChoice {
  uint32_t tile_n;
  double cost;  // the model's, in ns; 0 with no group to run
};

// The cheapest of `widths` (the first of equals within 0.1%) by that model.
WidthChoice best_width(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms, uint32_t bm,
                       std::initializer_list<uint32_t> widths) {
  WidthChoice best = {*widths.begin(), 0.0};
  bool first = true;
  for (uint32_t tn : widths) {
    const TileCount c = count_tiles(table, n_groups, bm, tn);
    if (c.tiles == 0) return best;
    const double waves = (double)((c.tiles + sms - 1) / sms);
    const double cost = waves * (c.kblocks / (double)c.tiles) * (219.0 + 2.66 * tn);
    if (first || cost < best.cost * 0.999) best = {tn, cost};
    first = false;
  }
  return best;
}

// The best of the widths every kind but ROWS128_WIDE has.
WidthChoice choose_narrow(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms, uint32_t bm) {
  return best_width(table, n_groups, sms, bm, {128u, 64u, 32u, 16u});
}

uint32_t choose_tile_n(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms, uint32_t bm) {
  return choose_narrow(table, n_groups, sms, bm).tile_n;
}

// ROWS128_WIDE's width by the same model: 96, or 192 where every group has 256 rows or
// more. Measured in one binary (session 10, docs/bench/kernels.md): 96 beat 128 by 6–11%
// on N×K 24576×1536 at every M ≤ 128; 192 beat 128 by 7% on 4096×2112×7168 but lost at
// M ≤ 128 (24576×1536: 2–7% slower than 96) and on the decode batches (1%).
WidthChoice choose_wide(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms) {
  const uint32_t min_m = group_extent(table, n_groups).min_m;
  if (min_m != 0xFFFFFFFFu && min_m >= 256) return best_width(table, n_groups, sms, 128, {192u, 96u});
  return best_width(table, n_groups, sms, 128, {96u});
}

// Split-K (ROWS128_SPLIT): K parts per 128-row tile and the width to go with them,
// for a batch whose units (tiles × parts) fit one wave of the grid, by choose_tile_n's cost
// model plus the sums' trip through the workspace: each part writes 64 × tn floats per
// warpgroup and the last reads the others'. Left free (`parts` 0) it splits batches whose
// unsplit width would be 16 by that model, and long-K 65–128-row batches in 2 parts (below);
// no others: in the H200 run of 2026-12-01 (docs/bench/kernels.md,
// session 8) split-K won only there (N = 2112 at M ≤ 128: 18.3 → 15.0 µs) and lost
// elsewhere (4096×7168 at M ≤ 128: 19.9 → 23.0 µs with 4 parts of 128 columns; K = 2048:
// 11.9 → 16.0); the trip, inferred from those times against this model, 3–12 µs: about
// 3 µs + 20 ns per column and part past the first. `tile_n` / `parts` 0: free; parts 1 in
// the result: no split.
struct SplitChoice {
  uint32_t tile_n, parts;
};

SplitChoice choose_split(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms, uint32_t tile_n,
                         uint32_t parts) {
  const uint32_t unsplit = choose_tile_n(table, n_groups, sms, 128);
  SplitChoice best = {tile_n != 0 ? tile_n : unsplit, 1};
  if (parts == 0 && tile_n == 0 && unsplit != 16) {
    // Two parts at twice the width where every group fills both consumer warpgroups (65 to
    // 128 rows: A's rows are most of each stage's bytes at 32 or 64 columns, and every column
    // tile reads them again) and K is long (48 blocks or more): measured 3–11% faster at
    // M = 128 with N×K 4096×7168 and 7168×16384 (session 8 call 4, session 9 call 2), but
    // slower at M ≤ 64 and at K = 2048 (docs/bench/kernels.md).
    bool long_full = unsplit <= 64;
    for (uint32_t g = 0; long_full && g < n_groups; g++) {
      if (runs_here(table[g])) long_full = table[g].m > 64 && table[g].m <= 128 && (table[g].k + BK - 1) / BK >= 48;
    }
    if (long_full) {
      const TileCount c = count_tiles(table, n_groups, 128, 2 * unsplit);
      if (c.tiles > 0 && c.tiles * 2 <= sms) return {2 * unsplit, 2};
    }
    return best;
  }
  double best_cost = -1;
  for (uint32_t tn : {128u, 64u, 32u, 16u}) {
    if (tile_n != 0 && tn != tile_n) continue;
    const TileCount c = count_tiles(table, n_groups, 128, tn);
    if (c.tiles == 0) return best;
    for (uint32_t p = 1; p <= GEMMD_GPU_MAX_K_SPLITS; p++) {
      if ((parts != 0 && p != parts) || (p > 1 && c.tiles * p > sms)) continue;
      const double waves = (double)((c.tiles * p + sms - 1) / sms);
      const double cost = waves * std::ceil(c.kblocks / (double)c.tiles / p) * (219.0 + 2.66 * tn) +
                          (p > 1 ? 3000.0 + 20.0 * tn * (p - 1) : 0.0);
      if (best_cost < 0 || cost < best_cost * 0.999) {
        best = {tn, p};
        best_cost = cost;
      }
    }
  }
  return best;
}

// Waves of 128-column tiles of `bm` rows over the SMs.
uint64_t waves(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms, uint32_t bm) {
  uint64_t tiles = 0;
  for (uint32_t g = 0; g < n_groups; g++) {
    if (runs_here(table[g])) tiles += (uint64_t)((table[g].m + bm - 1) / bm) * ((table[g].n + 127) / 128);
  }
  return (tiles + sms - 1) / sms;
}

// The kind of tile, by the H200 run of 2026-12-01 (session 8: each kind its own kernel,
// every kind timed on issue 6's cases: docs/bench/kernels.md). Earlier rules were read off
// session 5's sweep, where all kinds were compiled into one kernel and ROWS256 was 10–15%
// faster than it is as its own kernel; as its own, it is fastest at M = 4096 with N ≥ 7168
// (4096×7168×16384 1001 vs 1054 µs, 8192³ −4%, stacked 7168×2048 −6%, 4096×32768×512 −4%)
// and within 2.3% of ROWS128 elsewhere, except where 256-row tiles leave the last wave
// emptier (4096×2112×7168: +14%). So ROWS256 when every group has ≥ 256 rows and 256-row
// tiles take at most 1.05× half the waves of 128-row ones; else ROWS128. The TMA-store
// kind won nowhere in that run (at best 0.2% faster than ROWS128, up to 12% slower) and is
// never chosen; it stays built, for forced runs. Since v13 (ROWS256 in the joint kernel)
// ROWS256 is 7–14% faster than ROWS128 at every M ≥ 4096 case but 4096×2112×7168
// (session 8, call 6), which the same rule keeps on ROWS128.
uint32_t choose_kind(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms) {
  const uint32_t min_m = group_extent(table, n_groups).min_m;  // 0xFFFFFFFF with no group to run: ROWS128
  if (min_m != 0xFFFFFFFFu && min_m >= 256 && 2.0 * waves(table, n_groups, sms, 256) <= 1.05 * waves(table, n_groups, sms, 128)) {
    return GEMMD_TILE_ROWS256;
  }
  return GEMMD_TILE_ROWS128;
}

}  // namespace

extern "C" uint64_t gemmd_gpu_gemm_sched_bytes(uint32_t n_groups) {
  return (uint64_t)n_groups * kMapsPerGroup * GEMMD_GPU_TMAP_BYTES + 4ull * (n_groups + 2);
}

namespace {

// v24, `rounds` (GEMMD_WGMMA_RULE_ROUNDS, 1 unless built with 0; host only, every kernel
// v23's): for batches whose groups all have >= 256 rows and >= 512 columns, the kind and
// width whose rounds cost the least: rounds of units over the grid (ROWS256's pair units
// over sms / 2 clusters) times the average unit's K blocks times the tile's outputs times
// that kind and width's price per output and K block, measured at N x K 2112 x 7168
// (session 16 call 6; ps: ROWS256/128 27, ROWS128/128 30-32 (31: M = 3840 and 4608 both
// right), ROWS256/96 34, ROWS128_WIDE/192 35, /96 39). The older rule (choose_kind below)
// counted ROWS256's waves in tiles, not pairs, and priced widths by a small-M model: it
// gave 3840x2112x7168 ROWS256/128 at 143.8 us where ROWS128/128 takes 109.8 (call 7); on
// issue 6's cases both rules choose the same.
#ifndef GEMMD_WGMMA_RULE_ROUNDS
#define GEMMD_WGMMA_RULE_ROUNDS 1
#endif
// v25, `rounds64` (GEMMD_WGMMA_RULE_ROUNDS64, 1 unless built with 0; host only): the rounds
// rule also weighs ROWS128 at 64 columns, at 46 ps per output and K block (43-48 where
// its tiles take two or more rounds: session 17 call 2, the six DeepGEMM N x K at M = 256
// ... 8192 with every kind and width forced). Where a batch has few tiles, 128 x 64 tiles
// fill the SMs that wider ones leave idle: 256x2112x7168 29.6 -> 23.9 us, 256x4096x7168
// 30.6 -> 24.6, 512x2112x7168 30.0 -> 24.2, 1024x2112x7168 47.8 -> 42.2 (call 3: as
// forced); on the sweep's other shapes (calls 2 and 4) and issue 6's cases the rule's
// choice is unchanged.
#ifndef GEMMD_WGMMA_RULE_ROUNDS64
#define GEMMD_WGMMA_RULE_ROUNDS64 1
#endif
struct RoundsChoice {
  uint32_t kind, tile_n;
  double cost;  // < 0: the batch is not one for this rule
};
RoundsChoice choose_by_rounds(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms) {
  RoundsChoice best = {0, 0, -1.0};
  const GroupExtent e = group_extent(table, n_groups);
  if (e.min_m == 0xFFFFFFFFu || e.min_m < 256 || e.min_n < 512) return best;
  struct Candidate {
    uint32_t kind, bm, tn;
    bool paired;
    double ps;
    bool weighed;  // this build weighs it (its width built, its rule version on)
  };
  const Candidate cands[] = {{GEMMD_TILE_ROWS256, 256, 128, true, 27.0, true},
                             {GEMMD_TILE_ROWS256, 256, 96, true, 34.0, GEMMD_WGMMA_ROWS256_96 != 0},
                             {GEMMD_TILE_ROWS128, 128, 128, false, 31.0, true},
                             {GEMMD_TILE_ROWS128, 128, 64, false, 46.0, GEMMD_WGMMA_RULE_ROUNDS64 != 0},
                             {GEMMD_TILE_ROWS128_WIDE, 128, 192, false, 35.0, true},
                             {GEMMD_TILE_ROWS128_WIDE, 128, 96, false, 39.0, true}};
  for (const Candidate &c : cands) {
    if (!c.weighed || !GEMMD_WGMMA_BUILT(c.kind)) continue;
    const bool paired = c.paired && GEMMD_WGMMA_JOINT_ROWS256;
    const TileCount t = count_tiles(table, n_groups, c.bm, paired ? 2 * c.tn : c.tn);
    if (t.tiles == 0) continue;
    const uint64_t slots = paired ? sms / 2 : sms;
    const double rounds = (double)((t.tiles + slots - 1) / slots);
    const double cost = rounds * (t.kblocks / (double)t.tiles) * c.bm * c.tn * c.ps;
    if (best.cost < 0 || cost < best.cost * 0.999) best = {c.kind, c.tn, cost};
  }
  return best;
}

// The tile configuration for a batch: choose_by_rounds's where it applies; else the kind by
// choose_kind, and where that says ROWS128 and split-K pays (choose_split), ROWS128_SPLIT
// (`split`: whether it may); where the wide widths cost less than ROWS128's, ROWS128_WIDE
// (or, r256w96, ROWS256 at 96 in place of its 192); then the width (and K parts).
gemmd_gpu_tiles_t choose_config(const gemmd_group_params_t *table, uint32_t n_groups, uint32_t sms,
                                bool split = true) {
  if (GEMMD_WGMMA_RULE_ROUNDS) {
    const RoundsChoice r = choose_by_rounds(table, n_groups, sms);
    if (r.cost >= 0) return gemmd_gpu_tiles_t{r.kind, r.tile_n, 1};
  }
  const uint32_t kind = choose_kind(table, n_groups, sms);
  if (kind == GEMMD_TILE_ROWS128) {
    if (split) {
      const SplitChoice c = choose_split(table, n_groups, sms, 0, 0);
      if (c.parts > 1) return gemmd_gpu_tiles_t{GEMMD_TILE_ROWS128_SPLIT, c.tile_n, c.parts};
    }
    const WidthChoice narrow = choose_narrow(table, n_groups, sms, 128);
    const WidthChoice wide = choose_wide(table, n_groups, sms);
    if (wide.cost < narrow.cost * 0.999) {
      // r256w96: where 128 × 192 tiles win, 256 × 96 ones of the same area, paired.
      if (GEMMD_WGMMA_ROWS256_96 && wide.tile_n == 192) return gemmd_gpu_tiles_t{GEMMD_TILE_ROWS256, 96, 1};
      return gemmd_gpu_tiles_t{GEMMD_TILE_ROWS128_WIDE, wide.tile_n, 1};
    }
    return gemmd_gpu_tiles_t{kind, narrow.tile_n, 1};
  }
  return gemmd_gpu_tiles_t{kind, choose_tile_n(table, n_groups, sms, kind_rows(kind)), 1};
}

}  // namespace

extern "C" gemmd_gpu_tiles_t gemmd_gpu_gemm_choose_tiles(const gemmd_group_params_t *table, uint32_t n_groups,
                                                        uint32_t sms) {
  return choose_config(table, n_groups, sms == 0 ? 1 : sms);
}

extern "C" void gemmd_gpu_gemm_forget_maps(void) { map_cache().clear(); }

#if GEMMD_WGMMA_STAMPS
// The stamps in `symbol` copied to `out`, or with `out` null zeroed.
template <typename T>
int read_stamps(const T &symbol, uint64_t *out) {
  void *at = nullptr;
  if (cudaGetSymbolAddress(&at, symbol) != cudaSuccess) return GEMMD_EDEVICE;
  const cudaError_t rc =
      out == nullptr ? cudaMemset(at, 0, sizeof(T)) : cudaMemcpy(out, at, sizeof(T), cudaMemcpyDeviceToHost);
  return rc == cudaSuccess ? GEMMD_OK : GEMMD_EDEVICE;
}
#define READ_STAMPS(symbol, out) read_stamps(symbol, out)
#else
#define READ_STAMPS(symbol, out) ((void)(out), GEMMD_ENOTSUP)  // builds without the probe
#endif

extern "C" const char *gemmd_gpu_gemm_stamp_name(uint32_t point) {
  return point < kStampPoints ? kStampNames[point] : "?";
}

extern "C" int gemmd_gpu_gemm_wg_stamps(uint64_t *out, uint32_t *ctas, uint32_t *blocks) {
  *ctas = kStampCtas;
  *blocks = 2 * kMaxStages;
  return READ_STAMPS(g_wg_stamps, out);
}

extern "C" int gemmd_gpu_gemm_stamps(uint64_t *out, uint32_t *ctas, uint32_t *points) {
  *ctas = kStampCtas;
  *points = kStampPoints;
  return READ_STAMPS(g_stamps, out);
}

extern "C" int gemmd_gpu_gemm_prepare(gemmd_gpu_kernel_t kernel, void *host_batch, uint64_t dev_batch) {
  return gemmd_gpu_gemm_prepare_tiles(kernel, host_batch, dev_batch, GEMMD_GPU_TILE_KIND_AUTO, 0);
}

extern "C" int gemmd_gpu_gemm_prepare_tiles(gemmd_gpu_kernel_t kernel, void *host_batch, uint64_t dev_batch,
                                            uint32_t kind, uint32_t tile_n) {
  return gemmd_gpu_gemm_prepare_split(kernel, host_batch, dev_batch, kind, tile_n, 0);
}

extern "C" int gemmd_gpu_gemm_prepare_split(gemmd_gpu_kernel_t kernel, void *host_batch, uint64_t dev_batch,
                                            uint32_t kind, uint32_t tile_n, uint32_t k_splits) {
  auto *hdr = static_cast<gemmd_batch_header_t *>(host_batch);
  if (host_batch == nullptr || dev_batch == 0) return GEMMD_EINVAL;
  if (k_splits > GEMMD_GPU_MAX_K_SPLITS) return GEMMD_EINVAL;
  const bool wide_n = tile_n == 96 || tile_n == 192;
  if (tile_n != 0 && tile_n != 16 && tile_n != 32 && tile_n != 64 && tile_n != 128 && !wide_n) return GEMMD_EINVAL;
  if (kind != GEMMD_GPU_TILE_KIND_AUTO && kind >= GEMMD_TILE_KINDS) return GEMMD_EINVAL;
  // 256-row tiles of 96 columns (r256w96): a build without them refuses them as a kind
  // it lacks.
  const bool rows256_96 = kind == GEMMD_TILE_ROWS256 && tile_n == 96;
  if (rows256_96 && !GEMMD_WGMMA_ROWS256_96) return GEMMD_ENOTSUP;
  // The other wide widths are ROWS128_WIDE's alone (asked for with AUTO, they choose it).
  if (tile_n != 0 && !rows256_96 && wide_n != (kind == GEMMD_TILE_ROWS128_WIDE) && kind != GEMMD_GPU_TILE_KIND_AUTO) {
    return GEMMD_EINVAL;
  }
  if (wide_n && !rows256_96) {
    if (k_splits > 1) return GEMMD_EINVAL;
    kind = GEMMD_TILE_ROWS128_WIDE;
  }
  // K parts are the split kind's alone (asked for with AUTO, they choose it).
  if (k_splits > 1 && kind != GEMMD_GPU_TILE_KIND_AUTO && kind != GEMMD_TILE_ROWS128_SPLIT) return GEMMD_ENOTSUP;
  if (k_splits > 1) kind = GEMMD_TILE_ROWS128_SPLIT;
  // A kind this build lacks: refused when forced, the first kind built when chosen.
  if (kind != GEMMD_GPU_TILE_KIND_AUTO && !GEMMD_WGMMA_BUILT(kind)) return GEMMD_ENOTSUP;
  if (kernel != GEMMD_GPU_KERNEL_WGMMA) return GEMMD_OK;  // the others need nothing
  if (hdr->sched_arena == 0 || hdr->sched_arena % GEMMD_GPU_TMAP_BYTES != 0) return GEMMD_EINVAL;
  auto *bytes = static_cast<uint8_t *>(host_batch);
  const auto *table = reinterpret_cast<const gemmd_group_params_t *>(bytes + sizeof *hdr);
  uint8_t *tmaps = bytes + hdr->sched_arena;
  auto *starts = reinterpret_cast<uint32_t *>(tmaps + (size_t)hdr->n_groups * kMapsPerGroup * GEMMD_GPU_TMAP_BYTES);
  const uint32_t sms = (uint32_t)sm_count();
  // The rule's configuration, where it decides the kind or the width.
  const bool auto_kind = kind == GEMMD_GPU_TILE_KIND_AUTO;
  const gemmd_gpu_tiles_t rule = auto_kind || tile_n == 0
                                     ? choose_config(table, hdr->n_groups, sms, auto_kind && k_splits != 1)
                                     : gemmd_gpu_tiles_t{GEMMD_TILE_KINDS, 0, 1};
  if (auto_kind) {
    kind = rule.kind;
    if (kind == GEMMD_TILE_ROWS128_WIDE && tile_n != 0) kind = GEMMD_TILE_ROWS128;  // a narrow width asked for
    if (!GEMMD_WGMMA_BUILT(kind)) kind = GEMMD_WGMMA_FALLBACK_KIND;
  }
  // No width asked for and the rule's kind: the rule's width (split-K's comes with its parts
  // from choose_split below).
  if (tile_n == 0 && kind == rule.kind && kind != GEMMD_TILE_ROWS128_SPLIT) tile_n = rule.tile_n;
  const uint32_t bm = kind_rows(kind);
  uint32_t parts = 1;
  if (kind == GEMMD_TILE_ROWS128_SPLIT && k_splits != 1) {
    const SplitChoice c = choose_split(table, hdr->n_groups, sms, tile_n, k_splits);
    if (k_splits > 1 && c.parts != k_splits) return GEMMD_EINVAL;  // its units would not fit one wave
    tile_n = c.tile_n;
    parts = c.parts;
  }
  if (tile_n == 0) {
    tile_n = kind == GEMMD_TILE_ROWS128_WIDE ? choose_wide(table, hdr->n_groups, sms).tile_n
                                             : choose_tile_n(table, hdr->n_groups, sms, bm);
  }
  std::call_once(g_encode_once, load_encode);
  if (g_encode == nullptr) return GEMMD_EDEVICE;
  // Paired ROWS256 tiles (GEMMD_WGMMA_JOINT_ROWS256): units of two column tiles; each CTA of
  // the pair loads half of A's rows (all of them from rank 0 for a group of fewer rows).
  const bool pair = GEMMD_WGMMA_JOINT_ROWS256 && kind == GEMMD_TILE_ROWS256;
  const uint32_t unit_n = pair ? 2 * tile_n : tile_n;
  uint64_t tiles = 0;
  for (uint32_t g = 0; g < hdr->n_groups; g++) {
    const gemmd_group_params_t &p = table[g];
    if (p.m == 0 || p.n == 0 || p.k == 0 || p.lda < p.k || p.ldb < p.k || p.lda % 16 || p.ldb % 16 || p.b_data % 16) {
      return GEMMD_EINVAL;
    }
    starts[g] = static_cast<uint32_t>(tiles);
    if (!runs_here(p)) continue;
    uint8_t *tm = tmaps + (size_t)g * kMapsPerGroup * GEMMD_GPU_TMAP_BYTES;
    const uint32_t a_box = pair && p.m >= bm ? bm / 2 : a_box_rows(p.m, bm), b_box = tile_n;
    if (!encode(tm, dev_batch + hdr->a_arena + p.a_offset, p.k, p.lda, p.m, a_box) ||
        !encode(tm + GEMMD_GPU_TMAP_BYTES, p.b_data, p.k, p.ldb, p.n, b_box)) {
      return GEMMD_EINVAL;
    }
    // D's map, with TMA stores, for the groups whose epilogue stages (the kernel's
    // condition: half output, rows a multiple of 16 bytes, D 16-byte aligned); the others
    // store directly.
    const uint64_t d_addr = dev_batch + hdr->d_arena + p.d_offset;
    if (kind == GEMMD_TILE_ROWS128_TMA_STORE && p.n % 8 == 0 && d_addr % 16 == 0 &&
        !encode_d(tm + 2 * GEMMD_GPU_TMAP_BYTES, d_addr, p.n, p.m, tile_n)) {
      return GEMMD_EINVAL;
    }
    tiles += (uint64_t)((p.m + bm - 1) / bm) * ((p.n + unit_n - 1) / unit_n);
    if (tiles > 0xFFFFFFFFull) return GEMMD_EINVAL;
  }
  starts[hdr->n_groups] = static_cast<uint32_t>(tiles);
  // Every group's tiles where all groups have as many (the kernel then finds a tile's
  // group by a division instead of a search), else 0.
  const uint32_t first_tiles = hdr->n_groups > 0 ? starts[1] : 0;
  bool uniform = hdr->n_groups > 0 && first_tiles > 0;
  for (uint32_t g = 0; uniform && g < hdr->n_groups; g++) uniform = starts[g + 1] - starts[g] == first_tiles;
  starts[hdr->n_groups + 1] = uniform ? first_tiles : 0;
  if (tiles * parts > 0xFFFFFFFFull) return GEMMD_EINVAL;
  hdr->total_tiles = static_cast<uint32_t>(tiles * parts);  // units: tiles × K parts
  hdr->k_splits = static_cast<uint8_t>(parts);
  hdr->tile_n = static_cast<uint16_t>(tile_n);
  hdr->tile_kind = static_cast<uint8_t>(kind);
  return GEMMD_OK;
}

namespace {

// Launches kKernel on `batch` (one CTA per SM); its shared-memory limit is set once, on
// the first launch (a thread-safe static).
template <void (*kKernel)(const uint8_t *, float *)>
int launch(const uint8_t *batch, float *ws, cudaStream_t stream) {
  static const bool ready =
      cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmemBytes) == cudaSuccess;
  if (!ready) return GEMMD_EDEVICE;
  kKernel<<<sm_count(), kThreads, kSmemBytes, stream>>>(batch, ws);
  return cudaGetLastError() == cudaSuccess ? GEMMD_OK : GEMMD_EDEVICE;
}

#if GEMMD_WGMMA_JOINT_ROWS256
// Launches the joint kernel in 2-CTA clusters, as many as fit at once (a GPC with an odd
// number of free SMs leaves one idle; a larger persistent grid would run a second wave).
int launch_joint_pairs(const uint8_t *batch, float *ws, cudaStream_t stream) {
  static int grid = 0;
  static std::once_flag once;
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = 2;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmemBytes;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  std::call_once(once, [&] {
    if (cudaFuncSetAttribute(wgmma_gemm_kernel_joint, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmemBytes) !=
        cudaSuccess) {
      return;
    }
    cudaLaunchConfig_t probe = cfg;
    probe.gridDim = dim3(2 * (unsigned)sm_count());
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, wgmma_gemm_kernel_joint, &probe) == cudaSuccess && clusters > 0) {
      grid = std::min(2 * clusters, sm_count() / 2 * 2);
    }
  });
  if (grid == 0) return GEMMD_EDEVICE;
  cfg.gridDim = dim3((unsigned)grid);
  cfg.stream = stream;
  if (cudaLaunchKernelEx(&cfg, wgmma_gemm_kernel_joint, batch, ws) != cudaSuccess) return GEMMD_EDEVICE;
  return cudaGetLastError() == cudaSuccess ? GEMMD_OK : GEMMD_EDEVICE;
}
#endif

// Launches kind K's kernel (named only where the kind is built: a template, so a build
// without the kind never instantiates its kernel).
template <typename K>
int launch_kind(const uint8_t *batch, float *ws, cudaStream_t stream) {
  return launch<wgmma_gemm_kernel<K>>(batch, ws, stream);
}

// Split-K's workspace for callers that pass none (benchmarks, tests: one stream), zeroed,
// made on first use. The engine gives each of its streams its own.
float *process_workspace() {
  static float *ws = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void *p = nullptr;
    const uint64_t bytes = split_ws_bytes((uint32_t)sm_count());
    if (cudaMalloc(&p, bytes) == cudaSuccess && cudaMemset(p, 0, bytes) == cudaSuccess &&
        cudaDeviceSynchronize() == cudaSuccess) {
      ws = static_cast<float *>(p);
    }
  });
  return ws;
}

}  // namespace

extern "C" uint64_t gemmd_gpu_gemm_workspace_bytes(void) { return split_ws_bytes((uint32_t)sm_count()); }

int gemmd_gpu_gemm_wgmma(const void *batch, uint32_t kinds, void *workspace, cudaStream_t stream) {
  const auto *b = static_cast<const uint8_t *>(batch);
  float *ws = static_cast<float *>(workspace);
  if (GEMMD_WGMMA_BUILT(GEMMD_TILE_ROWS128_SPLIT) && (kinds & (1u << GEMMD_TILE_ROWS128_SPLIT)) && ws == nullptr) {
    ws = process_workspace();
    if (ws == nullptr) return GEMMD_EDEVICE;
  }
  int rc = GEMMD_OK;
  if constexpr (GEMMD_WGMMA_BUILT(GEMMD_TILE_ROWS128)) {
    if (kinds & (1u << GEMMD_TILE_ROWS128)) rc = launch_kind<KindRows128>(b, ws, stream);
  }
  if constexpr (GEMMD_WGMMA_BUILT(GEMMD_TILE_ROWS128_TMA_STORE)) {
    if (rc == GEMMD_OK && (kinds & (1u << GEMMD_TILE_ROWS128_TMA_STORE))) {
      rc = launch_kind<KindRows128TmaStore>(b, ws, stream);
    }
  }
  if constexpr (GEMMD_WGMMA_BUILT(GEMMD_TILE_ROWS256)) {
    if (rc == GEMMD_OK && (kinds & (1u << GEMMD_TILE_ROWS256))) {
#if GEMMD_WGMMA_JOINT_ROWS256
      rc = launch_joint_pairs(b, ws, stream);
#else
      rc = launch_kind<KindRows256>(b, ws, stream);
#endif
    }
  }
  if constexpr (GEMMD_WGMMA_BUILT(GEMMD_TILE_ROWS128_SPLIT)) {
    if (rc == GEMMD_OK && (kinds & (1u << GEMMD_TILE_ROWS128_SPLIT))) {
      rc = launch_kind<KindRows128Split>(b, ws, stream);
    }
  }
  if constexpr (GEMMD_WGMMA_BUILT(GEMMD_TILE_ROWS128_WIDE)) {
    if (rc == GEMMD_OK && (kinds & (1u << GEMMD_TILE_ROWS128_WIDE))) {
      rc = launch_kind<KindRows128Wide>(b, ws, stream);
    }
  }
  return rc;
}
