// gemmd_gpu_copy_many against the host: flat and strided copies, 16-byte and unaligned
// ones, lists longer than one launch, bytes between rows and past the ends untouched;
// copies that read pinned host memory and write registered host memory (the engine's small
// batches, over PCIe); a captured copy node given a new list and grid per replay
// (gemmd_gpu_copy_node_params, as the engine's graphs with copies); the copy clock of two
// such nodes around the work between them; and the argument checks. Needs the GPU (tag gpu).
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/errors.h"
#include "kernels/gpu_copy.h"

namespace {

int g_failures = 0;

#define EXPECT(cond, ...)                        \
  do {                                           \
    if (!(cond)) {                               \
      std::fprintf(stderr, "FAIL: " __VA_ARGS__); \
      std::fprintf(stderr, "\n");                \
      g_failures++;                              \
    }                                            \
  } while (0)

// n copies of random shapes from one buffer into another (disjoint destinations), checked
// byte for byte against the same copies made on the host.
void check_random(std::mt19937_64 &rng, uint32_t n, bool aligned, bool big = false) {
  const size_t bytes = 8u << 20;
  std::vector<uint8_t> src(bytes), dst_init(bytes), want, got(bytes);
  for (auto &b : src) b = static_cast<uint8_t>(rng());
  for (auto &b : dst_init) b = static_cast<uint8_t>(rng());
  uint8_t *d_src, *d_dst;
  CUDA_OK(cudaMalloc(reinterpret_cast<void **>(&d_src), bytes));
  CUDA_OK(cudaMalloc(reinterpret_cast<void **>(&d_dst), bytes));
  CUDA_OK(cudaMemcpy(d_src, src.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_dst, dst_init.data(), bytes, cudaMemcpyHostToDevice));
  want = dst_init;
  std::vector<gemmd_gpu_copy_t> copies;
  size_t dst_at = 0;
  const size_t dst_share = bytes / n;
  for (uint32_t i = 0; i < n; i++) {
    const uint32_t align = aligned ? 16 : 1;
    uint32_t row_bytes = 1 + static_cast<uint32_t>(rng() % (i % 7 == 0 ? 20000 : 600));
    uint32_t rows = 1 + static_cast<uint32_t>(rng() % 9);
    if (aligned) row_bytes = (row_bytes + 15) / 16 * 16;
    if (big) rows = 1, row_bytes = 4u << 20;
    const uint32_t src_pitch = row_bytes + align * static_cast<uint32_t>(rng() % 4);
    const uint32_t dst_pitch = row_bytes + align * static_cast<uint32_t>(rng() % 4);
    while (rows > 1 && static_cast<size_t>(rows) * dst_pitch > dst_share) rows--;
    if (static_cast<size_t>(rows) * dst_pitch > dst_share) row_bytes = static_cast<uint32_t>(dst_share / 2) / align * align;
    const size_t src_at = (rng() % (bytes / 2)) / align * align;
    for (uint32_t r = 0; r < rows; r++) {
      std::memcpy(&want[dst_at + r * static_cast<size_t>(dst_pitch)], &src[src_at + r * static_cast<size_t>(src_pitch)],
                  row_bytes);
    }
    copies.push_back({reinterpret_cast<uint64_t>(d_src + src_at), reinterpret_cast<uint64_t>(d_dst + dst_at), rows,
                      row_bytes, src_pitch, dst_pitch});
    dst_at += dst_share / align * align;
  }
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  const int rc = gemmd_gpu_copy_many(copies.data(), n, s);
  EXPECT(rc == GEMMD_OK, "launch: %s", gemmd_strerror(rc));
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(got.data(), d_dst, bytes, cudaMemcpyDeviceToHost));
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < bytes; i++) {
    if (got[i] != want[i] && bad++ == 0) first = i;
  }
  EXPECT(bad == 0, "%u copies (%s): %zu bytes differ, the first at %zu", n, aligned ? "aligned" : "unaligned", bad,
         first);
  std::printf("    %4u copies, %-9s%s: %s\n", n, aligned ? "aligned" : "unaligned", big ? " (4 MiB)" : "",
              bad == 0 ? "equal" : "DIFFER");
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaFree(d_src));
  CUDA_OK(cudaFree(d_dst));
}

