"""PyTorch's matmuls on the shapes of benches/matmul.rs: n³ for f32 (TF32 off), TF32,
bf16, f16, FP8 E4M3 into bf16 (`torch._scaled_mm`) and bf16 with a fused bias + GELU
(`torch._addmm_activation`, cuBLASLt's epilogue) — each call synchronized, as
`Device::matmul` returns when its GPU work is done; median of 7 rounds of `reps` calls.
Random data in [-1, 1). Run on the GPU host: python3 benches/matmul_torch.py [n ...]
"""
import sys
import time

import torch


def timed(f, reps):
    v = []
    for _ in range(3):
        f()
        torch.cuda.synchronize()
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(reps):
            f()
            torch.cuda.synchronize()
        v.append((time.perf_counter() - t) / reps)
    v.sort()
    return v[len(v) // 2]


def rand(n, dtype):
    return (torch.rand(n, n, device="cuda") * 2 - 1).to(dtype)


for n in [int(a) for a in sys.argv[1:]] or [4096]:
    reps = 20
    a32, b32 = rand(n, torch.float32), rand(n, torch.float32)
    abf, bbf = rand(n, torch.bfloat16), rand(n, torch.bfloat16)
    a16, b16 = rand(n, torch.float16), rand(n, torch.float16)
    bias = rand(1, torch.bfloat16).reshape(-1).repeat(n)[:n]
    a8 = rand(n, torch.float32).to(torch.float8_e4m3fn)
    # _scaled_mm wants B column-major: the transpose of a row-major matrix.
    b8 = rand(n, torch.float32).to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda")

    def f32():
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.matmul(a32, b32)

    def tf32():
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.matmul(a32, b32)

    cases = {
        "f32": f32,
        "tf32": tf32,
        "bf16": lambda: torch.matmul(abf, bbf),
        "f16": lambda: torch.matmul(a16, b16),
        "fp8_e4m3_to_bf16": lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
        "bf16_bias_gelu": lambda: torch._addmm_activation(bias, abf, bbf, use_gelu=True),
    }
    for name, f in cases.items():
        s = timed(f, reps)
        print(f"RESULT | matmul.{name} {n} | torch {2 * n ** 3 / s / 1e12:.1f} TFLOP/s ({s * 1e3:.3f} ms per call)")
    torch.backends.cuda.matmul.allow_tf32 = False
