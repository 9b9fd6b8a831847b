// The grouped GEMM on the GPU (gpu_gemm.h), every kernel (simple; wgmma with every tile
// width) on the same batches, against the FP64 reference, on fresh random inputs: every
// A dtype (FP8 as is; BF16/FP16/FP32 quantized on the GPU by the batch's jobs) × B dtype
// × B scale layout × output dtype, ragged M/N/K, batches of 1 to 256 groups of different
// weights, a decode batch, outputs poisoned first. Needs the H200 (tag gpu).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/errors.h"
#include "kernels/gpu_gemm.h"
#include "kernels/gpu_gemm_bench.h"
#include "kernels/quantize.h"
#include "kernels/ref_gemm.h"
#include "kernels/testutil.h"

namespace {

// Largest error seen: [simple, wgmma variants][FP32 output, half outputs].
double g_worst[2][2];
int g_kinds_not_built;  // forced tile kinds skipped (GEMMD_ENOTSUP), batches × kinds
// Split-K variants (ROWS128_SPLIT with 2..8 parts): run, skipped as not built (builds
// without the kind), skipped because the last round's tiles × parts exceed the grid.
int g_splits_run, g_splits_not_built, g_splits_no_fit;
double g_worst_loose;  // largest ‖D − ref‖ / ‖|A|·|B|ᵀ‖ of the WGMMA kernel on extreme codes

double norm2(const std::vector<double> &v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

uint64_t align256(uint64_t x) { return (x + 255) & ~uint64_t(255); }

struct Group {
  uint32_t m, n, k;
  gemmd_dtype_t a_src, a_fp8, b_dtype, out;
  gemmd_scale_layout_t a_layout, b_layout;
  test_matrix_t a_in;  // what the caller sent
  test_matrix_t b;     // the weight (FP8) as the device holds it
  std::vector<uint8_t> a_q;  // A as the GEMM reads it (FP8), for the reference
  std::vector<float> a_s;    // its 1x128 scales
};

// One batch: builds the device buffer, runs quantization and the GEMM, checks every group.
//
// The WGMMA kernel's FP8 tensor cores accumulate with about 14 bits (docs/bench/kernels.md),
// so when the groups were made with test_fp8_extreme_codes (`extreme`: codes up to the
// format's maximum next to tiny ones, whose products cancel) its half outputs are held to
// ‖D − ref‖ ≤ kExtremeBound·‖|A|·|B|ᵀ‖ instead of docs/api.md's relative 1e-2; on ordinary values
// every kernel is held to docs/api.md §1. FP32 outputs never run on WGMMA (gpu_gemm.cu) and keep
// 1e-4.
//
// kExtremeBound = 1/4: the small products next to a huge one are truncated inside the
// WGMMA, so the error grows with K and with how many small terms meet each huge one; seen
// on 3×300×4096 groups: 0.0067, 0.035, 0.062 and 0.146 of ‖|A|·|B|ᵀ‖, the last in every
// tile kind alike (docs/bench/kernels.md). A
// wrong decoding of the extreme codes errs by about the huge products themselves (~1), so
// it still fails.
constexpr double kExtremeBound = 0.25;
int run_batch(test_rng_t *rng, std::vector<Group> &gs, const char *what, bool extreme) {
  const uint32_t ng = static_cast<uint32_t>(gs.size());
  // Layout: header, table, jobs, then A, SA, raw, B, D arenas.
  uint64_t a_bytes = 0, sa_count = 0, raw_bytes = 0, b_bytes = 0, d_bytes = 0;
  std::vector<gemmd_group_params_t> table(ng);
  std::vector<gemmd_quant_job_t> jobs;
  std::vector<uint64_t> raw_off(ng), b_off(ng), bs_off(ng);
  for (uint32_t i = 0; i < ng; i++) {
    Group &g = gs[i];
    gemmd_group_params_t &p = table[i];
    std::memset(&p, 0, sizeof p);
    p.m = g.m, p.n = g.n, p.k = g.k;
    p.a_dtype = static_cast<uint8_t>(g.a_fp8);
    p.b_dtype = static_cast<uint8_t>(g.b_dtype);
    p.b_layout = static_cast<uint8_t>(g.b_layout);
    p.out_dtype = static_cast<uint8_t>(g.out);
    p.lda = (g.k + 15) / 16 * 16;
    p.ldb = (g.k + 15) / 16 * 16;
    p.a_offset = a_bytes;
    p.sa_offset = sa_count;
    p.d_offset = d_bytes;
    a_bytes = align256(a_bytes + (uint64_t)g.m * p.lda);
    sa_count += gemmd_group_sa_count(g.m, g.k);
    d_bytes = align256(d_bytes + (uint64_t)g.m * g.n * gemmd_dtype_size(g.out));
    if (!gemmd_dtype_is_fp8(g.a_src)) {
      raw_off[i] = raw_bytes;
      raw_bytes = align256(raw_bytes + (uint64_t)g.m * g.k * gemmd_dtype_size(g.a_src));
      gemmd_quant_job_t j;
      std::memset(&j, 0, sizeof j);
      j.src_offset = raw_off[i];
      j.a_offset = p.a_offset;
      j.sa_offset = p.sa_offset;
      j.rows = g.m;
      j.cols = g.k;
      j.lda = p.lda;
      j.src_dtype = static_cast<uint8_t>(g.a_src);
      jobs.push_back(j);
    }
    b_off[i] = b_bytes;
    b_bytes = align256(b_bytes + (uint64_t)g.n * p.ldb);
    bs_off[i] = b_bytes;
    b_bytes = align256(b_bytes + 4 * gemmd_scale_count(g.b_layout, g.n, g.k) + 4);
  }
  gemmd_batch_header_t h;
  std::memset(&h, 0, sizeof h);
  h.n_groups = ng;
  h.n_quant_jobs = static_cast<uint32_t>(jobs.size());
  uint64_t off = align256(sizeof h + ng * sizeof(gemmd_group_params_t) + jobs.size() * sizeof(gemmd_quant_job_t));
  h.sched_arena = off;
  off = align256(off + gemmd_gpu_gemm_sched_bytes(ng));
  h.a_arena = off;
  off = align256(off + a_bytes);
  h.sa_arena = off;
  off = align256(off + 4 * sa_count);
  h.raw_arena = off;
  off = align256(off + raw_bytes);
  h.b_arena = off;
  off = align256(off + b_bytes);
  h.d_arena = off;
  const uint64_t total = align256(off + d_bytes);

  std::vector<uint8_t> host(total, 0);
  uint8_t *dev = nullptr;
  CUDA_OK(cudaMalloc(reinterpret_cast<void **>(&dev), total));
  for (uint32_t i = 0; i < ng; i++) {
    Group &g = gs[i];
    gemmd_group_params_t &p = table[i];
    p.b_data = reinterpret_cast<uint64_t>(dev + h.b_arena + b_off[i]);
    p.b_scales = reinterpret_cast<uint64_t>(dev + h.b_arena + bs_off[i]);
    for (uint32_t r = 0; r < g.n; r++) {
      std::memcpy(&host[h.b_arena + b_off[i] + (uint64_t)r * p.ldb],
                  static_cast<uint8_t *>(g.b.data) + (uint64_t)r * g.k, g.k);
    }
    std::memcpy(&host[h.b_arena + bs_off[i]], g.b.scales, 4 * gemmd_scale_count(g.b_layout, g.n, g.k));
    // A: the CPU quantizer gives the reference bits (the GPU's are checked equal elsewhere).
    g.a_q.assign((size_t)g.m * g.k, 0);
    g.a_s.assign(gemmd_group_sa_count(g.m, g.k) + 1, 0.0f);
    if (gemmd_dtype_is_fp8(g.a_src)) {
      gemmd_operand_t src = g.a_in.op;
      // FP8 A with any layout: the daemon expands its scales to 1x128; do the same here.
      std::memcpy(g.a_q.data(), g.a_in.data, g.a_q.size());
      const uint32_t kb = (g.k + 127) / 128;
      for (uint32_t r = 0; r < g.m; r++)
        for (uint32_t b = 0; b < kb; b++) g.a_s[(size_t)r * kb + b] = gemmd_operand_scale(&src, r, b * 128);
      for (uint32_t r = 0; r < g.m; r++) {
        std::memcpy(&host[h.a_arena + p.a_offset + (uint64_t)r * p.lda], g.a_q.data() + (size_t)r * g.k, g.k);
      }
      std::memcpy(&host[h.sa_arena + 4 * p.sa_offset], g.a_s.data(), 4 * gemmd_group_sa_count(g.m, g.k));
    } else {
      gemmd_quantize(&g.a_in.op, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_1X128, g.a_q.data(), g.a_s.data());
      std::memcpy(&host[h.raw_arena + raw_off[i]], g.a_in.data, (size_t)g.m * g.k * gemmd_dtype_size(g.a_src));
    }
  }
  std::memcpy(host.data(), &h, sizeof h);
  std::memcpy(host.data() + sizeof h, table.data(), ng * sizeof(gemmd_group_params_t));
  if (!jobs.empty()) {
    std::memcpy(host.data() + sizeof h + ng * sizeof(gemmd_group_params_t), jobs.data(),
                jobs.size() * sizeof(gemmd_quant_job_t));
  }
  CUDA_OK(cudaMemcpy(dev, host.data(), total, cudaMemcpyHostToDevice));
  TEST_CHECK(gemmd_gpu_quantize_jobs(dev, 0) == GEMMD_OK, "quantize launch");
  std::vector<uint8_t> back(total);
  int bad = 0;
  std::vector<std::vector<double>> refs(ng);
  std::vector<double> abs_ratio(ng, 1.0);  // ‖|A|·|B|ᵀ‖ / ‖A·Bᵀ‖ (extreme batches)
  for (uint32_t i = 0; i < ng; i++) {
    const Group &g = gs[i];
    const gemmd_operand_t a = {g.m, g.k, g.k, g.a_fp8, const_cast<uint8_t *>(g.a_q.data()), GEMMD_SCALE_BLOCK_1X128,
                               const_cast<float *>(g.a_s.data())};
    refs[i].resize((size_t)g.m * g.n);
    gemmd_ref_gemm_f64(&a, &g.b.op, refs[i].data());
    if (extreme) {
      // ‖|A|·|B|ᵀ‖: the same product on magnitudes (sign bits cleared; scales are positive).
      std::vector<uint8_t> a_abs(g.a_q), b_abs((uint8_t *)g.b.data, (uint8_t *)g.b.data + (size_t)g.n * g.k);
      for (uint8_t &c : a_abs) c &= 0x7F;
      for (uint8_t &c : b_abs) c &= 0x7F;
      gemmd_operand_t aa = a, bb = g.b.op;
      aa.data = a_abs.data();
      bb.data = b_abs.data();
      std::vector<double> mag((size_t)g.m * g.n);
      gemmd_ref_gemm_f64(&aa, &bb, mag.data());
      abs_ratio[i] = norm2(mag) / std::max(norm2(refs[i]), 1e-300);
    }
  }
  // Every kernel on the same quantized batch, each into a freshly poisoned D; the WGMMA
  // kernel with its own tile width and then with each one forced (the host part is
  // prepared again and only the header, table and scheduling area re-uploaded, since the
  // A arena now holds the GPU's quantization).
  struct Variant {
    gemmd_gpu_kernel_t kernel;
    uint32_t kind, tile_n, k_splits;
    std::string name;
  };
  std::vector<Variant> variants = {{GEMMD_GPU_KERNEL_SIMPLE, GEMMD_GPU_TILE_KIND_AUTO, 0, 0, "simple"},
                                   {GEMMD_GPU_KERNEL_WGMMA, GEMMD_GPU_TILE_KIND_AUTO, 0, 0, "wgmma"}};
  for (uint32_t kind = 0; kind < GEMMD_TILE_KINDS; kind++) {
    // ROWS128_WIDE has the widths that do not divide 128 (a tile's columns may cross a row
    // of B's 128×128 scales); the others 16..128, and ROWS256 96 in builds with r256w96
    // (the others refuse it: GEMMD_ENOTSUP, counted as a kind not built).
    const bool wide = kind == GEMMD_TILE_ROWS128_WIDE;
    std::vector<uint32_t> widths = wide ? std::vector<uint32_t>{96, 192} : std::vector<uint32_t>{16, 32, 64, 128};
    if (kind == GEMMD_TILE_ROWS256) widths.push_back(96);
    for (uint32_t tn : widths) {
      variants.push_back({GEMMD_GPU_KERNEL_WGMMA, kind, tn, 1,
                          std::string("wgmma/") + gemmd_tile_kind_name(kind) + "/" + std::to_string(tn)});
    }
  }
  // Split-K: K in 2, 3, 4 or 8 parts (uneven and empty parts included: a tile of 3 K blocks
  // in 4 or 8 parts), one after the other on the same workspace, so a part counter left
  // non-zero by one launch would break the next.
  for (uint32_t parts : {2u, 3u, 4u, 8u}) {
    for (uint32_t tn : {0u, 16u, 128u}) {
      variants.push_back({GEMMD_GPU_KERNEL_WGMMA, GEMMD_TILE_ROWS128_SPLIT, tn, parts,
                          "wgmma/split/" + std::to_string(tn) + "/k" + std::to_string(parts)});
    }
  }
  for (const Variant &var : variants) {
    const gemmd_gpu_kernel_t kernel = var.kernel;
    const char *kname = var.name.c_str();
    if (kernel == GEMMD_GPU_KERNEL_WGMMA) {
      const int rc = gemmd_gpu_gemm_prepare_split(kernel, host.data(), reinterpret_cast<uint64_t>(dev), var.kind,
                                                  var.tile_n, var.k_splits);
      if (var.k_splits > 1 && (rc == GEMMD_ENOTSUP || rc == GEMMD_EINVAL)) {
        (rc == GEMMD_ENOTSUP ? g_splits_not_built : g_splits_no_fit)++;
        continue;
      }
      if (rc == GEMMD_ENOTSUP) {  // a kind this build does not compile in (gemmd's build has them all)
        g_kinds_not_built++;
        continue;
      }
      TEST_CHECK(rc == GEMMD_OK, "prepare %s", kname);
      if (var.k_splits > 1) {
        TEST_CHECK(reinterpret_cast<const gemmd_batch_header_t *>(host.data())->k_splits == var.k_splits,
                   "%s: the batch is split as asked", kname);
        g_splits_run++;
      }
      CUDA_OK(cudaMemcpy(dev, host.data(), h.a_arena, cudaMemcpyHostToDevice));
    }
    CUDA_OK(cudaMemset(dev + h.d_arena, 0xFF, d_bytes));  // poison: NaN in every output dtype
    if (kernel == GEMMD_GPU_KERNEL_WGMMA) {
      // The other kinds' kernels leave a batch of this kind alone (gemmd_gpu_gemm launches
      // them all; the engine's graph only the batch's own).
      const uint32_t own = gemmd_gpu_gemm_prepared_parts(host.data());
      const uint32_t others = GEMMD_GPU_PARTS_ALL & ~own & ~uint32_t(GEMMD_GPU_PART_FP32_OUT);
      TEST_CHECK(gemmd_gpu_gemm_parts_run(kernel, dev, others, 0) == GEMMD_OK, "other kinds' launch");
      CUDA_OK(cudaDeviceSynchronize());
      std::vector<uint8_t> d_back(d_bytes);
      CUDA_OK(cudaMemcpy(d_back.data(), dev + h.d_arena, d_bytes, cudaMemcpyDeviceToHost));
      if (std::any_of(d_back.begin(), d_back.end(), [](uint8_t x) { return x != 0xFF; })) {
        std::fprintf(stderr, "%s: another kind's kernel wrote D\n", kname);
        bad++;
      }
    }
    if (var.k_splits > 1) {
      // Split batches on a workspace of the caller's, as the engine runs them (one per
      // stream); the others on the library's own (gemmd_gpu_gemm).
      static void *ws = nullptr;
      if (ws == nullptr) {
        CUDA_OK(cudaMalloc(&ws, gemmd_gpu_gemm_workspace_bytes()));
        CUDA_OK(cudaMemset(ws, 0, gemmd_gpu_gemm_workspace_bytes()));
      }
      TEST_CHECK(gemmd_gpu_gemm_parts_run_ws(kernel, dev, gemmd_gpu_gemm_prepared_parts(host.data()), ws, 0) ==
                     GEMMD_OK,
                 "split gemm launch");
    } else {
      TEST_CHECK(gemmd_gpu_gemm(kernel, dev, 0) == GEMMD_OK, "gemm launch");
    }
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(back.data(), dev, total, cudaMemcpyDeviceToHost));
    for (uint32_t i = 0; i < ng; i++) {
      Group &g = gs[i];
      const gemmd_group_params_t &p = table[i];
      // GPU quantization must match the CPU's bits.
      if (kernel == GEMMD_GPU_KERNEL_SIMPLE && !gemmd_dtype_is_fp8(g.a_src)) {
        for (uint32_t r = 0; r < g.m; r++) {
          if (std::memcmp(&back[h.a_arena + p.a_offset + (uint64_t)r * p.lda], g.a_q.data() + (size_t)r * g.k,
                          g.k)) {
            std::fprintf(stderr, "%s group %u: GPU-quantized A row %u differs from the CPU's\n", what, i, r);
            bad++;
            break;
          }
        }
      }
      std::vector<double> ref = refs[i];
      const bool loose = extreme && kernel == GEMMD_GPU_KERNEL_WGMMA && g.out != GEMMD_DTYPE_FP32;
      if (g.out == GEMMD_DTYPE_FP16) {
        // Loose: an element near or past FP16's range is left out without asking it to
        // overflow with the reference's sign. Its error may be a sizable share of |A|·|B|ᵀ
        // there, enough to flip a sum of huge cancelling products: seed 1796118472610397921
        // gives a reference of 149270 that the WGMMA kernel computes as −inf (2026-12-01,
        // every build; docs/bench/kernels.md).
        test_fp16_overflow_mask(ref.data(), reinterpret_cast<const uint16_t *>(&back[h.d_arena + p.d_offset]),
                                ref.size(), loose ? 0.5 : 1e-3, !loose,
                                (std::string(what) + ", " + kname + ", group " + std::to_string(i)).c_str());
      }
      const double err = gemmd_rel_frobenius_error(ref.data(), &back[h.d_arena + p.d_offset], g.out, ref.size());
      // Loose: limited-precision accumulation errs relative to the magnitudes summed, not
      // to the sum: ‖D − ref‖ ≤ kExtremeBound·‖|A|·|B|ᵀ‖ (docs/api.md's 1e-2 where that is less).
      const double tol =
          g.out == GEMMD_DTYPE_FP32 ? 1e-4 : loose ? std::max(1e-2, kExtremeBound * abs_ratio[i]) : 1e-2;
      double &worst = g_worst[var.kernel == GEMMD_GPU_KERNEL_SIMPLE ? 0 : 1][g.out == GEMMD_DTYPE_FP32 ? 0 : 1];
      if (!loose) worst = std::max(worst, err);
      if (loose) g_worst_loose = std::max(g_worst_loose, err / abs_ratio[i]);
      if (!(err <= tol)) {
        std::fprintf(stderr,
                     "%s [%s] group %u: %ux%ux%u A=%s(%s) B=%s/%s out=%s: error %.3g > %g (%.3g of ||A|.|B|^T||)\n",
                     what, kname, i, g.m, g.n, g.k, gemmd_dtype_name(g.a_src), gemmd_scale_layout_name(g.a_layout),
                     gemmd_dtype_name(g.b_dtype), gemmd_scale_layout_name(g.b_layout), gemmd_dtype_name(g.out), err,
                     tol, err / abs_ratio[i]);
        bad++;
      }
    }
  }
  CUDA_OK(cudaFree(dev));
  for (Group &g : gs) {
    test_matrix_free(&g.a_in);
    test_matrix_free(&g.b);
  }
  return bad;
}

// A batch made for split-K: run_batch, and a failure too where a build with every kind ran
// fewer than `least` of its split variants (the rest are skipped where their units do not
// fit the grid), since the batch would then no longer test what it is for.
int run_split_batch(test_rng_t *rng, std::vector<Group> &gs, const char *what, int least) {
  const int before = g_splits_run;
  int bad = run_batch(rng, gs, what, false);
  if (g_splits_not_built == 0 && g_splits_run - before < least) {
    std::fprintf(stderr, "%s batch: %d split variants ran, %d at least should\n", what, g_splits_run - before, least);
    bad++;
  }
  return bad;
}

Group make_group(test_rng_t *rng, uint32_t m, uint32_t n, uint32_t k, gemmd_dtype_t a_src,
                 gemmd_scale_layout_t a_layout, gemmd_dtype_t b_dtype, gemmd_scale_layout_t b_layout,
                 gemmd_dtype_t out) {
  Group g;
  g.m = m, g.n = n, g.k = k;
  g.a_src = a_src;
  g.a_fp8 = gemmd_dtype_is_fp8(a_src) ? a_src : GEMMD_DTYPE_FP8_E4M3;
  g.a_layout = gemmd_dtype_is_fp8(a_src) ? a_layout : GEMMD_SCALE_NONE;
  g.b_dtype = b_dtype;
  g.b_layout = b_layout;
  g.out = out;
  test_matrix_random(&g.a_in, rng, m, k, a_src, g.a_layout, 1.0);
  test_matrix_random(&g.b, rng, n, k, b_dtype, b_layout, 1.0);
  return g;
}

}  // namespace