// The engine's small batches: the staged bytes read from pinned memory (cudaMallocHost)
// into the device, and results written from the device into memory registered with
// cudaHostRegister (a client's arena), through the host pointers, at an aligned and an
// unaligned offset; the bytes around them untouched.
void check_host_memory(std::mt19937_64 &rng) {
  const size_t bytes = 3u << 20, arena_bytes = 4u << 20;
  uint8_t *pinned, *d_buf;
  CUDA_OK(cudaMallocHost(reinterpret_cast<void **>(&pinned), bytes));
  CUDA_OK(cudaMalloc(reinterpret_cast<void **>(&d_buf), bytes));
  std::vector<uint8_t> want(bytes), got(bytes);
  for (size_t i = 0; i < bytes; i++) pinned[i] = want[i] = static_cast<uint8_t>(rng());
  CUDA_OK(cudaMemset(d_buf, 0, bytes));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  // 1 MiB rows and a tail, as the engine's flat copies are.
  const gemmd_gpu_copy_t up[] = {{reinterpret_cast<uint64_t>(pinned), reinterpret_cast<uint64_t>(d_buf), 2,
                                  1u << 20, 1u << 20, 1u << 20},
                                 {reinterpret_cast<uint64_t>(pinned + (2u << 20)),
                                  reinterpret_cast<uint64_t>(d_buf + (2u << 20)), 1, 1u << 20, 0, 0}};
  EXPECT(gemmd_gpu_copy_many(up, 2, s) == GEMMD_OK, "upload from pinned memory launches");
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(got.data(), d_buf, bytes, cudaMemcpyDeviceToHost));
  EXPECT(got == want, "pinned host memory read by the kernel differs");

  uint8_t *arena = static_cast<uint8_t *>(std::aligned_alloc(4096, arena_bytes));
  std::vector<uint8_t> arena_want(arena_bytes);
  for (size_t i = 0; i < arena_bytes; i++) arena[i] = arena_want[i] = static_cast<uint8_t>(rng());
  CUDA_OK(cudaHostRegister(arena, arena_bytes, cudaHostRegisterDefault));
  const uint32_t n1 = 65536, n2 = 12345;
  const size_t at1 = 4096, at2 = (2u << 20) - 7;  // the second crosses 2 MiB, unaligned
  const gemmd_gpu_copy_t down[] = {
      {reinterpret_cast<uint64_t>(d_buf), reinterpret_cast<uint64_t>(arena + at1), 1, n1, 0, 0},
      {reinterpret_cast<uint64_t>(d_buf + 3), reinterpret_cast<uint64_t>(arena + at2), 1, n2, 0, 0}};
  EXPECT(gemmd_gpu_copy_many(down, 2, s) == GEMMD_OK, "results into registered memory launch");
  CUDA_OK(cudaStreamSynchronize(s));
  std::memcpy(&arena_want[at1], &want[0], n1);
  std::memcpy(&arena_want[at2], &want[3], n2);
  EXPECT(std::memcmp(arena, arena_want.data(), arena_bytes) == 0, "registered host memory written by the kernel differs");
  std::printf("    host memory: pinned -> device, device -> registered: %s\n",
              got == want && std::memcmp(arena, arena_want.data(), arena_bytes) == 0 ? "equal" : "DIFFER");
  CUDA_OK(cudaHostUnregister(arena));
  std::free(arena);
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaFree(d_buf));
  CUDA_OK(cudaFreeHost(pinned));
}

