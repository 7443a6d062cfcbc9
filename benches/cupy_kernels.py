"""CuPy's ElementwiseKernel / ReductionKernel for the ops of benches/kernels.rs (saxpy and a
sum over 256 MiB of f32), timed the same way: 20 launches back to back per round, median
of 7 rounds, beside a device-to-device copy. Run on the GPU host: python3 benches/cupy_kernels.py
"""
import time

import cupy as cp

N = 64 << 20
REPS, ROUNDS = 20, 7


def timed(f):
    v = []
    for _ in range(ROUNDS):
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        for _ in range(REPS):
            f()
        cp.cuda.Device().synchronize()
        v.append((time.perf_counter() - t) / REPS)
    v.sort()
    return v[len(v) // 2]


x = (cp.arange(N, dtype=cp.float32) % 1000) * cp.float32(1e-3)
y = x.copy()
dst = cp.empty_like(x)
a = cp.float32(1.0001)

t0 = time.perf_counter()
saxpy = cp.ElementwiseKernel("float32 a, float32 x", "float32 y", "y = a * x + y", "atomr_saxpy")
saxpy(a, x, y)
cp.cuda.Device().synchronize()
first_saxpy = time.perf_counter() - t0
t0 = time.perf_counter()
total = cp.ReductionKernel("float32 x", "float32 y", "x", "a + b", "y = a", "0", "atomr_sum")
total(x)
cp.cuda.Device().synchronize()
first_sum = time.perf_counter() - t0

t_copy = timed(lambda: cp.copyto(dst, x))
t_saxpy = timed(lambda: saxpy(a, x, y))
t_sum = timed(lambda: total(x))
gb = N * 4
print(f"RESULT | CuPy d2d copy 256 MiB | {2 * gb / t_copy / 1e12:.2f} TB/s ({t_copy * 1e6:.1f} us)")
print(f"RESULT | CuPy ElementwiseKernel saxpy 256 MiB f32 | {3 * gb / t_saxpy / 1e12:.2f} TB/s ({t_saxpy * 1e6:.1f} us)")
print(f"RESULT | CuPy ReductionKernel sum 256 MiB f32 | {gb / t_sum / 1e12:.2f} TB/s ({t_sum * 1e6:.1f} us)")
print(f"RESULT | CuPy first call (compile or CuPy disk-cache hit + launch) | saxpy {first_saxpy * 1e3:.2f} ms, sum {first_sum * 1e3:.2f} ms")
