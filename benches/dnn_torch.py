"""PyTorch's softmax, layer_norm, rms_norm and GELU(x + bias) (tanh form) for the shapes
of benches/dnn.rs, each call synchronized, median of 7 rounds of 20. Run on the GPU
host: python3 benches/dnn_torch.py
"""
import time

import torch
import torch.nn.functional as F


def timed(f, reps=20):
    for _ in range(3):
        f()
    v = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(reps):
            f()
        v.append((time.perf_counter() - t) / reps)
    v.sort()
    return v[len(v) // 2]


def sync(t):
    torch.cuda.synchronize()
    return t


for dtype, name in ((torch.float32, "f32"), (torch.float16, "f16")):
    for what, rows, cols in (("softmax", 8 * 16 * 1024, 1024), ("layer_norm", 16384, 4096),
                             ("rms_norm", 16384, 4096), ("bias_gelu", 16384, 4096)):
        x = torch.rand(rows, cols, device="cuda", dtype=dtype) * 2 - 1
        g = torch.rand(cols, device="cuda", dtype=dtype)
        b = torch.rand(cols, device="cuda", dtype=dtype)
        f = {
            "softmax": lambda: sync(torch.softmax(x, -1)),
            "layer_norm": lambda: sync(F.layer_norm(x, (cols,), g, b)),
            "rms_norm": lambda: sync(F.rms_norm(x, (cols,), g, 1e-5)),
            "bias_gelu": lambda: sync(F.gelu(x + b, approximate="tanh")),
        }[what]
        s = timed(f)
        gbs = 2 * x.numel() * x.element_size() / s / 1e9
        print(f"RESULT | dnn.{what} {rows}x{cols} {name} | torch {s * 1e6:.1f} µs per call, {gbs:.0f} GB/s")
