"""torch.einsum for the contractions of benches/einsum.rs (same shapes, dtypes and
random data), each call synchronized, median of 7 rounds of 20. Run on the GPU host:
python3 benches/einsum_torch.py
"""
import torch

from torch_timing import timed


b, h, s, d, n = 8, 16, 1024, 64, 4096
attn = 2.0 * b * h * s * s * d
cases = [
    ("scores bhqd,bhkd->bhqk 8x16x1024x64", "bhqd,bhkd->bhqk", (b, h, s, d), (b, h, s, d), attn),
    ("values bhqk,bhkd->bhqd 8x16x1024x64", "bhqk,bhkd->bhqd", (b, h, s, s), (b, h, s, d), attn),
    ("matmul ij,jk->ik 4096", "ij,jk->ik", (n, n), (n, n), 2.0 * n ** 3),
    ("interleaved scores bqhd,bkhd->bhqk 8x1024x16x64", "bqhd,bkhd->bhqk", (b, s, h, d), (b, s, h, d), attn),
]
for dtype, name in ((torch.float32, "f32"), (torch.float16, "f16")):
    for what, eq, sa, sb, flops in cases:
        if name == "f16" and what.startswith("matmul"):
            continue
        x = torch.rand(sa, device="cuda", dtype=dtype) * 2 - 1
        y = torch.rand(sb, device="cuda", dtype=dtype) * 2 - 1
        t = timed(lambda: (torch.einsum(eq, x, y), torch.cuda.synchronize()))
        print(f"RESULT | einsum.{what} {name} | torch {t * 1e6:.1f} µs per call ({flops / t / 1e12:.1f} TFLOP/s)")
