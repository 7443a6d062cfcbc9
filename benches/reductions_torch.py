"""PyTorch's and CuPy's sum / min / max / argmin / argmax (each call's answer read back to
the host, as `Device::sum` returns a number) over 64M and 1M f32 (sum / max / argmax of
bf16 too: torch only, CuPy has no bf16) and cumsum (synchronized) of f32, median
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
        "min": (lambda: xt.min().item(), lambda: float(xc.min())),
        "max": (lambda: xt.max().item(), lambda: float(xc.max())),
        "argmin": (lambda: xt.argmin().item(), lambda: int(xc.argmin())),
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
    xb = xt.to(torch.bfloat16)
    for op, f in (
        ("sum", lambda: xb.sum().item()),
        ("max", lambda: xb.max().item()),
        ("argmax", lambda: xb.argmax().item()),
    ):
        s = timed(f, reps)
        print(f"RESULT | reductions.{op} {n >> 20}M bf16 | torch {s * 1e6:.1f} µs per call, {n * 2 / s / 1e9:.0f} GB/s")
    xi = (torch.arange(n, device="cuda", dtype=torch.int32) % 1000) - 500
    s = timed(lambda: xi.sum().item(), reps)
    print(f"RESULT | reductions.sum {n >> 20}M i32 | torch {s * 1e6:.1f} µs per call, {n * 4 / s / 1e9:.0f} GB/s")
