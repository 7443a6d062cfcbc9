# Which saxpy shape reaches copy bandwidth on this GPU? CuPy RawKernels timed with CUDA events
# (20 launches per round, median of 7) against a device-to-device copy and torch's add_.
# Run on the GPU host: python3 benches/saxpy_probe.py (BENCHMARKS.md has the H200 figures).
import cupy as cp, numpy as np, torch
N = 64 * 1024 * 1024
x = cp.random.rand(N, dtype=cp.float32); y = cp.random.rand(N, dtype=cp.float32)
dst = cp.empty_like(x)
src = r'''
extern "C" {
__global__ void elem(float a, const float* __restrict__ x, float* __restrict__ y, unsigned long long n) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i]; }
__global__ void elem_cs(float a, const float* __restrict__ x, float* __restrict__ y, unsigned long long n) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) __stcs(&y[i], a * __ldcs(&x[i]) + __ldcs(&y[i])); }
__global__ void vec4(float a, const float4* __restrict__ x, float4* __restrict__ y, unsigned long long n4) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) { float4 p = x[i], q = y[i]; q.x = a*p.x+q.x; q.y = a*p.y+q.y; q.z = a*p.z+q.z; q.w = a*p.w+q.w; y[i] = q; } }
__global__ void vec4_cs(float a, const float4* __restrict__ x, float4* __restrict__ y, unsigned long long n4) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) { float4 p = __ldcs(&x[i]), q = __ldcs(&y[i]); q.x = a*p.x+q.x; q.y = a*p.y+q.y; q.z = a*p.z+q.z; q.w = a*p.w+q.w; __stcs(&y[i], q); } }
__global__ void blk4(float a, const float* __restrict__ x, float* __restrict__ y, unsigned long long n) {
  // each block handles 4*blockDim contiguous elements, 4 loads in flight per thread
  unsigned long long base = (unsigned long long)blockIdx.x * blockDim.x * 4 + threadIdx.x;
  float xv[4], yv[4];
  #pragma unroll
  for (int k = 0; k < 4; k++) { unsigned long long i = base + k * blockDim.x; if (i < n) { xv[k] = x[i]; yv[k] = y[i]; } }
  #pragma unroll
  for (int k = 0; k < 4; k++) { unsigned long long i = base + k * blockDim.x; if (i < n) y[i] = a * xv[k] + yv[k]; } }
__global__ void gs4(float a, const float* __restrict__ x, float* __restrict__ y, unsigned long long n) {
  unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    y[i] = a * x[i] + y[i]; y[i + stride] = a * x[i + stride] + y[i + stride];
    y[i + 2 * stride] = a * x[i + 2 * stride] + y[i + 2 * stride]; y[i + 3 * stride] = a * x[i + 3 * stride] + y[i + 3 * stride]; }
  for (; i < n; i += stride) y[i] = a * x[i] + y[i]; }
__global__ void copy4(const float4* __restrict__ x, float4* __restrict__ y, unsigned long long n4) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) y[i] = x[i]; }
__global__ void sumread(const float4* __restrict__ x, float* out, unsigned long long n4) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) { float4 p = x[i]; float s = p.x+p.y+p.z+p.w; if (s == 12345.678f) out[0] = s; } }
}'''
mod = cp.RawModule(code=src, options=('-std=c++17',))
def t(fn, reps=20, rounds=7):
    fn(); cp.cuda.Device().synchronize()
    s, e = cp.cuda.Event(), cp.cuda.Event(); r = []
    for _ in range(rounds):
        s.record(); [fn() for _ in range(reps)]; e.record(); e.synchronize()
        r.append(cp.cuda.get_elapsed_time(s, e) / reps / 1e3)
    return sorted(r)[rounds // 2]
B = 4 * N
a = np.float32(1.0001); n = np.uint64(N); n4 = np.uint64(N // 4)
res = {}
res['memcpy dtod'] = (2, t(lambda: cp.copyto(dst, x)))
res['copy4 kernel'] = (2, t(lambda: mod.get_function('copy4')(((N//4+255)//256,), (256,), (x, dst, n4))))
res['read only (vec4)'] = (1, t(lambda: mod.get_function('sumread')(((N//4+255)//256,), (256,), (x, dst, n4))))
for name, grid, blk, args in [
    ('elem 256', (N+255)//256, 256, (a, x, y, n)), ('elem 512', (N+511)//512, 512, (a, x, y, n)),
    ('elem 1024', (N+1023)//1024, 1024, (a, x, y, n)),
    ('elem_cs 256', (N+255)//256, 256, (a, x, y, n)), ('vec4 256', (N//4+255)//256, 256, (a, x, y, n4)),
    ('vec4_cs 256', (N//4+255)//256, 256, (a, x, y, n4)), ('blk4 256', (N+1023)//1024, 256, (a, x, y, n)),
    ('gs4 132x16', 132*16, 256, (a, x, y, n)), ('gs4 132x8', 132*8, 256, (a, x, y, n)), ('gs4 132x32', 132*32, 256, (a, x, y, n))]:
    f = mod.get_function(name.split()[0])
    res[name] = (3, t(lambda: f((grid,), (blk,), args)))
tx, ty = torch.as_tensor(x, device='cuda'), torch.as_tensor(y, device='cuda')
res['torch y.add_(x, alpha)'] = (3, t(lambda: ty.add_(tx, alpha=1.0001)))
copy_bw = 2 * B / res['memcpy dtod'][1] / 1e12
for k, (m, s) in res.items():
    bw = m * B / s / 1e12
    print(f"{k:28s} {s*1e6:8.1f} us {bw:6.2f} TB/s  {bw/copy_bw:5.3f} of memcpy")
