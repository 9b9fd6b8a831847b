// The kernel benchmark: gemmd's grouped FP8 GEMM against cuBLASLt, side by side
// in one run, on the cases of the issue. Each case: fresh random FP8 inputs (E4M3, A with
// 1×128 scales, B with 128×128 scales, BF16 out), a check of sampled rows against the FP64
// reference for both, then timing with an L2 flush before every run (CUDA events, median).
//
//   gemm_bench [--kernel simple|wgmma] [--reps N] [--only SUBSTRING[,SUBSTRING...]] [--csv FILE]
//              [--tile-n 16,32,64,96,128,192] [--kinds rows128,tma_store,rows256,split,wide]
//              [--b-scales block|tensor]
//              [--splits 1,2,4,8] [--shape MxNxK,...] [--flush dirty|clean] [--stamps] [--sol] [--list]
//              [--protocol gemmd|deepgemm]
//
// --protocol deepgemm times as DeepGEMM's tests do (deep_gemm/testing/bench.py): an 8 GB
// memset before every run instead of 256 MiB, and inputs drawn from a normal distribution
// and quantized per block (kernels/quantize.h: A 1×128, B 128×128) instead of random FP8
// codes with random scales. Kernel time is still CUDA events around the launch, which the
// memset queued ahead of it leaves within a few µs of the profiler's kernel time. Every
// row, in both protocols, ends with the SM clock measured right after its timing
// ("clk=MHz", clock64 against %globaltimer).
//
// --only runs the cases whose name holds any of the substrings (say "dense 4096x,stacked");
// --list prints the names of the cases the arguments select and exits (no GPU needed).
// --shape replaces the issue's cases with dense ones of those shapes (say 1x128x128, one
// tile of one K block: the kernel's fixed cost).
// --b-scales tensor gives B one scale per tensor instead of 128×128 blocks (A keeps its
// 1×128 scales: gemmd normalizes every A to them), to hold block scaling to within 5% of
// per-tensor; cuBLASLt has no mode for that mix and is not run then.
// --tile-n also times the WGMMA kernel with each of those tile widths, and --kinds with
// each of those kinds of tile (gemmd_tile_kind_t; each checked against FP64 like the
// kernel's own choice): column "[sweep]", as width:us and kind/width:us; both together
// time each kind at each width (not the chosen kind at each width; "kind/width:-" where the
// kind lacks the width: 192 is ROWS128_WIDE's alone, 96 its and ROWS256's). Column "tn" is the
// width the kernel chose itself, "kind=" at the end of the row the kind ("parts=" after it:
// K parts per tile, where the kernel split K).
// --splits times 128-row tiles with K cut into each of those numbers of parts (split-K, the
// ROWS128_SPLIT kind; each checked against FP64): cells kS/width:us, "kS:-" where the
// last round's tiles × S do not fit the grid, "kS:not-built" where a build lacks it.
// --flush clean: the flush before every timed run also reads another 256 MiB (kernels/
// bench/l2_scrub.h), so L2 holds clean lines when the run starts; the default (dirty) flush is a
// 256 MiB memset alone, after which L2 is full of written lines the run's own reads must
// first write back to memory (like a torch cache.zero_() between runs).
// --stamps (the instrumented build, kernels/bench:gemm_bench_stamps): after each case's
// timing one more flushed run of the kernel's own choice, whose per-CTA stamps (kernels/
// gpu_gemm_bench.h: gemmd_gpu_gemm_stamps) print as a "stamps" line: per point, the median over
// the CTAs of the time since the CTA's own start, and how the CTAs' starts and ends spread.
// --sol: after cuBLASLt, times the case's memory floor under the same flush (kernels/
// bench/l2_scrub.h: gemmd_stream_floor): one plain launch that reads as many bytes as A, B and
// their scales and writes as many as D, nothing computed; column "sol=" at the end of the
// row (and sol_us in the CSV). Ours / sol is how far a case is from what moving its bytes
// costs on this GPU, launch and first-byte latency included.
// (default kernel: wgmma)
//
// Prints µs, TFLOPS, GB/s (A + B + scales + D, each once), ours/cuBLASLt speed ratio and
// "prep=cold/warm": the host time gemmd_gpu_gemm_prepare takes for the batch (tile choice,
// tensor maps, prefix sums; paid by the engine on every batch), with every tensor map new
// and with them remembered.
// cuBLASLt runs each group as its own call; a batch of groups is captured once as a CUDA
// graph and replayed, the fastest way to issue many of them.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/bench/l2_scrub.h"
#include "kernels/cublaslt_gemm.h"
#include "kernels/cuda_check.h"
#include "kernels/errors.h"
#include "kernels/gpu_gemm.h"
#include "kernels/gpu_gemm_bench.h"
#include "kernels/quantize.h"
#include "kernels/ref_gemm.h"
#include "kernels/testutil.h"

namespace {

// The tile configuration a batch ran with (its header's, after the prepare).
struct TileChoice {
  uint32_t kind;      // gemmd_tile_kind_t
  uint32_t tile_n;    // columns per tile
  uint32_t k_splits;  // K parts per tile
};

template <typename T>
T *dev_alloc(size_t n) {
  void *p = nullptr;
  CUDA_OK(cudaMalloc(&p, n * sizeof(T) + 16));
  return static_cast<T *>(p);
}

uint64_t align256(uint64_t x) { return (x + 255) & ~uint64_t(255); }

struct Shape {
  uint32_t m, n, k;
};

struct Case {
  std::string name;
  std::vector<Shape> groups;
  bool share_weight;  // every group uses the first group's weight (stacked rows)
};

// Random FP8 E4M3 codes (no NaN) and positive scales near 2^-4..2^4.
void random_fp8(test_rng_t *rng, std::vector<uint8_t> &v, size_t n) {
  v.resize(n);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t r = test_rand(rng);
    for (size_t j = 0; j < 8 && i + j < n; j++, r >>= 8) {
      uint8_t c = static_cast<uint8_t>(r);
      if ((c & 0x7F) == 0x7F) c ^= 0x01;
      v[i + j] = c;
    }
  }
}