int main() {
  test_rng_t rng = {test_seed("gpu_gemm_test")};
  int bad = 0, groups = 0;
  const gemmd_dtype_t a_srcs[] = {GEMMD_DTYPE_FP8_E4M3, GEMMD_DTYPE_FP8_E5M2, GEMMD_DTYPE_BF16,
                                  GEMMD_DTYPE_FP16, GEMMD_DTYPE_FP32};
  const gemmd_scale_layout_t a_layouts[] = {GEMMD_SCALE_NONE, GEMMD_SCALE_TENSOR, GEMMD_SCALE_ROW,
                                            GEMMD_SCALE_BLOCK_1X128};
  const gemmd_dtype_t b_dtypes[] = {GEMMD_DTYPE_FP8_E4M3, GEMMD_DTYPE_FP8_E5M2};
  const gemmd_scale_layout_t b_layouts[] = {GEMMD_SCALE_NONE, GEMMD_SCALE_TENSOR, GEMMD_SCALE_ROW,
                                            GEMMD_SCALE_BLOCK_128X128};
  const gemmd_dtype_t outs[] = {GEMMD_DTYPE_BF16, GEMMD_DTYPE_FP16, GEMMD_DTYPE_FP32};
  const uint32_t shapes[][3] = {{1, 1, 1},     {7, 129, 1000}, {64, 64, 128}, {65, 130, 257},
                                {200, 33, 16}, {3, 300, 4096}, {129, 257, 384}};
  // Every combination as one batch of many groups (each its own weight): first with
  // extreme FP8 codes among the values, then on ordinary values.
  auto combinations = [&] {
    std::vector<Group> all;
    int s = 0;
    for (auto a : a_srcs)
      for (auto al : a_layouts)
        for (auto b : b_dtypes)
          for (auto bl : b_layouts)
            for (auto o : outs) {
              if (!gemmd_dtype_is_fp8(a) && al != GEMMD_SCALE_NONE) continue;
              const uint32_t *sh = shapes[s++ % 7];
              all.push_back(make_group(&rng, sh[0], sh[1], sh[2], a, al, b, bl, o));
            }
    return all;
  };
  std::vector<Group> all = combinations();
  groups += static_cast<int>(all.size());
  bad += run_batch(&rng, all, "combinations, extreme codes", true);
  test_fp8_extreme_codes = 0;
  std::vector<Group> plain = combinations();
  groups += static_cast<int>(plain.size());
  bad += run_batch(&rng, plain, "combinations", false);
  // Batches of 1..256 groups of random shapes and types.
  for (uint32_t ng : {1u, 2u, 16u, 128u, 256u}) {
    std::vector<Group> gs;
    for (uint32_t i = 0; i < ng; i++) {
      gs.push_back(make_group(&rng, test_range(&rng, 1, 96), test_range(&rng, 1, 300),
                              test_range(&rng, 1, 700), a_srcs[test_range(&rng, 0, 4)], GEMMD_SCALE_NONE,
                              b_dtypes[test_range(&rng, 0, 1)], b_layouts[test_range(&rng, 0, 3)],
                              outs[test_range(&rng, 0, 2)]));
    }
    groups += static_cast<int>(ng);
    char what[32];
    std::snprintf(what, sizeof what, "batch of %u", ng);
    bad += run_batch(&rng, gs, what, false);
  }
  // A decode batch: every group at most 16 rows, so the WGMMA kernel runs its short-A ring.
  std::vector<Group> decode;
  for (uint32_t i = 0; i < 48; i++) {
    decode.push_back(make_group(&rng, test_range(&rng, 1, 16), test_range(&rng, 1, 600), test_range(&rng, 1, 1500),
                                a_srcs[test_range(&rng, 0, 4)], GEMMD_SCALE_NONE, b_dtypes[test_range(&rng, 0, 1)],
                                b_layouts[test_range(&rng, 0, 3)], outs[test_range(&rng, 0, 1)]));
  }
  groups += static_cast<int>(decode.size());
  bad += run_batch(&rng, decode, "decode batch", false);
  // Batches whose groups all have as many tiles at every kind and width (the same N, rows
  // within one 128-row tile, or within 129..256): the kernel finds a tile's group by a
  // division there instead of a search.
  for (uint32_t rows_lo : {1u, 129u}) {
    std::vector<Group> uniform;
    for (uint32_t i = 0; i < 24; i++) {
      uniform.push_back(make_group(&rng, test_range(&rng, rows_lo, rows_lo + 120), 200, test_range(&rng, 1, 1500),
                                   a_srcs[test_range(&rng, 0, 4)], GEMMD_SCALE_NONE, b_dtypes[test_range(&rng, 0, 1)],
                                   b_layouts[test_range(&rng, 0, 3)], outs[test_range(&rng, 0, 1)]));
    }
    groups += static_cast<int>(uniform.size());
    bad += run_batch(&rng, uniform, rows_lo == 1 ? "uniform batch (1 row tile)" : "uniform batch (2 row tiles)", false);
  }
  // Split-K's batch: few tiles (7 of 128 columns: × 8 parts fit one wave; 36 of 16 fit 2
  // or 3 parts), K of 3 to 32 blocks, a group whose second 128-row tile has rows for one
  // warpgroup only, FP32 beside it. Every split variant of 0 (the kernel's) or 128 columns
  // must run here: 8 of them.
  std::vector<Group> split;
  split.push_back(make_group(&rng, 100, 256, 4096, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_1X128,
                             GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_128X128, GEMMD_DTYPE_BF16));
  split.push_back(make_group(&rng, 7, 129, 1000, GEMMD_DTYPE_BF16, GEMMD_SCALE_NONE, GEMMD_DTYPE_FP8_E5M2,
                             GEMMD_SCALE_ROW, GEMMD_DTYPE_FP16));
  split.push_back(make_group(&rng, 130, 64, 2048, GEMMD_DTYPE_FP8_E5M2, GEMMD_SCALE_ROW, GEMMD_DTYPE_FP8_E4M3,
                             GEMMD_SCALE_TENSOR, GEMMD_DTYPE_BF16));
  split.push_back(make_group(&rng, 33, 40, 300, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_1X128,
                             GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_128X128, GEMMD_DTYPE_BF16));
  split.push_back(make_group(&rng, 20, 48, 512, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_1X128,
                             GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_128X128, GEMMD_DTYPE_FP32));
  groups += static_cast<int>(split.size());
  bad += run_split_batch(&rng, split, "split-K", 8);
  // Split-K's tail: more tiles than the grid (1100 x 2100 is 153 tiles of 128 columns, one
  // round of 132 SMs and 21 more; beside a group of 6, found by a search), so the full
  // rounds' tiles run whole and only the last round's are split, with K of 8 and 6 blocks
  // in parts that do not divide them.
  std::vector<Group> tail;
  tail.push_back(make_group(&rng, 1100, 2100, 1024, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_1X128,
                            GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_128X128, GEMMD_DTYPE_BF16));
  tail.push_back(make_group(&rng, 130, 300, 700, GEMMD_DTYPE_FP8_E5M2, GEMMD_SCALE_ROW, GEMMD_DTYPE_FP8_E4M3,
                            GEMMD_SCALE_ROW, GEMMD_DTYPE_FP16));
  groups += static_cast<int>(tail.size());
  bad += run_split_batch(&rng, tail, "split-K tail", 3);
  std::vector<Group> big;
  big.push_back(make_group(&rng, 256, 512, 16384, GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_1X128,
                           GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_128X128, GEMMD_DTYPE_FP32));
  big.push_back(make_group(&rng, 1000, 1000, 2000, GEMMD_DTYPE_BF16, GEMMD_SCALE_NONE,
                           GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_128X128, GEMMD_DTYPE_BF16));
  groups += 2;
  bad += run_batch(&rng, big, "large", false);
  // 256-row tiles run in pairs of column tiles (2-CTA clusters sharing A's rows): groups of
  // 256 rows or more (each CTA loads half of A; ragged last tiles) beside groups of fewer
  // (one CTA loads all of A), with odd column-tile counts (the last pair's second tile
  // repeats its first: 300 x 520 is odd at every width) and even ones, in one batch. The
  // last three have K >= 4096 in multiples of 512, so their scales come in chunks (v20; a
  // ragged last row tile clamps its rows), beside groups whose scales do not.
  std::vector<Group> paired;
  const uint32_t paired_shapes[][3] = {{300, 520, 640}, {100, 700, 500},  {1000, 200, 300}, {257, 72, 1024},
                                       {40, 136, 256},  {300, 264, 4096}, {257, 136, 4608}, {70, 40, 8192}};
  for (const auto &sh : paired_shapes) {
    paired.push_back(make_group(&rng, sh[0], sh[1], sh[2], GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_1X128,
                                GEMMD_DTYPE_FP8_E4M3, GEMMD_SCALE_BLOCK_128X128, GEMMD_DTYPE_BF16));
  }
  groups += static_cast<int>(paired.size());
  bad += run_batch(&rng, paired, "paired 256-row tiles", false);
  std::printf("gpu_gemm_test: %d groups checked with each kernel (simple; wgmma with its own and each forced "
              "tile kind and width), %d failures\n",
              groups, bad);
  std::printf("largest relative Frobenius error held to docs/api.md §1: simple FP32 %.3g, half %.3g; wgmma FP32 %.3g, half %.3g\n",
              g_worst[0][0], g_worst[0][1], g_worst[1][0], g_worst[1][1]);
  std::printf("wgmma half outputs on extreme codes: largest ||D - ref|| / ||A|.|B|^T|| %.3g\n", g_worst_loose);
  std::printf("split-K variants: %d run, %d not built, %d skipped (the tail's tiles x parts past the grid)\n", g_splits_run,
              g_splits_not_built, g_splits_no_fit);
  if (g_splits_not_built == 0 && g_splits_run == 0) {
    std::fprintf(stderr, "a build with split-K ran no split variant\n");
    bad++;
  }
  if (g_kinds_not_built > 0) {
    std::printf("forced tile kinds this build does not compile in: %d runs skipped (gpu_gemm_test runs them)\n",
                g_kinds_not_built);
  }
  return bad == 0 ? 0 : 1;
}