// A graph captured around a placeholder launch (an empty list of one copy, as the engine's
// copy_graph captures), replayed three times, each with its own list set on the node: lists
// of different lengths and sizes (so the grid changes too), and an empty one that copies
// nothing. Each replay checked byte for byte.
void check_graph_node(std::mt19937_64 &rng) {
  const size_t bytes = 1u << 20;
  std::vector<uint8_t> src(bytes), want(bytes, 0), got(bytes);
  for (auto &b : src) b = static_cast<uint8_t>(rng());
  uint8_t *d_src, *d_dst;
  CUDA_OK(cudaMalloc(reinterpret_cast<void **>(&d_src), bytes));
  CUDA_OK(cudaMalloc(reinterpret_cast<void **>(&d_dst), bytes));
  CUDA_OK(cudaMemcpy(d_src, src.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(d_dst, 0, bytes));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  cudaGraph_t g;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const gemmd_gpu_copy_t none = {0, 0, 0, 0, 0, 0};
  EXPECT(gemmd_gpu_copy_many(&none, 1, s) == GEMMD_OK, "the placeholder launch is captured");
  CUDA_OK(cudaStreamEndCapture(s, &g));
  cudaGraphNode_t node;
  size_t n_nodes = 1;
  CUDA_OK(cudaGraphGetNodes(g, &node, &n_nodes));
  EXPECT(n_nodes == 1, "the capture holds one node, not %zu", n_nodes);
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
  gemmd_gpu_copy_node_t storage;
  bool all_equal = true;
  for (uint32_t n : {7u, 0u, static_cast<uint32_t>(GEMMD_GPU_COPIES_PER_LAUNCH)}) {
    std::vector<gemmd_gpu_copy_t> copies;
    const size_t share = bytes / 128;  // copy i writes share i; the last 8 shares are the large copy's
    for (uint32_t i = 0; i < n; i++) {
      // the first copy of the first list spans many blocks (64 KiB): the grid grows
      const bool large = n == 7 && i == 0;
      const uint32_t len = large ? 65536 : 1 + static_cast<uint32_t>(rng() % share);
      const size_t from = rng() % (bytes - len), to = large ? 120 * share : i * share;
      copies.push_back({reinterpret_cast<uint64_t>(d_src + from), reinterpret_cast<uint64_t>(d_dst + to), 1, len, 0, 0});
      std::memcpy(&want[to], &src[from], len);
    }
    cudaKernelNodeParams p;
    EXPECT(gemmd_gpu_copy_node_params(copies.data(), static_cast<uint32_t>(copies.size()), nullptr, &storage, &p) ==
               GEMMD_OK,
           "a list of %zu as node parameters", copies.size());
    CUDA_OK(cudaGraphExecKernelNodeSetParams(exec, node, &p));
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaMemcpy(got.data(), d_dst, bytes, cudaMemcpyDeviceToHost));
    EXPECT(got == want, "the replay with a list of %zu copies differs", copies.size());
    all_equal = all_equal && got == want;
  }
  std::vector<gemmd_gpu_copy_t> too_many(GEMMD_GPU_COPIES_PER_LAUNCH + 1, none);
  cudaKernelNodeParams p;
  EXPECT(gemmd_gpu_copy_node_params(too_many.data(), GEMMD_GPU_COPIES_PER_LAUNCH + 1, nullptr, &storage, &p) ==
             GEMMD_EINVAL,
         "a list longer than one launch is refused as a node's");
  std::printf("    graph copy node, three lists replayed: %s\n", all_equal ? "equal" : "DIFFER");
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(g));
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaFree(d_src));
  CUDA_OK(cudaFree(d_dst));
}