void random_scales(test_rng_t *rng, std::vector<float> &v, size_t n) {
  v.resize(n);
  for (size_t i = 0; i < n; i++) v[i] = static_cast<float>(std::ldexp(0.5 + test_uniform(rng), -6));
}

// --protocol deepgemm's inputs: N(0, 1) values quantized to E4M3 with `layout`'s scales.
void randn_quantized(test_rng_t *rng, std::vector<uint8_t> &codes, std::vector<float> &scales, uint32_t rows,
                     uint32_t cols, gemmd_scale_layout_t layout) {
  std::vector<float> v((size_t)rows * cols);
  for (float &x : v) x = static_cast<float>(test_normal(rng));
  codes.resize(v.size());
  scales.resize(gemmd_scale_count(layout, rows, cols));
  const gemmd_operand_t op = {rows, cols, cols, GEMMD_DTYPE_FP32, v.data(), GEMMD_SCALE_NONE, nullptr};
  TEST_CHECK(gemmd_quantize_threads(&op, GEMMD_DTYPE_FP8_E4M3, layout, codes.data(), scales.data(), 0) == GEMMD_OK,
             "quantizing the inputs");
}

struct Weight {
  uint32_t n, k;
  gemmd_scale_layout_t layout;  // of `scales`: 128×128 blocks or one per tensor
  std::vector<uint8_t> host;
  std::vector<float> scales;
  uint8_t *dev = nullptr;
  float *dev_scales = nullptr;
  float *dev_scales_lt = nullptr;  // cuBLASLt layout
};

struct Timing {
  double us = 0, err_max = 0;
  bool ok = true;
};

