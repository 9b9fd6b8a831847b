// Session 43 probe (not product code): where one small batch's launch-to-noticed time goes.
// A graph shaped like gemmd's clocked small batch: up (reads a table from pinned memory)
// -> work (132 CTAs x 384 threads, 200 KB smem, spins W us) -> down (empty, or writes a
// pinned flag). Host-side time from before the first API call to the host seeing the end,
// median / p10 / p90 over N launches; device-side gaps from %globaltimer stamps.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_) { printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1);} } while (0)

static inline unsigned long long now_ns() {
  timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000ull + t.tv_nsec;
}
__device__ __forceinline__ unsigned long long gtime() {
  unsigned long long t; asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t)); return t;
}

struct Stamps { unsigned long long up0, up1, w0, w1, d0, d1; };
struct Tab { unsigned char b[1024]; };

__device__ unsigned int g_done_ctas;

__global__ void up_k(const unsigned char *src, unsigned char *dst, int n, Stamps *st) {
  if (threadIdx.x == 0 && blockIdx.x == 0) st->up0 = gtime();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n / 16; i += gridDim.x * blockDim.x)
    ((uint4 *)dst)[i] = ((const uint4 *)src)[i];
  __syncthreads();
  if (threadIdx.x == 0 && blockIdx.x == 0) st->up1 = gtime();
}

__global__ void work_k(const unsigned char *tab, int spin_ns, Stamps *st, volatile unsigned long long *flag,
                       unsigned long long seq) {
  extern __shared__ unsigned char sm[];
  const unsigned long long t0 = gtime();
  if (threadIdx.x == 0 && blockIdx.x == 0) st->w0 = t0;
  sm[threadIdx.x] = tab[threadIdx.x % 1024];
  while (gtime() < t0 + spin_ns) {}
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    unsigned int done = atomicAdd(&g_done_ctas, 1);
    if (done == gridDim.x - 1) {
      g_done_ctas = 0;
      st->w1 = gtime();
      if (flag) { __threadfence_system(); *flag = seq; }
    }
  }
}

__global__ void work_p(Tab tab, int spin_ns, Stamps *st, volatile unsigned long long *flag, unsigned long long seq) {
  extern __shared__ unsigned char sm[];
  const unsigned long long t0 = gtime();
  if (threadIdx.x == 0 && blockIdx.x == 0) st->w0 = t0;
  sm[threadIdx.x] = tab.b[threadIdx.x % 1024];
  while (gtime() < t0 + spin_ns) {}
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    unsigned int done = atomicAdd(&g_done_ctas, 1);
    if (done == gridDim.x - 1) {
      g_done_ctas = 0;
      st->w1 = gtime();
      if (flag) { __threadfence_system(); *flag = seq; }
    }
  }
}

__device__ unsigned long long g_down_seq;
__global__ void down_k(Stamps *st, volatile unsigned long long *flag, const unsigned long long *unused) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    st->d0 = gtime();
    st->d1 = st->d0;
    if (flag) { __threadfence_system(); *flag = (1ull << 63) | ++g_down_seq; }
  }
}

enum { SMEM = 200 * 1024, THREADS = 384 };
static int NSM;

struct Res { const char *name; std::vector<double> tot, api, gap_uw, gap_wd, up, work; };

static void report(Res &r) {
  auto med = [](std::vector<double> v, double q) { if (v.empty()) return 0.0; std::sort(v.begin(), v.end()); return v[(size_t)(q * (v.size() - 1))]; };
  printf("| %-44s | %6.2f | %6.2f | %6.2f | %5.2f | %5.2f | %5.2f | %5.2f | %5.2f |\n", r.name, med(r.tot, .5), med(r.tot, .1),
         med(r.tot, .9), med(r.api, .5), med(r.up, .5), med(r.gap_uw, .5), med(r.work, .5), med(r.gap_wd, .5));
}

