"""PyTorch's and CuPy's sum / max / argmax (each call's answer read back to the host, as
`Device::sum` returns a number) and cumsum (synchronized) over 64M and 1M f32, median
of 7 rounds — the baseline for benches/reductions.rs. Run on the GPU host: python3 benches/reductions_torch.py
"""
import time

import cupy as cp
import torch

from torch_timing import timed


for n in (64 << 20, 1 << 20):
    reps = 20 if n > (1 << 20) else 200
    xt = (torch.arange(n, device="cuda", dtype=torch.float32) % 1000) * 1e-3
    xc = (cp.arange(n, dtype=cp.float32) % 1000) * cp.float32(1e-3)
    ops = {
        "sum": (lambda: xt.sum().item(), lambda: float(xc.sum())),
        "max": (lambda: xt.max().item(), lambda: float(xc.max())),
        "argmax": (lambda: xt.argmax().item(), lambda: int(xc.argmax())),
        # A prefix sum into a new array, synchronized (Device::inclusive_scan returns
        # when the GPU is done).
        "cumsum": (
            lambda: (torch.cumsum(xt, 0), torch.cuda.synchronize()),
            lambda: (cp.cumsum(xc), cp.cuda.runtime.deviceSynchronize()),
        ),
    }
    for op, (ft, fc) in ops.items():
        for lib, f in (("torch", ft), ("cupy", fc)):
            s = timed(f, reps)
            print(f"RESULT | reductions.{op} {n >> 20}M f32 | {lib} {s * 1e6:.1f} µs per call, {n * 4 / s / 1e9:.0f} GB/s")
    xi = (torch.arange(n, device="cuda", dtype=torch.int32) % 1000) - 500
    s = timed(lambda: xi.sum().item(), reps)
    print(f"RESULT | reductions.sum {n >> 20}M i32 | torch {s * 1e6:.1f} µs per call, {n * 4 / s / 1e9:.0f} GB/s")