// A graph of two copy nodes, the first with the clock's BEFORE role and the second with
// AFTER, as the engine's graph with copies around its GEMM. Each replay copies both lists;
// the host, polling the clock's end word alone (no stream synchronisation), then finds every
// byte of the second copy in pinned memory and the four times in order; the device words
// are back at 0 for the next replay. The third replay's second list is empty, as a batch's
// whose results the GEMM writes in place.
void check_copy_clock(std::mt19937_64 &rng) {
  const size_t bytes = 1u << 20;
  std::vector<uint8_t> src(bytes);
  for (auto &b : src) b = static_cast<uint8_t>(rng());
  uint8_t *d_src, *d_mid, *h_dst;
  unsigned long long *dev, *host;
  CUDA_OK(cudaMalloc(reinterpret_cast<void **>(&d_src), bytes));
  CUDA_OK(cudaMalloc(reinterpret_cast<void **>(&d_mid), bytes));
  CUDA_OK(cudaMallocHost(reinterpret_cast<void **>(&h_dst), bytes));
  CUDA_OK(cudaMalloc(reinterpret_cast<void **>(&dev), GEMMD_GPU_COPY_CLOCK_DEV_WORDS * sizeof *dev));
  CUDA_OK(cudaMallocHost(reinterpret_cast<void **>(&host), GEMMD_GPU_COPY_CLOCK_HOST_WORDS * sizeof *host));
  CUDA_OK(cudaMemcpy(d_src, src.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dev, 0, GEMMD_GPU_COPY_CLOCK_DEV_WORDS * sizeof *dev));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  cudaGraph_t g;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const gemmd_gpu_copy_t none[2] = {{0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0}};
  EXPECT(gemmd_gpu_copy_many(none, 1, s) == GEMMD_OK, "the first placeholder is captured");
  EXPECT(gemmd_gpu_copy_many(none, 2, s) == GEMMD_OK, "the second placeholder is captured");
  CUDA_OK(cudaStreamEndCapture(s, &g));
  cudaGraphNode_t nodes[2], first = nullptr, second = nullptr;
  size_t n_nodes = 2;
  CUDA_OK(cudaGraphGetNodes(g, nodes, &n_nodes));
  EXPECT(n_nodes == 2, "the capture holds two nodes, not %zu", n_nodes);
  for (size_t i = 0; i < n_nodes; i++) {
    cudaKernelNodeParams p;
    CUDA_OK(cudaGraphKernelNodeGetParams(nodes[i], &p));
    (p.gridDim.y == 1 ? first : second) = nodes[i];
  }
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
  const gemmd_gpu_copy_clock_t before = {dev, host, GEMMD_GPU_COPY_CLOCK_BEFORE};
  const gemmd_gpu_copy_clock_t after = {dev, host, GEMMD_GPU_COPY_CLOCK_AFTER};
  gemmd_gpu_copy_node_t up, down;
  bool ordered = true;
  for (int replay = 0; replay < 3 && first != nullptr && second != nullptr; replay++) {
    const uint32_t len = 4096 + static_cast<uint32_t>(rng() % (bytes - 4096));  // many blocks
    const gemmd_gpu_copy_t in = {reinterpret_cast<uint64_t>(d_src), reinterpret_cast<uint64_t>(d_mid), 1, len, 0, 0};
    const gemmd_gpu_copy_t out = {reinterpret_cast<uint64_t>(d_mid), reinterpret_cast<uint64_t>(h_dst), 1, len, 0, 0};
    const uint32_t n_out = replay == 2 ? 0 : 1;
    cudaKernelNodeParams p;
    EXPECT(gemmd_gpu_copy_node_params(&in, 1, &before, &up, &p) == GEMMD_OK, "the first node's clock");
    CUDA_OK(cudaGraphExecKernelNodeSetParams(exec, first, &p));
    EXPECT(gemmd_gpu_copy_node_params(&out, n_out, &after, &down, &p) == GEMMD_OK, "the second node's clock");
    CUDA_OK(cudaGraphExecKernelNodeSetParams(exec, second, &p));
    std::memset(h_dst, 0, len);
    for (int i = 0; i < GEMMD_GPU_COPY_CLOCK_HOST_WORDS; i++) host[i] = 0;
    CUDA_OK(cudaGraphLaunch(exec, s));
    volatile unsigned long long *end = host + GEMMD_GPU_COPY_CLOCK_AFTER_END;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (*end == 0 && std::chrono::steady_clock::now() < give_up) {
    }
    const bool done = *end != 0;
    EXPECT(done, "replay %d: the clock's end word is still 0 after 5 s", replay);
    const bool all_there = n_out == 0 || std::memcmp(h_dst, src.data(), len) == 0;
    EXPECT(done && all_there, "replay %d: the end word was set before the second copy's bytes were all in place",
           replay);
    CUDA_OK(cudaStreamSynchronize(s));
    unsigned long long left[GEMMD_GPU_COPY_CLOCK_DEV_WORDS];
    CUDA_OK(cudaMemcpy(left, dev, sizeof left, cudaMemcpyDeviceToHost));
    const unsigned long long t0 = host[GEMMD_GPU_COPY_CLOCK_BEFORE_START], t1 = host[GEMMD_GPU_COPY_CLOCK_BEFORE_END];
    const unsigned long long t2 = host[GEMMD_GPU_COPY_CLOCK_AFTER_START], t3 = host[GEMMD_GPU_COPY_CLOCK_AFTER_END];
    const bool in_order = t0 != 0 && t1 >= t0 && t2 >= t1 && t3 >= t2 && t3 - t0 < 1000000000ull;
    EXPECT(in_order, "replay %d: the clock reads %llu, %llu, %llu, %llu", replay, t0, t1, t2, t3);
    EXPECT(left[1] == 0 && left[2] == 0, "replay %d: the device words are %llu and %llu, not 0", replay, left[1],
           left[2]);
    ordered = ordered && in_order;
    if (replay == 0) {
      std::printf("    copy clock: first node %llu ns, %llu ns between the nodes, second node %llu ns\n", t1 - t0,
                  t2 - t1, t3 - t2);
    }
  }
  EXPECT(first != nullptr && second != nullptr, "the two copy nodes are found by their grids");
  const gemmd_gpu_copy_clock_t no_dev = {nullptr, host, GEMMD_GPU_COPY_CLOCK_AFTER};
  const gemmd_gpu_copy_clock_t bad_role = {dev, host, 7};
  cudaKernelNodeParams p;
  EXPECT(gemmd_gpu_copy_node_params(none, 1, &no_dev, &up, &p) == GEMMD_EINVAL, "a clock without its device word");
  EXPECT(gemmd_gpu_copy_node_params(none, 1, &bad_role, &up, &p) == GEMMD_EINVAL, "a clock of an unknown role");
  std::printf("    copy clock, three replays noticed by its end word: %s\n", ordered ? "in order" : "OUT OF ORDER");
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(g));
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaFreeHost(host));
  CUDA_OK(cudaFreeHost(h_dst));
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaFree(d_src));
  CUDA_OK(cudaFree(d_mid));
}

}  // namespace