int main(int argc, char **argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 2000;
  const int spin_ns = argc > 2 ? atoi(argv[2]) : 10000;
  CK(cudaSetDevice(0));
  CK(cudaDeviceGetAttribute(&NSM, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaFuncSetAttribute(work_k, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  CK(cudaFuncSetAttribute(work_p, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  cudaStream_t s;
  CK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, -1));
  unsigned char *h_tab, *d_tab;
  CK(cudaMallocHost(&h_tab, 64 << 10));
  memset(h_tab, 1, 64 << 10);
  CK(cudaMalloc(&d_tab, 64 << 10));
  Stamps *st;
  CK(cudaMallocHost(&st, sizeof *st));
  volatile unsigned long long *flag;
  CK(cudaMallocHost((void **)&flag, 64));
  unsigned long long *seq_h;
  CK(cudaMallocHost(&seq_h, 64));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int UPB = 1024; // the table + maps of a one-group batch

  // Graphs, captured.
  auto capture = [&](auto body) {
    cudaGraph_t g; cudaGraphExec_t x;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    body();
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&x, g, 0));
    return std::make_pair(g, x);
  };
  Tab tab; memset(&tab, 1, sizeof tab);
  auto g3 = capture([&] {  // up -> work -> down(no flag)
    up_k<<<1, 256, 0, s>>>(h_tab, d_tab, UPB, st);
    work_k<<<NSM, THREADS, SMEM, s>>>(d_tab, spin_ns, st, nullptr, 0);
    down_k<<<1, 32, 0, s>>>(st, nullptr, seq_h);
  });
  auto g3f = capture([&] {  // up -> work -> down(flag)
    up_k<<<1, 256, 0, s>>>(h_tab, d_tab, UPB, st);
    work_k<<<NSM, THREADS, SMEM, s>>>(d_tab, spin_ns, st, nullptr, 0);
    down_k<<<1, 32, 0, s>>>(st, flag, seq_h);
  });
  auto g3ev = capture([&] {  // event nodes inside: e0, up, work, down, e1
    CK(cudaEventRecord(e0, s));
    up_k<<<1, 256, 0, s>>>(h_tab, d_tab, UPB, st);
    work_k<<<NSM, THREADS, SMEM, s>>>(d_tab, spin_ns, st, nullptr, 0);
    down_k<<<1, 32, 0, s>>>(st, flag, seq_h);
    CK(cudaEventRecord(e1, s));
  });
  auto g2f = capture([&] {  // up -> work(flag)
    up_k<<<1, 256, 0, s>>>(h_tab, d_tab, UPB, st);
    work_k<<<NSM, THREADS, SMEM, s>>>(d_tab, spin_ns, st, flag, 0);
  });
  auto gpf = capture([&] {  // work(params table, flag): one node
    work_p<<<NSM, THREADS, SMEM, s>>>(tab, spin_ns, st, flag, 0);
  });
  (void)g2f; (void)gpf;

  // Find kernel nodes for the set-params variants.
  auto kernel_nodes = [](cudaGraph_t g) {
    size_t n = 0; CK(cudaGraphGetNodes(g, nullptr, &n));
    std::vector<cudaGraphNode_t> v(n); CK(cudaGraphGetNodes(g, v.data(), &n));
    std::vector<cudaGraphNode_t> k;
    for (auto x : v) { cudaGraphNodeType t; CK(cudaGraphNodeGetType(x, &t)); if (t == cudaGraphNodeTypeKernel) k.push_back(x); }
    return k;
  };
  auto kn3f = kernel_nodes(g3f.first);
  auto kn3 = kernel_nodes(g3.first);
  auto knpf = kernel_nodes(gpf.first);
  auto kn2f = kernel_nodes(g2f.first);
  cudaKernelNodeParams up_p; CK(cudaGraphKernelNodeGetParams(kn3f[0], &up_p));
  cudaKernelNodeParams wp_p; CK(cudaGraphKernelNodeGetParams(knpf[0], &wp_p));
  cudaKernelNodeParams w2_p; CK(cudaGraphKernelNodeGetParams(kn2f[1], &w2_p));

  unsigned long long seq = 0;
  auto poll_flag = [&](unsigned long long want) { while (*flag != want) {} };
  unsigned long long down_seq = 0;
  auto poll_down = [&]() { const unsigned long long want = (1ull << 63) | ++down_seq; while (*flag != want) {} };
  auto poll_event = [&](cudaEvent_t e) { cudaError_t q; while ((q = cudaEventQuery(e)) == cudaErrorNotReady) {} CK(q); };

  printf("# launch probe: %d SMs, work kernel %d ns, %d iterations, table %d B\n", NSM, spin_ns, iters, UPB);
  printf("| variant | total p50 | p10 | p90 | API | up | gap up->work | work | gap work->down |\n|---|---|---|---|---|---|---|---|---|\n");

  auto run = [&](const char *name, auto one) {
    Res r; r.name = name;
    for (int i = 0; i < iters + 200; i++) {
      memset((void *)st, 0, sizeof *st);
      const unsigned long long t0 = now_ns();
      unsigned long long t_api = one(1);
      const unsigned long long t1 = now_ns();
      one(0);  // wait
      CK(cudaStreamSynchronize(s));
      if (i < 200) continue;
      r.tot.push_back((t1 - t0) / 1e3 + 0 * t_api);
      r.api.push_back((t_api - t0) / 1e3);
      if (st->up1 && st->w0) r.gap_uw.push_back(((long long)st->w0 - (long long)st->up1) / 1e3);
      if (st->up1) r.up.push_back((st->up1 - st->up0) / 1e3);
      if (st->w1) r.work.push_back((st->w1 - st->w0) / 1e3);
      if (st->d0 && st->w1) r.gap_wd.push_back(((long long)st->d0 - (long long)st->w1) / 1e3);
    }
    report(r);
  };
  // `one(1)` launches and returns the time its API calls returned; `one(0)` waits for the end.
  // Restructure: launch and wait inside one call to keep the timing honest.
  auto run2 = [&](const char *name, auto launch, auto wait) {
    Res r; r.name = name;
    for (int i = 0; i < iters + 200; i++) {
      memset((void *)st, 0, sizeof *st);
      seq++;
      *seq_h = seq;
      const unsigned long long t0 = now_ns();
      launch(seq);
      const unsigned long long ta = now_ns();
      wait(seq);
      const unsigned long long t1 = now_ns();
      CK(cudaStreamSynchronize(s));
      if (i < 200) continue;
      r.tot.push_back((t1 - t0) / 1e3);
      r.api.push_back((ta - t0) / 1e3);
      if (st->up1 && st->w0) r.gap_uw.push_back(((long long)st->w0 - (long long)st->up1) / 1e3);
      if (st->up1) r.up.push_back((st->up1 - st->up0) / 1e3);
      if (st->w1) r.work.push_back((st->w1 - st->w0) / 1e3);
      if (st->d0 && st->w1) r.gap_wd.push_back(((long long)st->d0 - (long long)st->w1) / 1e3);
    }
    report(r);
  };
  (void)run;

  // 1. gemmd's clocked form today: start event, graph (up, work, down), stop event, poll the event.
  run2("A ev + graph(up,work,down) + ev; poll event", [&](unsigned long long) {
    CK(cudaEventRecord(e0, s)); CK(cudaGraphLaunch(g3.second, s)); CK(cudaEventRecord(e1, s)); },
    [&](unsigned long long) { poll_event(e1); });
  run2("A' same, up node's params set each time", [&](unsigned long long) {
    CK(cudaEventRecord(e0, s)); CK(cudaGraphExecKernelNodeSetParams(g3.second, kn3[0], &up_p));
    CK(cudaGraphLaunch(g3.second, s)); CK(cudaEventRecord(e1, s)); },
    [&](unsigned long long) { poll_event(e1); });
  // 2. without the start event
  run2("B graph(up,work,down) + ev; poll event", [&](unsigned long long) {
    CK(cudaGraphLaunch(g3.second, s)); CK(cudaEventRecord(e1, s)); },
    [&](unsigned long long) { poll_event(e1); });
  // 3. no events: poll the down node's pinned flag
  run2("C graph(up,work,down flag); poll flag", [&](unsigned long long) { CK(cudaGraphLaunch(g3f.second, s)); },
       [&](unsigned long long) { poll_down(); });
  run2("C' C + stop event after, poll flag", [&](unsigned long long) { CK(cudaGraphLaunch(g3f.second, s)); CK(cudaEventRecord(e1, s)); },
       [&](unsigned long long) { poll_down(); });
  run2("C'' C + stop event after, poll event", [&](unsigned long long) { CK(cudaGraphLaunch(g3f.second, s)); CK(cudaEventRecord(e1, s)); },
       [&](unsigned long long) { poll_event(e1); ++down_seq; });
  // 4. event nodes inside the graph
  run2("D graph(ev,up,work,down flag,ev); poll flag", [&](unsigned long long) { CK(cudaGraphLaunch(g3ev.second, s)); },
       [&](unsigned long long) { poll_down(); });
  // 5. no results node: the work kernel's last CTA writes the flag
  std::vector<unsigned long long> seqs;
  run2("E graph(up,work flag); poll flag (params set)", [&](unsigned long long q) {
    w2_p.kernelParams[4] = &q; // seq argument
    CK(cudaGraphExecKernelNodeSetParams(g2f.second, kn2f[1], &w2_p)); CK(cudaGraphLaunch(g2f.second, s)); },
    [&](unsigned long long q) { poll_flag(q); });
  // 6. one node: the table as kernel parameters, set per launch
  run2("F graph(work(table param) flag); set params", [&](unsigned long long q) {
    wp_p.kernelParams[4] = &q;
    CK(cudaGraphExecKernelNodeSetParams(gpf.second, knpf[0], &wp_p)); CK(cudaGraphLaunch(gpf.second, s)); },
    [&](unsigned long long q) { poll_flag(q); });
  // 7. plain launches, no graph
  run2("G launches up, work, down flag; poll flag", [&](unsigned long long) {
    up_k<<<1, 256, 0, s>>>(h_tab, d_tab, UPB, st);
    work_k<<<NSM, THREADS, SMEM, s>>>(d_tab, spin_ns, st, nullptr, 0);
    down_k<<<1, 32, 0, s>>>(st, flag, seq_h); },
    [&](unsigned long long) { poll_down(); });
  run2("H launch work(table param) flag; poll flag", [&](unsigned long long q) {
    work_p<<<NSM, THREADS, SMEM, s>>>(tab, spin_ns, st, flag, q); },
    [&](unsigned long long q) { poll_flag(q); });
  run2("I launch work flag (device table); poll flag", [&](unsigned long long q) {
    work_k<<<NSM, THREADS, SMEM, s>>>(d_tab, spin_ns, st, flag, q); },
    [&](unsigned long long q) { poll_flag(q); });
  run2("J ev + launch work + ev; poll event", [&](unsigned long long q) {
    CK(cudaEventRecord(e0, s)); work_k<<<NSM, THREADS, SMEM, s>>>(d_tab, spin_ns, st, nullptr, q); CK(cudaEventRecord(e1, s)); },
    [&](unsigned long long) { poll_event(e1); });
  CK(cudaGetLastError());
  printf("# probe done\n");
  return 0;
}
