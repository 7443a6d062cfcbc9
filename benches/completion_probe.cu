// completion_probe: how fast can a host thread learn that stream work is done, and what
// does a thread hop cost? Raw CUDA only (no Rust, no actors), so the figures bound what
// the actor path (`completion.rs`, `device/mod.rs`) can reach on the same machine.
//
// Build and run on the GPU host:
//   nvcc -O2 -std=c++17 -o /tmp/completion_probe benches/completion_probe.cu -lcuda -lpthread
//   /tmp/completion_probe
//
// Each mode runs a tiny kernel (one write) or a ~20 us kernel (a spin on %globaltimer),
// then waits for it; p50 / p90 of the whole call over many iterations.
//   sync        launch + cudaStreamSynchronize (the raw path of our benches)
//   event       launch + event record + cudaEventQuery in a tight loop
//   event+1us   the same with 1 us pauses between queries (our Spin wait's first pace)
//   flag        launch + cuStreamWriteValue32 into pinned host memory + spin on the word
//   hop2 event  another thread enqueues on request, waits on the event, replies (two hops)
//   hop2 flag   the same, the worker spinning on the host word instead of the event
//   hop1 flag   the worker enqueues and returns at once; the caller spins on the word
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#define CK(x)                                                                              \
  do {                                                                                     \
    auto _e = (x);                                                                         \
    if (_e != 0) {                                                                         \
      std::fprintf(stderr, "%s failed: %d (line %d)\n", #x, (int)_e, __LINE__);            \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

using Clock = std::chrono::steady_clock;

__global__ void tiny(int* p) {
  if (threadIdx.x == 0) p[0] += 1;
}

__global__ void spin_ns(int* p, unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
  if (threadIdx.x == 0) p[0] += 1;
}

static cudaStream_t stream;
static int* dbuf;
static cudaEvent_t ev;
static volatile unsigned* flag;  // pinned, mapped host memory
static CUdeviceptr flag_dev;
static unsigned seq = 0;
static unsigned long long kernel_ns = 0;

static void launch() {
  if (kernel_ns == 0)
    tiny<<<1, 32, 0, stream>>>(dbuf);
  else
    spin_ns<<<1, 32, 0, stream>>>(dbuf, kernel_ns);
}

static void spin_for_ns(long ns) {
  auto t = Clock::now();
  while (std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count() < ns) {
  }
}

static void wait_event(long pause_ns) {
  for (;;) {
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      std::fprintf(stderr, "event query: %d\n", (int)e);
      std::exit(1);
    }
    if (pause_ns) spin_for_ns(pause_ns);
  }
}

static void signal_flag(unsigned v) { CK(cuStreamWriteValue32((CUstream)stream, flag_dev, v, 0)); }

static void wait_flag(unsigned v) {
  while ((int)(*flag - v) < 0) {
  }
}

// The worker thread of the hop modes.
static std::atomic<unsigned> req{0}, rep{0};
static std::atomic<int> worker_mode{0};  // 1: hop2 event, 2: hop2 flag, 3: hop1 flag, -1: stop
static void worker() {
  CK(cudaSetDevice(0));
  unsigned seen = 0;
  for (;;) {
    unsigned r;
    while ((r = req.load(std::memory_order_acquire)) == seen) {
      if (worker_mode.load(std::memory_order_relaxed) < 0) return;
    }
    seen = r;
    int m = worker_mode.load(std::memory_order_relaxed);
    launch();
    if (m == 1) {
      CK(cudaEventRecord(ev, stream));
      wait_event(0);
      rep.store(r, std::memory_order_release);
    } else if (m == 2) {
      signal_flag(r);
      wait_flag(r);
      rep.store(r, std::memory_order_release);
    } else {
      signal_flag(r);
      rep.store(r, std::memory_order_release);  // "enqueued"
    }
  }
}

static void report(const char* name, std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  std::printf("RESULT | probe %-10s kernel %5.1f us | p10 %6.2f us, p50 %6.2f us, p90 %6.2f us\n", name,
              kernel_ns / 1000.0, us[us.size() / 10], us[us.size() / 2], us[us.size() * 9 / 10]);
}

template <class F>
static void measure(const char* name, int iters, F&& call) {
  for (int i = 0; i < 500; i++) call();
  std::vector<double> us;
  us.reserve(iters);
  for (int i = 0; i < iters; i++) {
    auto t = Clock::now();
    call();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
  }
  report(name, us);
}

int main() {
  CK(cudaSetDevice(0));
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CK(cudaMalloc(&dbuf, 4));
  CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  void* h;
  CK(cudaHostAlloc(&h, 64, cudaHostAllocMapped | cudaHostAllocPortable));
  flag = (volatile unsigned*)h;
  *flag = 0;
  CK(cuMemHostGetDevicePointer(&flag_dev, h, 0));
  int memops = 0;
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CK(cuDeviceGetAttribute(&memops, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, dev));
  std::printf("stream wait-value NOR supported: %d\n", memops);

  // Host cost of the two completion marks alone.
  {
    const int n = 20000;
    auto t = Clock::now();
    for (int i = 0; i < n; i++) CK(cudaEventRecord(ev, stream));
    double rec = std::chrono::duration<double, std::micro>(Clock::now() - t).count() / n;
    CK(cudaStreamSynchronize(stream));
    t = Clock::now();
    for (int i = 0; i < n; i++) signal_flag(++seq);
    double wv = std::chrono::duration<double, std::micro>(Clock::now() - t).count() / n;
    CK(cudaStreamSynchronize(stream));
    t = Clock::now();
    for (int i = 0; i < n; i++) (void)cudaEventQuery(ev);
    double q = std::chrono::duration<double, std::micro>(Clock::now() - t).count() / n;
    std::printf("RESULT | probe host cost | event record %.3f us, write value %.3f us, event query %.3f us\n",
                rec, wv, q);
  }

  std::thread w(worker);
  for (unsigned long long k : {0ull, 20000ull}) {
    kernel_ns = k;
    const int iters = 20000;
    measure("sync", iters, [] {
      launch();
      CK(cudaStreamSynchronize(stream));
    });
    measure("event", iters, [] {
      launch();
      CK(cudaEventRecord(ev, stream));
      wait_event(0);
    });
    measure("event+1us", iters, [] {
      launch();
      CK(cudaEventRecord(ev, stream));
      wait_event(1000);
    });
    measure("flag", iters, [] {
      launch();
      signal_flag(++seq);
      wait_flag(seq);
    });
    for (int m = 1; m <= 3; m++) {
      worker_mode.store(m);
      const char* names[] = {"", "hop2 event", "hop2 flag", "hop1 flag"};
      measure(names[m], iters, [m] {
        unsigned r = ++seq;
        req.store(r, std::memory_order_release);
        if (m == 3) {
          wait_flag(r);
          // the worker has enqueued by now (its store precedes the flag write)
          while (rep.load(std::memory_order_acquire) != r) {
          }
        } else {
          while (rep.load(std::memory_order_acquire) != r) {
          }
        }
      });
    }
  }
  worker_mode.store(-1);
  w.join();
  return 0;
}
