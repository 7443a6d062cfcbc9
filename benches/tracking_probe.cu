// tracking_probe: what cudarc's per-use buffer tracking costs on the host, in raw CUDA.
//
// cudarc (in multi-stream mode, with event tracking on: its default, and ours) makes
// every use of a `CudaSlice` wait for the buffer's last read/write events and record a
// new one: for a transform of `in` into `out`, 3 × (cuCtxSetCurrent + cuStreamWaitEvent)
// before the launch and 2 × (cuCtxSetCurrent + cuEventRecord) after it. This probe times
// each driver call alone, and an awaited cuFFT C2C 2^16 × 16 (the smallest call of
// issue 8's benches) with and without that pattern, so the figures bound what skipping
// redundant waits could save.
//
// Build and run on the GPU host:
//   nvcc -O2 -std=c++17 -o /tmp/tracking_probe benches/tracking_probe.cu -lcuda -lcufft
//   /tmp/tracking_probe
#include <cuda.h>
#include <cufft.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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

static double us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

static void report(const char* what, std::vector<double>& v) {
  std::sort(v.begin(), v.end());
  std::printf("RESULT | tracking_probe %-44s | p50 %7.3f us, p10 %7.3f, p90 %7.3f\n", what,
              v[v.size() / 2], v[v.size() / 10], v[v.size() * 9 / 10]);
}