int main() {
  const char *seed_env = std::getenv("TEST_SEED");
  const uint64_t seed = seed_env ? std::strtoull(seed_env, nullptr, 10) : std::random_device{}();
  std::printf("    gpu_copy_test: TEST_SEED=%llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (uint32_t n : {1u, 3u, 64u, GEMMD_GPU_COPIES_PER_LAUNCH + 1u, 3 * GEMMD_GPU_COPIES_PER_LAUNCH + 7u}) {
    check_random(rng, n, true);
    check_random(rng, n, false);
  }
  // One large flat copy (a prefill's result): many blocks share it.
  check_random(rng, 1, true, true);
  check_host_memory(rng);
  check_graph_node(rng);
  check_copy_clock(rng);
  gemmd_gpu_copy_t bad = {16, 32, 2, 100, 50, 100};  // src pitch below the row
  EXPECT(gemmd_gpu_copy_many(&bad, 1, 0) == GEMMD_EINVAL, "a pitch below the row is refused");
  gemmd_gpu_copy_t null_src = {0, 32, 1, 100, 100, 100};
  EXPECT(gemmd_gpu_copy_many(&null_src, 1, 0) == GEMMD_EINVAL, "a null source is refused");
  EXPECT(gemmd_gpu_copy_many(nullptr, 1, 0) == GEMMD_EINVAL, "a null list is refused");
  EXPECT(gemmd_gpu_copy_many(nullptr, 0, 0) == GEMMD_OK, "nothing to copy is fine");
  std::printf("    gpu_copy_test: %s\n", g_failures ? "FAILED" : "passed");
  return g_failures ? 1 : 0;
}
