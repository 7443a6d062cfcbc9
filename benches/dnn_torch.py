"""PyTorch's softmax, layer_norm, rms_norm, GELU(x + bias) (tanh form) and
scaled_dot_product_attention for the shapes of benches/dnn.rs, each call synchronized,
median of 7 rounds of 20 (5 for attention). Run on the GPU host: python3 benches/dnn_torch.py
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_timing import timed


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

shapes = [(dtype, name, (8, 16, 1024, 64)) for dtype, name in ((torch.float32, "f32"), (torch.float16, "f16"), (torch.bfloat16, "bf16"))]
# A long sequence: 2 GiB of f16 scores in all, 128 MiB a head.
shapes.append((torch.float16, "f16", (1, 16, 8192, 64)))
for dtype, name, (b, h, l, d) in shapes:
    q, k, v = (torch.rand(b, h, l, d, device="cuda", dtype=dtype) * 2 - 1 for _ in range(3))
    for causal in (False, True):
        flops = 4.0 * b * h * l * l * d / (2.0 if causal else 1.0)
        tag = " causal" if causal else ""
        s = timed(lambda: sync(F.scaled_dot_product_attention(q, k, v, is_causal=causal)), reps=5)
        print(f"RESULT | dnn.attention {b}x{h}x{l}x{d}{tag} {name} | torch {s * 1e6:.1f} µs per call, {flops / s / 1e12:.1f} TFLOP/s")
        # Each fused backend by name (cuDNN's is what AttentionMethod::Cudnn runs).
        for backend, label in ((SDPBackend.CUDNN_ATTENTION, "cudnn"), (SDPBackend.FLASH_ATTENTION, "flash")):
            if dtype == torch.float32:
                continue
            with sdpa_kernel(backend):
                s = timed(lambda: sync(F.scaled_dot_product_attention(q, k, v, is_causal=causal)), reps=5)
            print(f"RESULT | dnn.attention {b}x{h}x{l}x{d}{tag} {name} | torch {label} {s * 1e6:.1f} µs per call, {flops / s / 1e12:.1f} TFLOP/s")
        # PyTorch's "math" attention: the scores in memory between two batched GEMMs, as
        # our AttentionMethod::Gemm.
        with sdpa_kernel(SDPBackend.MATH):
            s = timed(lambda: sync(F.scaled_dot_product_attention(q, k, v, is_causal=causal)), reps=5)
        print(f"RESULT | dnn.attention {b}x{h}x{l}x{d}{tag} {name} | torch math {s * 1e6:.1f} µs per call, {flops / s / 1e12:.1f} TFLOP/s")