int main() {
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CUstream s, other;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  const int n = 1 << 16, batch = 16;
  CUdeviceptr in, out;
  CK(cuMemAlloc(&in, sizeof(float) * 2 * n * batch));
  CK(cuMemAlloc(&out, sizeof(float) * 2 * n * batch));
  CK(cuMemsetD32(in, 0x3f800000, 2 * n * batch));
  cufftHandle plan;
  int dims[1] = {n};
  CK(cufftPlanMany(&plan, 1, dims, nullptr, 1, n, nullptr, 1, n, CUFFT_C2C, batch));
  CK(cufftSetStream(plan, (cudaStream_t)s));
  // cudarc's per-buffer events: in.write (recorded on `other`, the uploading stream),
  // in.read, out.read, out.write (on `s`).
  CUevent in_w, in_r, out_r, out_w, done;
  for (CUevent* e : {&in_w, &in_r, &out_r, &out_w, &done}) CK(cuEventCreate(e, CU_EVENT_DISABLE_TIMING));
  CK(cuEventRecord(in_w, other));
  CK(cuEventRecord(in_r, s));
  CK(cuEventRecord(out_r, s));
  CK(cuEventRecord(out_w, s));
  CK(cuCtxSynchronize());

  const int iters = 5000;
  std::vector<double> t;
  auto single = [&](const char* what, auto&& f) {
    t.clear();
    for (int i = 0; i < iters; i++) {
      auto a = Clock::now();
      f();
      auto b = Clock::now();
      t.push_back(us(a, b));
    }
    CK(cuStreamSynchronize(s));
    report(what, t);
  };
  single("cuCtxSetCurrent (same context)", [&] { CK(cuCtxSetCurrent(ctx)); });
  single("cuEventRecord", [&] { CK(cuEventRecord(out_w, s)); });
  single("cuStreamWaitEvent, same stream, done", [&] { CK(cuStreamWaitEvent(s, out_w, 0)); });
  single("cuStreamWaitEvent, other stream, done", [&] { CK(cuStreamWaitEvent(s, in_w, 0)); });

  auto track_before = [&] {
    CK(cuCtxSetCurrent(ctx));
    CK(cuStreamWaitEvent(s, in_w, 0));
    CK(cuCtxSetCurrent(ctx));
    CK(cuStreamWaitEvent(s, out_r, 0));
    CK(cuCtxSetCurrent(ctx));
    CK(cuStreamWaitEvent(s, out_w, 0));
  };
  auto track_after = [&] {
    CK(cuCtxSetCurrent(ctx));
    CK(cuEventRecord(out_w, s));
    CK(cuCtxSetCurrent(ctx));
    CK(cuEventRecord(in_r, s));
  };
  auto exec = [&] { CK(cufftExecC2C(plan, (cufftComplex*)in, (cufftComplex*)out, CUFFT_FORWARD)); };
  // Enqueue cost alone (synchronized between, untimed).
  for (int mode = 0; mode < 2; mode++) {
    t.clear();
    for (int i = 0; i < iters; i++) {
      auto a = Clock::now();
      if (mode) track_before();
      exec();
      if (mode) track_after();
      auto b = Clock::now();
      t.push_back(us(a, b));
      CK(cuStreamSynchronize(s));
    }
    report(mode ? "enqueue: tracking + cufftExecC2C + tracking" : "enqueue: cufftExecC2C", t);
  }
  // Awaited call: enqueue + synchronize; and enqueue + completion event + query spin.
  for (int mode = 0; mode < 4; mode++) {
    t.clear();
    for (int i = 0; i < iters; i++) {
      auto a = Clock::now();
      if (mode & 1) track_before();
      exec();
      if (mode & 1) track_after();
      if (mode & 2) {
        CK(cuEventRecord(done, s));
        while (cuEventQuery(done) == CUDA_ERROR_NOT_READY) {
        }
      } else {
        CK(cuStreamSynchronize(s));
      }
      auto b = Clock::now();
      t.push_back(us(a, b));
    }
    const char* names[4] = {"awaited: exec + sync", "awaited: tracking + exec + tracking + sync",
                            "awaited: exec + event + query spin",
                            "awaited: tracking + exec + tracking + event spin"};
    report(names[mode], t);
  }
  // The same transform captured once into a CUDA graph, then launched: the host cost of
  // cuFFT's enqueue is paid at capture, not per call.
  CUgraph graph;
  CUgraphExec gexec;
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  exec();
  CK(cuStreamEndCapture(s, &graph));
  CK(cuGraphInstantiate(&gexec, graph, 0));
  CK(cuGraphUpload(gexec, s));
  CK(cuStreamSynchronize(s));
  for (int round = 0; round < 2; round++) {
    for (int mode = 0; mode < 2; mode++) {
      t.clear();
      for (int i = 0; i < iters; i++) {
        auto a = Clock::now();
        if (mode) {
          CK(cuGraphLaunch(gexec, s));
        } else {
          exec();
        }
        CK(cuStreamSynchronize(s));
        auto b = Clock::now();
        t.push_back(us(a, b));
      }
      report(mode ? "awaited: graph launch + sync" : "awaited: exec + sync (again)", t);
    }
  }
  t.clear();
  for (int i = 0; i < iters; i++) {
    auto a = Clock::now();
    CK(cuGraphLaunch(gexec, s));
    auto b = Clock::now();
    t.push_back(us(a, b));
    CK(cuStreamSynchronize(s));
  }
  report("enqueue: cuGraphLaunch", t);
  // GPU time of the transform alone, launched back to back (no host gaps).
  CUevent t0, t1;
  CK(cuEventCreate(&t0, 0));
  CK(cuEventCreate(&t1, 0));
  for (int mode = 0; mode < 2; mode++) {
    CK(cuEventRecord(t0, s));
    for (int i = 0; i < 100; i++) {
      if (mode) {
        CK(cuGraphLaunch(gexec, s));
      } else {
        exec();
      }
    }
    CK(cuEventRecord(t1, s));
    CK(cuEventSynchronize(t1));
    float ms;
    CK(cuEventElapsedTime(&ms, t0, t1));
    std::printf("RESULT | tracking_probe GPU time per transform, 100 back to back (%s) | %.3f us\n",
                mode ? "graph" : "exec", ms * 10.0);
  }
  // Results agree: the graph writes what the plain exec writes.
  std::vector<float> a(2 * n * batch), b(2 * n * batch);
  CK(cuMemsetD32(out, 0, 2 * n * batch));
  exec();
  CK(cuStreamSynchronize(s));
  CK(cuMemcpyDtoH(a.data(), out, sizeof(float) * a.size()));
  CK(cuMemsetD32(out, 0, 2 * n * batch));
  CK(cuGraphLaunch(gexec, s));
  CK(cuStreamSynchronize(s));
  CK(cuMemcpyDtoH(b.data(), out, sizeof(float) * b.size()));
  std::printf("tracking_probe: graph output %s the plain output\n", a == b ? "equals" : "DIFFERS FROM");
  CK(cufftDestroy(plan));
  std::printf("tracking_probe: done\n");
  return 0;
}