// The median of v (0 for none).
template <typename T>
T median(std::vector<T> v) {
  if (v.empty()) return T{};
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

struct Bench {
  cudaStream_t stream;
  cudaEvent_t t0, t1;
  uint8_t *flush = nullptr, *scrub = nullptr;  // scrub: --flush clean's read buffer
  size_t flush_bytes = 256u << 20;
  bool clean_flush = false;
  gemmd_cublaslt_t *lt = nullptr;
  gemmd_gpu_kernel_t kernel = GEMMD_GPU_KERNEL_WGMMA;
  int reps = 20;
  std::vector<uint32_t> sweep;  // --tile-n: widths to time besides the kernel's own choice
  std::vector<uint32_t> kinds;  // --kinds: kinds of tile to time besides the kernel's own choice
  std::vector<uint32_t> splits; // --splits: K parts per tile to time besides the kernel's own choice
  gemmd_scale_layout_t b_layout = GEMMD_SCALE_BLOCK_128X128;  // --b-scales
  bool stamps = false;  // --stamps
  bool sol = false;     // --sol
  bool deepgemm = false;  // --protocol deepgemm
  int sms = 0;          // the GPU's SMs (--sol's grid)

  void flush_l2() {
    CUDA_OK(cudaMemsetAsync(flush, 0, flush_bytes, stream));
    if (clean_flush) CUDA_OK(gemmd_l2_read_all(scrub, flush_bytes, stream));
  }

  // Median µs of fn() over reps runs, each after an L2 flush.
  template <typename F>
  float time_us(F fn) {
    fn();  // warm up
    CUDA_OK(cudaStreamSynchronize(stream));
    std::vector<float> ms;
    for (int i = 0; i < reps; i++) {
      flush_l2();
      CUDA_OK(cudaEventRecord(t0, stream));
      fn();
      CUDA_OK(cudaEventRecord(t1, stream));
      CUDA_OK(cudaEventSynchronize(t1));
      float x;
      CUDA_OK(cudaEventElapsedTime(&x, t0, t1));
      ms.push_back(x);
    }
    return median(ms) * 1000.0f;
  }
};

// --stamps: the WGMMA timeline of the run print_stamps made (ctas × 2 warpgroups × blocks ×
// 2 halves × 3 values, gemmd_gpu_gemm_wg_stamps), as one line.
void print_wgmma_timeline(uint32_t ctas, uint32_t blocks) {
  // The WGMMA timeline of the ring's last round of blocks (the CTAs' last tile): each
  // batch's issue-to-done clocks, and how far apart the two warpgroups' batches of the same
  // block and half complete (one after the other: about a batch's run; together: near 0).
  std::vector<uint64_t> wg((size_t)ctas * 2 * blocks * 2 * 3);
  if (wg.empty() || gemmd_gpu_gemm_wg_stamps(wg.data(), &ctas, &blocks) != GEMMD_OK) return;
  auto at = [&](uint32_t c, uint32_t w, uint32_t b, uint32_t h, uint32_t what) {
    return wg[((((size_t)c * 2 + w) * blocks + b) * 2 + h) * 3 + what];
  };
  // Per warpgroup and block: the full-barrier wait (its start to half 0's issue), and the
  // block period (one block's half-0 issue to the next's, in issue order).
  std::vector<double> waits, periods;
  for (uint32_t c = 0; c < ctas; c++) {
    for (uint32_t w = 0; w < 2; w++) {
      std::vector<uint64_t> issues;
      for (uint32_t b = 0; b < blocks; b++) {
        const uint64_t i = at(c, w, b, 0, 0), wb = at(c, w, b, 0, 2);
        if (i == 0) continue;
        issues.push_back(i);
        if (wb != 0 && wb <= i) waits.push_back((double)(i - wb));
      }
      std::sort(issues.begin(), issues.end());
      for (size_t k = 1; k < issues.size(); k++) periods.push_back((double)(issues[k] - issues[k - 1]));
    }
  }
  std::vector<double> run, apart;
  std::string cta0;
  for (uint32_t c = 0; c < ctas; c++) {
    uint64_t t0 = UINT64_MAX;
    for (uint32_t w = 0; w < 2; w++)
      for (uint32_t b = 0; b < blocks; b++)
        for (uint32_t h = 0; h < 2; h++)
          if (at(c, w, b, h, 0) != 0) t0 = std::min(t0, at(c, w, b, h, 0));
    for (uint32_t b = 0; b < blocks; b++) {
      for (uint32_t h = 0; h < 2; h++) {
        for (uint32_t w = 0; w < 2; w++) {
          const uint64_t i = at(c, w, b, h, 0), d = at(c, w, b, h, 1);
          if (i == 0 || d < i) continue;
          run.push_back((double)(d - i));
          if (c == 0) {
            char cell[64];
            const uint64_t x = at(c, w, b, h, 2);  // half 0: its wait began; half 1: the release
            if (x != 0) {
              std::snprintf(cell, sizeof cell, h == 0 ? " w%ub%uwait:%llu" : " w%ub%urel:%llu", w, b,
                            (unsigned long long)(x >= t0 ? x - t0 : 0));
              cta0 += cell;
            }
            std::snprintf(cell, sizeof cell, " w%ub%uh%u:%llu-%llu", w, b, h, (unsigned long long)(i - t0),
                          (unsigned long long)(d - t0));
            cta0 += cell;
          }
        }
        const uint64_t d0 = at(c, 0, b, h, 1), d1 = at(c, 1, b, h, 1);
        if (d0 != 0 && d1 != 0) apart.push_back(d0 > d1 ? (double)(d0 - d1) : (double)(d1 - d0));
      }
    }
  }
  if (run.empty()) return;
  std::printf("  wgmma clk: issue-to-done median %.0f over %zu batches; warpgroups' same batch done %.0f apart "
              "(median); full-barrier wait to issue %.0f, block period %.0f (medians); CTA 0:%s\n",
              median(run), run.size(), median(apart), median(waits), median(periods), cta0.c_str());
}

// --stamps: one flushed run of launch(), then its stamps as one line (see the top).
template <typename F>
void print_stamps(Bench &B, F launch) {
  uint32_t ctas = 0, points = 0;
  if (gemmd_gpu_gemm_stamps(nullptr, &ctas, &points) != GEMMD_OK) {
    std::printf("  stamps: not in this build (kernels/bench:gemm_bench_stamps has them)\n");
    return;
  }
  uint32_t wg_ctas = 0, wg_blocks = 0;  // (zeroed here; read after the run)
  if (gemmd_gpu_gemm_wg_stamps(nullptr, &wg_ctas, &wg_blocks) != GEMMD_OK) wg_ctas = wg_blocks = 0;
  B.flush_l2();
  launch();
  CUDA_OK(cudaStreamSynchronize(B.stream));
  std::vector<uint64_t> st((size_t)ctas * points * 2);
  TEST_CHECK(gemmd_gpu_gemm_stamps(st.data(), &ctas, &points) == GEMMD_OK, "stamps");
  auto ns = [&](uint32_t c, uint32_t p) { return st[((size_t)c * points + p) * 2]; };
  auto clk = [&](uint32_t c, uint32_t p) { return st[((size_t)c * points + p) * 2 + 1]; };
  uint64_t first = UINT64_MAX, last_entry = 0, end_min = UINT64_MAX, end_max = 0;
  uint32_t n = 0;
  for (uint32_t c = 0; c < ctas; c++) {
    if (ns(c, 0) == 0) continue;
    n++;
    first = std::min(first, ns(c, 0));
    last_entry = std::max(last_entry, ns(c, 0));
  }
  std::string line = "  stamps ns since each CTA's start (median over " + std::to_string(n) + " CTAs):";
  std::string cycles = " | clk:";
  for (uint32_t p = 1; p < points; p++) {
    std::vector<double> d, dc;
    for (uint32_t c = 0; c < ctas; c++) {
      if (ns(c, 0) == 0 || ns(c, p) == 0) continue;
      d.push_back((double)(ns(c, p) - ns(c, 0)));
      dc.push_back((double)(clk(c, p) - clk(c, 0)));
      if (p == points - 1) {
        end_min = std::min(end_min, ns(c, p));
        end_max = std::max(end_max, ns(c, p));
      }
    }
    char cell[64];
    if (d.empty()) {
      std::snprintf(cell, sizeof cell, " %s -", gemmd_gpu_gemm_stamp_name(p));
      line += cell;
      continue;
    }
    std::snprintf(cell, sizeof cell, " %s %.0f", gemmd_gpu_gemm_stamp_name(p), median(d));
    line += cell;
    std::snprintf(cell, sizeof cell, " %.0f", median(dc));
    cycles += cell;
  }
  char tail[160];
  std::snprintf(tail, sizeof tail, " | starts spread %llu ns; last tiles end %llu..%llu ns after the first start",
                (unsigned long long)(n ? last_entry - first : 0),
                (unsigned long long)(end_max ? end_min - first : 0), (unsigned long long)(end_max ? end_max - first : 0));
  std::printf("%s%s%s\n", line.c_str(), tail, cycles.c_str());
  print_wgmma_timeline(wg_ctas, wg_blocks);
}

// FP64 check of a few rows of group g's D (BF16, dense m×n) against the inputs.
double check_rows(const std::vector<uint8_t> &a, const std::vector<float> &sa, const Weight &w,
                  uint32_t m, const std::vector<uint16_t> &d) {
  const uint32_t rows[] = {0, m / 2, m - 1};
  double worst = 0;
  for (uint32_t r : rows) {
    const gemmd_operand_t ar = {1, w.k, w.k, GEMMD_DTYPE_FP8_E4M3, a.data() + (size_t)r * w.k,
                                GEMMD_SCALE_BLOCK_1X128, sa.data() + (size_t)r * ((w.k + 127) / 128)};
    const gemmd_operand_t b = {w.n, w.k, w.k, GEMMD_DTYPE_FP8_E4M3, w.host.data(), w.layout, w.scales.data()};
    std::vector<double> ref(w.n);
    gemmd_ref_gemm_f64(&ar, &b, ref.data());
    const double e = gemmd_rel_frobenius_error(ref.data(), d.data() + (size_t)r * w.n, GEMMD_DTYPE_BF16, w.n);
    worst = std::max(worst, e);
  }
  return worst;
}

void run_case(Bench &B, test_rng_t *rng, const Case &c, FILE *csv) {
  const uint32_t ng = static_cast<uint32_t>(c.groups.size());
  // Weights: one per group, or one shared.
  std::vector<Weight> weights(c.share_weight ? 1 : ng);
  for (uint32_t i = 0; i < weights.size(); i++) {
    Weight &w = weights[i];
    w.n = c.groups[i].n;
    w.k = c.groups[i].k;
    w.layout = B.b_layout;
    if (B.deepgemm) {
      randn_quantized(rng, w.host, w.scales, w.n, w.k, w.layout);
    } else {
      random_fp8(rng, w.host, (size_t)w.n * w.k);
      random_scales(rng, w.scales, gemmd_scale_count(w.layout, w.n, w.k));
    }
    w.dev = dev_alloc<uint8_t>(w.host.size());
    w.dev_scales = dev_alloc<float>(w.scales.size());
    w.dev_scales_lt = dev_alloc<float>(gemmd_cublaslt_b_scale_count(w.n, w.k));
    CUDA_OK(cudaMemcpy(w.dev, w.host.data(), w.host.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(w.dev_scales, w.scales.data(), w.scales.size() * 4, cudaMemcpyHostToDevice));
    if (w.layout == GEMMD_SCALE_BLOCK_128X128) {
      gemmd_cublaslt_convert_b_scales(w.dev_scales, w.n, w.k, w.dev_scales_lt, B.stream);
    }
  }
  // The batch buffer: header, table, A, SA, D.
  std::vector<gemmd_group_params_t> table(ng);
  std::vector<std::vector<uint8_t>> a(ng);
  std::vector<std::vector<float>> sa(ng);
  uint64_t a_bytes = 0, sa_count = 0, d_bytes = 0;
  uint64_t read_bytes = 0, write_bytes = 0;  // what the GEMM must read and write, each once
  double flops = 0;
  for (uint32_t i = 0; i < ng; i++) {
    const Shape &s = c.groups[i];
    const Weight &w = weights[c.share_weight ? 0 : i];
    if (B.deepgemm) {
      randn_quantized(rng, a[i], sa[i], s.m, s.k, GEMMD_SCALE_BLOCK_1X128);
    } else {
      random_fp8(rng, a[i], (size_t)s.m * s.k);
      random_scales(rng, sa[i], gemmd_group_sa_count(s.m, s.k));
    }
    gemmd_group_params_t &p = table[i];
    std::memset(&p, 0, sizeof p);
    p.m = s.m, p.n = s.n, p.k = s.k;
    p.a_dtype = p.b_dtype = GEMMD_DTYPE_FP8_E4M3;
    p.b_layout = B.b_layout;
    p.out_dtype = GEMMD_DTYPE_BF16;
    p.lda = p.ldb = s.k;
    p.a_offset = a_bytes;
    p.sa_offset = sa_count;
    p.d_offset = d_bytes;
    p.b_data = reinterpret_cast<uint64_t>(w.dev);
    p.b_scales = reinterpret_cast<uint64_t>(w.dev_scales);
    a_bytes = align256(a_bytes + (uint64_t)s.m * s.k);
    sa_count += gemmd_group_sa_count(s.m, s.k);
    d_bytes = align256(d_bytes + (uint64_t)s.m * s.n * 2);
    flops += 2.0 * s.m * s.n * s.k;
    read_bytes += (uint64_t)s.m * s.k + 4ull * gemmd_group_sa_count(s.m, s.k);
    if (!c.share_weight || i == 0) read_bytes += (uint64_t)s.n * s.k + 4ull * w.scales.size();
    write_bytes += 2ull * s.m * s.n;
  }
  const double bytes = (double)(read_bytes + write_bytes);  // the TB/s columns' bytes
  gemmd_batch_header_t h;
  std::memset(&h, 0, sizeof h);
  h.n_groups = ng;
  uint64_t off = align256(sizeof h + ng * sizeof(gemmd_group_params_t));
  h.sched_arena = off;
  off = align256(off + gemmd_gpu_gemm_sched_bytes(ng));
  h.a_arena = off;
  off = align256(off + a_bytes);
  h.sa_arena = off;
  off = align256(off + 4 * sa_count);
  h.raw_arena = h.b_arena = off;
  h.d_arena = off;
  const uint64_t total = align256(off + d_bytes);
  std::vector<uint8_t> host(total, 0);
  std::memcpy(host.data(), &h, sizeof h);
  std::memcpy(host.data() + sizeof h, table.data(), ng * sizeof(gemmd_group_params_t));
  for (uint32_t i = 0; i < ng; i++) {
    std::memcpy(&host[h.a_arena + table[i].a_offset], a[i].data(), a[i].size());
    std::memcpy(&host[h.sa_arena + 4 * table[i].sa_offset], sa[i].data(), sa[i].size() * 4);
  }
  uint8_t *batch = dev_alloc<uint8_t>(total);

  // Ours with tiles of `kind` (GEMMD_GPU_TILE_KIND_AUTO: the kernel's own choice),
  // `tile_n` columns and K in `k_splits` parts (0: the kernel's own choice): prepare,
  // upload, check, then time. `chosen` gets the tile configuration the batch ran with.
  auto run_ours = [&](uint32_t kind, uint32_t tile_n, uint32_t k_splits, bool check, TileChoice *chosen) {
    Timing t;
    TEST_CHECK(gemmd_gpu_gemm_prepare_split(B.kernel, host.data(), reinterpret_cast<uint64_t>(batch), kind, tile_n,
                                            k_splits) == GEMMD_OK,
               "prepare, kind %u tile_n %u k_splits %u", kind, tile_n, k_splits);
    const auto *hdr = reinterpret_cast<const gemmd_batch_header_t *>(host.data());
    *chosen = TileChoice{hdr->tile_kind, hdr->tile_n, hdr->k_splits};
    CUDA_OK(cudaMemcpy(batch, host.data(), total, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(batch + h.d_arena, 0xFF, d_bytes));
    // the batch's own launches (its tile kind's kernel), as the engine's graph has them
    const uint32_t parts = gemmd_gpu_gemm_prepared_parts(host.data());
    TEST_CHECK(gemmd_gpu_gemm_parts_run(B.kernel, batch, parts, B.stream) == GEMMD_OK, "launch");
    CUDA_OK(cudaStreamSynchronize(B.stream));
    for (uint32_t i = 0; check && i < ng; i = i == 0 && ng > 1 ? ng - 1 : ng) {  // first and last group
      std::vector<uint16_t> d((size_t)table[i].m * table[i].n);
      CUDA_OK(cudaMemcpy(d.data(), batch + h.d_arena + table[i].d_offset, d.size() * 2, cudaMemcpyDeviceToHost));
      t.err_max = std::max(t.err_max, check_rows(a[i], sa[i], weights[c.share_weight ? 0 : i], table[i].m, d));
    }
    t.ok = t.err_max <= 1e-2;
    t.us = B.time_us([&] { gemmd_gpu_gemm_parts_run(B.kernel, batch, parts, B.stream); });
    return t;
  };
  Timing ours, lt;
  TileChoice tiles = {};
  std::string sweep;
  for (uint32_t tn : B.kinds.empty() ? B.sweep : std::vector<uint32_t>{}) {
    const Timing t = run_ours(GEMMD_GPU_TILE_KIND_AUTO, tn, 0, false, &tiles);  // gpu_gemm_test checks every width
    char cell[48];
    std::snprintf(cell, sizeof cell, " %u:%.1f", tn, t.us);
    sweep += cell;
  }
  for (uint32_t kind : B.kinds) {
    if (gemmd_gpu_gemm_prepare_tiles(B.kernel, host.data(), reinterpret_cast<uint64_t>(batch), kind, 0) ==
        GEMMD_ENOTSUP) {
      sweep += std::string(" ") + gemmd_tile_kind_name(kind) + ":not-built";
      continue;
    }
    // With --tile-n, the kind at each of those widths; else at its own.
    for (uint32_t tn : B.sweep.empty() ? std::vector<uint32_t>{0} : B.sweep) {
      if (gemmd_gpu_gemm_prepare_tiles(B.kernel, host.data(), reinterpret_cast<uint64_t>(batch), kind, tn) !=
          GEMMD_OK) {  // a width the kind lacks (see --tile-n above)
        sweep += std::string(" ") + gemmd_tile_kind_name(kind) + "/" + std::to_string(tn) + ":-";
        continue;
      }
      const Timing t = run_ours(kind, tn, 0, true, &tiles);
      char cell[64];
      std::snprintf(cell, sizeof cell, " %s/%u:%.1f%s", gemmd_tile_kind_name(kind), tiles.tile_n, t.us,
                    t.ok ? "" : "(FAIL)");
      sweep += cell;
    }
  }
  for (uint32_t parts : B.splits) {
    char cell[64];
    const int rc = gemmd_gpu_gemm_prepare_split(B.kernel, host.data(), reinterpret_cast<uint64_t>(batch),
                                                GEMMD_GPU_TILE_KIND_AUTO, 0, parts);
    if (rc != GEMMD_OK) {
      std::snprintf(cell, sizeof cell, " k%u:%s", parts, rc == GEMMD_ENOTSUP ? "not-built" : "-");
    } else {
      const Timing t = run_ours(GEMMD_GPU_TILE_KIND_AUTO, 0, parts, true, &tiles);
      std::snprintf(cell, sizeof cell, " k%u/%u:%.1f%s", parts, tiles.tile_n, t.us, t.ok ? "" : "(FAIL)");
    }
    sweep += cell;
  }
  ours = run_ours(GEMMD_GPU_TILE_KIND_AUTO, 0, 0, true, &tiles);  // last: the batch holds the chosen configuration
  const uint32_t tile_n = tiles.tile_n;
  const uint32_t parts = reinterpret_cast<const gemmd_batch_header_t *>(host.data())->k_splits;
  char parts_note[24] = "";
  if (parts > 1) std::snprintf(parts_note, sizeof parts_note, " parts=%u", parts);
  // The host's share of every batch the engine runs: gemmd_gpu_gemm_prepare (tile choice,
  // tensor maps, prefix sums) on this batch, median of 11 calls with every tensor map new
  // (cold: forgotten first) and of 11 with them remembered from the call before (warm: a
  // batch of registered weights in a slot whose layout repeats). Each call leaves the
  // batch as the last run had it.
  auto prepare_us = [&](bool cold) {
    std::vector<double> us(11);
    for (double &t : us) {
      if (cold) gemmd_gpu_gemm_forget_maps();
      const auto t0 = std::chrono::steady_clock::now();
      TEST_CHECK(gemmd_gpu_gemm_prepare(B.kernel, host.data(), reinterpret_cast<uint64_t>(batch)) == GEMMD_OK,
                 "prepare");
      t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    }
    std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
    return us[us.size() / 2];
  };
  const double prep_cold = prepare_us(true), prep_warm = prepare_us(false);

  // cuBLASLt: each group its own call, on converted A scales; D in its own buffer.
  std::vector<float *> sa_lt(ng);
  uint16_t *d_lt = dev_alloc<uint16_t>(d_bytes / 2 + 1);
  std::vector<gemmd_cublaslt_call_t> calls(ng);
  for (uint32_t i = 0; i < ng; i++) {
    const gemmd_group_params_t &p = table[i];
    sa_lt[i] = dev_alloc<float>(gemmd_group_sa_count(p.m, p.k));
    gemmd_cublaslt_convert_a_scales(reinterpret_cast<const float *>(batch + h.sa_arena) + p.sa_offset, p.m, p.k,
                                    sa_lt[i], B.stream);
    const Weight &w = weights[c.share_weight ? 0 : i];
    calls[i] = gemmd_cublaslt_call_t{p.m, p.n, p.k, GEMMD_DTYPE_FP8_E4M3, GEMMD_DTYPE_FP8_E4M3,
                                     GEMMD_DTYPE_BF16, GEMMD_SCALE_BLOCK_1X128, GEMMD_SCALE_BLOCK_128X128,
                                     batch + h.a_arena + p.a_offset, p.lda, w.dev, p.ldb, sa_lt[i],
                                     w.dev_scales_lt, reinterpret_cast<uint8_t *>(d_lt) + p.d_offset};
  }
  // cuBLASLt has no 1×128 A with per-tensor B: only block scales are compared.
  int lt_rc = B.b_layout == GEMMD_SCALE_BLOCK_128X128 ? GEMMD_OK : GEMMD_ENOTSUP;
  for (uint32_t i = 0; i < ng && lt_rc == GEMMD_OK; i++) lt_rc = gemmd_cublaslt_gemm(B.lt, &calls[i], B.stream);
  CUDA_OK(cudaStreamSynchronize(B.stream));
  if (lt_rc == GEMMD_OK) {
    for (uint32_t i = 0; i < ng; i = i == 0 && ng > 1 ? ng - 1 : ng) {  // first and last group
      std::vector<uint16_t> d((size_t)table[i].m * table[i].n);
      CUDA_OK(cudaMemcpy(d.data(), reinterpret_cast<uint8_t *>(d_lt) + table[i].d_offset, d.size() * 2,
                         cudaMemcpyDeviceToHost));
      lt.err_max = std::max(lt.err_max, check_rows(a[i], sa[i], weights[c.share_weight ? 0 : i], table[i].m, d));
    }
    lt.ok = lt.err_max <= 1e-2;
    if (ng == 1) {
      lt.us = B.time_us([&] { gemmd_cublaslt_gemm(B.lt, &calls[0], B.stream); });
    } else {
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CUDA_OK(cudaStreamBeginCapture(B.stream, cudaStreamCaptureModeThreadLocal));
      for (uint32_t i = 0; i < ng; i++) gemmd_cublaslt_gemm(B.lt, &calls[i], B.stream);
      CUDA_OK(cudaStreamEndCapture(B.stream, &graph));
      CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
      lt.us = B.time_us([&] { CUDA_OK(cudaGraphLaunch(exec, B.stream)); });
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
  } else {
    lt.ok = false;
  }
  // --sol: the same bytes moved by a plain read-and-write launch, under the same flush.
  float sol_us = 0;
  std::string sol_cell;
  if (B.sol) {
    const uint64_t rb = (read_bytes + 15) / 16 * 16, wb = (write_bytes + 15) / 16 * 16;
    uint8_t *src = dev_alloc<uint8_t>(rb);
    uint8_t *dst = dev_alloc<uint8_t>(wb);
    CUDA_OK(cudaMemset(src, 0x3C, rb));
    sol_us = B.time_us([&] { CUDA_OK(gemmd_stream_floor(src, rb, dst, wb, B.sms, B.stream)); });
    cudaFree(src);
    cudaFree(dst);
    char cell[48];
    std::snprintf(cell, sizeof cell, " sol=%.1fus", sol_us);
    sol_cell = cell;
  }
  const double tf_ours = flops / (ours.us * 1e-6) * 1e-12, tf_lt = lt.us > 0 ? flops / (lt.us * 1e-6) * 1e-12 : 0;
  const double clk = gemmd_sm_clock_mhz(200000, B.stream);  // right after the timed runs
  std::printf("%-34s %4u %9.1f %8.1f %8.2f %6s | %9.1f %8.1f %8.2f %6s | %6.2fx prep=%.1f/%.1fus clk=%.0f kind=%s%s%s%s\n",
              c.name.c_str(), tile_n,
              ours.us, tf_ours,
              bytes / (ours.us * 1e-6) * 1e-12, ours.ok ? "ok" : "FAIL", lt.us, tf_lt,
              lt.us > 0 ? bytes / (lt.us * 1e-6) * 1e-12 : 0.0,
              lt_rc != GEMMD_OK ? gemmd_strerror(lt_rc) : (lt.ok ? "ok" : "FAIL"),
              lt.us > 0 ? lt.us / ours.us : 0.0, prep_cold, prep_warm, clk, gemmd_tile_kind_name(tiles.kind),
              parts_note, sweep.c_str(), sol_cell.c_str());
  if (B.stamps) {
    const uint32_t run_parts = gemmd_gpu_gemm_prepared_parts(host.data());
    print_stamps(B, [&] { gemmd_gpu_gemm_parts_run(B.kernel, batch, run_parts, B.stream); });
  }
  std::fflush(stdout);
  if (csv != nullptr) {
    std::fprintf(csv, "%s,%s,%u,%.2f,%.1f,%.3f,%.3g,%.2f,%.1f,%.3f,%.3g,%.3f,%.2f,%.2f,%s,%.2f,%.0f\n", c.name.c_str(),
                 gemmd_tile_kind_name(tiles.kind), tile_n, ours.us,
                 tf_ours,
                 bytes / (ours.us * 1e-6) * 1e-12, ours.err_max, lt.us, tf_lt,
                 lt.us > 0 ? bytes / (lt.us * 1e-6) * 1e-12 : 0.0, lt.err_max, lt.us > 0 ? lt.us / ours.us : 0.0,
                 prep_cold, prep_warm, sweep.c_str(), sol_us, clk);
  }
  for (float *p : sa_lt) cudaFree(p);
  cudaFree(d_lt);
  cudaFree(batch);
  for (Weight &w : weights) {
    cudaFree(w.dev);
    cudaFree(w.dev_scales);
    cudaFree(w.dev_scales_lt);
  }
}

// Dense cases "MxNxK,MxNxK,..."; empty if the list does not parse.
std::vector<Case> shape_cases(const char *list) {
  std::vector<Case> v;
  for (const char *p = list; *p != '\0';) {
    unsigned m = 0, n = 0, k = 0;
    int used = 0;
    const unsigned most = 1u << 17;  // and no sign: sscanf's %u would take "-1"
    if (*p == '-' || std::sscanf(p, "%ux%ux%u%n", &m, &n, &k, &used) != 3 || m == 0 || n == 0 || k == 0 ||
        m > most || n > most || k > most || (p[used] != '\0' && p[used] != ',')) {
      return {};
    }
    char name[64];
    std::snprintf(name, sizeof name, "dense %ux%ux%u", m, n, k);
    v.push_back({name, {{m, n, k}}, false});
    p += used + (p[used] == ',' ? 1 : 0);
  }
  return v;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  const Shape nk[] = {{0, 2112, 7168}, {0, 24576, 1536}, {0, 32768, 512},
                      {0, 7168, 16384}, {0, 4096, 7168}, {0, 7168, 2048}};
  for (uint32_t m : {1u, 8u, 16u, 64u, 128u, 4096u}) {
    for (const Shape &s : nk) {
      char name[64];
      std::snprintf(name, sizeof name, "dense %ux%ux%u", m, s.n, s.k);
      v.push_back({name, {{m, s.n, s.k}}, false});
    }
  }
  v.push_back({"dense 8192x8192x8192", {{8192, 8192, 8192}}, false});
  for (const Shape &w : {Shape{0, 4096, 7168}, Shape{0, 7168, 2048}}) {
    for (auto gm : {std::make_pair(4u, 8192u), std::make_pair(8u, 4096u)}) {
      char name[64];
      std::snprintf(name, sizeof name, "stacked %ux%u %ux%u", gm.first, gm.second, w.n, w.k);
      v.push_back({name, std::vector<Shape>(gm.first, Shape{gm.second, w.n, w.k}), false});
    }
  }
  v.push_back({"decode 64x8 own 4096x4096", std::vector<Shape>(64, Shape{8, 4096, 4096}), false});
  v.push_back({"decode 128x4 own 2048x2048", std::vector<Shape>(128, Shape{4, 2048, 2048}), false});
  return v;
}

// Whether `name` holds any of the comma-separated substrings of `list`.
bool matches_any(const std::string &name, const char *list) {
  for (const char *p = list;;) {
    const char *comma = std::strchr(p, ',');
    const std::string part(p, comma ? comma - p : std::strlen(p));
    if (!part.empty() && name.find(part) != std::string::npos) return true;
    if (!comma) return false;
    p = comma + 1;
  }
}

}  // namespace

int main(int argc, char **argv) {
  Bench B;
  const char *only = nullptr, *csv_path = nullptr;
  std::vector<Case> todo = cases();
  bool list = false;
  static const char *const kValued[] = {"--reps", "--only", "--csv", "--shape", "--tile-n", "--kinds", "--b-scales",
                                        "--kernel", "--splits", "--flush", "--protocol"};
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--list")) {
      list = true;
      continue;
    }
    if (!std::strcmp(argv[i], "--stamps")) {
      B.stamps = true;
      continue;
    }
    if (!std::strcmp(argv[i], "--sol")) {
      B.sol = true;
      continue;
    }
    bool known = false;
    for (const char *flag : kValued) known = known || !std::strcmp(argv[i], flag);
    if (!known || i + 1 >= argc) {
      std::fprintf(stderr, "gemm_bench: %s '%s' (see the usage at the top of kernels/bench/gemm_bench.cc)\n",
                   known ? "no value after" : "unknown argument", argv[i]);
      return 2;
    }
    i++;  // argv[i - 1] is the flag, argv[i] its value
    if (!std::strcmp(argv[i - 1], "--reps")) {
      char *end = nullptr;
      const long reps = std::strtol(argv[i], &end, 10);
      if (end == argv[i] || *end != '\0' || reps < 1 || reps > 100000) {
        std::fprintf(stderr, "gemm_bench: --reps takes a count of 1..100000, not '%s'\n", argv[i]);
        return 2;
      }
      B.reps = (int)reps;
    }
    if (!std::strcmp(argv[i - 1], "--only")) only = argv[i];
    if (!std::strcmp(argv[i - 1], "--flush")) {
      if (std::strcmp(argv[i], "dirty") != 0 && std::strcmp(argv[i], "clean") != 0) {
        std::fprintf(stderr, "gemm_bench: --flush takes dirty or clean, not '%s'\n", argv[i]);
        return 2;
      }
      B.clean_flush = !std::strcmp(argv[i], "clean");
    }
    if (!std::strcmp(argv[i - 1], "--protocol")) {
      if (std::strcmp(argv[i], "gemmd") != 0 && std::strcmp(argv[i], "deepgemm") != 0) {
        std::fprintf(stderr, "gemm_bench: --protocol takes gemmd or deepgemm, not '%s'\n", argv[i]);
        return 2;
      }
      B.deepgemm = !std::strcmp(argv[i], "deepgemm");
      if (B.deepgemm) B.flush_bytes = (size_t)8 << 30;
    }
    if (!std::strcmp(argv[i - 1], "--csv")) csv_path = argv[i];
    if (!std::strcmp(argv[i - 1], "--shape")) {
      todo = shape_cases(argv[i]);
      if (todo.empty()) {
        std::fprintf(stderr, "gemm_bench: --shape takes MxNxK[,MxNxK...], sizes 1..131072, not '%s'\n",
                     argv[i]);
        return 2;
      }
    }
    if (!std::strcmp(argv[i - 1], "--tile-n")) {
      for (const char *p = argv[i]; *p != '\0';) {
        char *end = nullptr;
        const unsigned long tn = std::strtoul(p, &end, 10);
        if (end == p || (tn != 16 && tn != 32 && tn != 64 && tn != 96 && tn != 128 && tn != 192)) {
          std::fprintf(stderr, "gemm_bench: --tile-n takes a list of 16, 32, 64, 96, 128, 192, not '%s'\n", argv[i]);
          return 2;
        }
        B.sweep.push_back((uint32_t)tn);
        p = *end == ',' ? end + 1 : end;
      }
    }
    if (!std::strcmp(argv[i - 1], "--splits")) {
      for (const char *p = argv[i]; *p != '\0';) {
        char *end = nullptr;
        const unsigned long parts = std::strtoul(p, &end, 10);
        if (end == p || parts < 1 || parts > GEMMD_GPU_MAX_K_SPLITS || (*end != ',' && *end != '\0')) {
          std::fprintf(stderr, "gemm_bench: --splits takes a list of 1..%d, not '%s'\n", GEMMD_GPU_MAX_K_SPLITS,
                       argv[i]);
          return 2;
        }
        B.splits.push_back((uint32_t)parts);
        p = *end == ',' ? end + 1 : end;
      }
    }
    if (!std::strcmp(argv[i - 1], "--kinds")) {
      for (const char *p = argv[i]; *p != '\0';) {
        const char *end = std::strchr(p, ',');
        const std::string name(p, end ? end - p : std::strlen(p));
        uint32_t kind = 0;
        while (kind < GEMMD_TILE_KINDS && name != gemmd_tile_kind_name(kind)) kind++;
        if (kind == GEMMD_TILE_KINDS) {
          std::fprintf(stderr, "gemm_bench: --kinds takes a list of");
          for (uint32_t k = 0; k < GEMMD_TILE_KINDS; k++) {
            std::fprintf(stderr, "%s %s", k ? "," : "", gemmd_tile_kind_name(k));
          }
          std::fprintf(stderr, ", not '%s'\n", argv[i]);
          return 2;
        }
        B.kinds.push_back(kind);
        p = end ? end + 1 : p + name.size();
      }
    }
    if (!std::strcmp(argv[i - 1], "--b-scales")) {
      if (!std::strcmp(argv[i], "block")) {
        B.b_layout = GEMMD_SCALE_BLOCK_128X128;
      } else if (!std::strcmp(argv[i], "tensor")) {
        B.b_layout = GEMMD_SCALE_TENSOR;
      } else {
        std::fprintf(stderr, "gemm_bench: --b-scales must be block or tensor, not '%s'\n", argv[i]);
        return 2;
      }
    }
    if (!std::strcmp(argv[i - 1], "--kernel")) {
      if (!std::strcmp(argv[i], "simple")) {
        B.kernel = GEMMD_GPU_KERNEL_SIMPLE;
      } else if (!std::strcmp(argv[i], "wgmma")) {
        B.kernel = GEMMD_GPU_KERNEL_WGMMA;
      } else {
        std::fprintf(stderr, "gemm_bench: --kernel must be simple or wgmma, not '%s'\n", argv[i]);
        return 2;
      }
    }
  }
  if (only) {
    std::vector<Case> picked;
    for (const Case &c : todo) {
      if (matches_any(c.name, only)) picked.push_back(c);
    }
    if (picked.empty()) {
      std::fprintf(stderr, "gemm_bench: no case matches --only '%s' (--list shows them)\n", only);
      return 2;
    }
    todo = picked;
  }
  if (list) {  // the cases these arguments select, without a GPU
    for (const Case &c : todo) std::printf("%s\n", c.name.c_str());
    return 0;
  }
  test_rng_t rng = {test_seed("gemm_bench")};
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  B.sms = prop.multiProcessorCount;
  std::printf("# %s, %d SMs, L2 %d MB; kernel %s; E4M3 A 1x128 x E4M3 B %s -> BF16; median of %d, %s%s\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20,
              B.kernel == GEMMD_GPU_KERNEL_SIMPLE ? "simple" : "wgmma",
              B.b_layout == GEMMD_SCALE_TENSOR ? "per-tensor" : "128x128", B.reps,
              B.deepgemm ? "protocol deepgemm: 8 GB memset before each run, randn inputs quantized per block"
                         : "256 MiB L2 flush before each run",
              B.clean_flush ? " (clean: L2 left holding read lines)" : "");
  CUDA_OK(cudaStreamCreate(&B.stream));
  CUDA_OK(cudaEventCreate(&B.t0));
  CUDA_OK(cudaEventCreate(&B.t1));
  B.flush = dev_alloc<uint8_t>(B.flush_bytes);
  if (B.clean_flush) {
    B.scrub = dev_alloc<uint8_t>(B.flush_bytes);
    CUDA_OK(cudaMemset(B.scrub, 0, B.flush_bytes));
  }
  TEST_CHECK(gemmd_cublaslt_create(64u << 20, &B.lt) == GEMMD_OK, "cublasLt");
  FILE *csv = csv_path ? std::fopen(csv_path, "w") : nullptr;
  if (csv) std::fprintf(csv, "case,kind,tile_n,us,tflops,tbps,err,lt_us,lt_tflops,lt_tbps,lt_err,speedup,prep_cold_us,prep_warm_us,sweep,sol_us,sm_clock_mhz\n");
  std::printf("%-34s %4s %9s %8s %8s %6s | %9s %8s %8s %6s | %7s%s\n", "case", "tn", "us", "TFLOPS", "TB/s",
              "check", "lt_us", "lt_TF", "lt_TB/s", "check", "vs lt",
              B.sweep.empty() && B.kinds.empty() && B.splits.empty() ? ""
                                                                      : "  [sweep: tile_n:us, kind/tile_n:us, kparts/tile_n:us]");
  for (const Case &c : todo) run_case(B, &rng, c, csv);
  if (csv) std::fclose(csv);
  gemmd_cublaslt_destroy(B.lt);
  return 0;
}
