"""PyTorch's `torch.sort(stable=True)` and CuPy's `sort` / `argsort` (both CUB radix
sorts) of the keys benches/sort.rs sorts — 1M and 64M, f32 and u32 (torch: int32, its
sort of uint32 being limited; the same 4-byte radix sort) — keys only (`sort`; torch's
also returns int64 indices) and with u32 values (the values gathered through the sort's
indices), synchronized, median of 7 rounds. Run on the GPU host: python3 benches/sort_torch.py
"""
import cupy as cp
import torch

from torch_timing import timed


def sync():
    torch.cuda.synchronize()
    cp.cuda.runtime.deviceSynchronize()


for n in (1 << 20, 64 << 20):
    reps = 3 if n > (1 << 20) else 40
    h = (torch.arange(n, device="cuda", dtype=torch.int64) * 2654435761) % (1 << 32)
    cases = {
        "f32": ((h % 2000003).to(torch.float32) - 1e6) * 1e-3,
        "u32": h.to(torch.int32),  # torch's int32 (the same bits, a 4-byte radix sort)
    }
    vt = torch.arange(n, device="cuda", dtype=torch.int32)
    vc = cp.arange(n, dtype=cp.uint32)
    for dtype, kt in cases.items():
        kc = cp.asarray(h.to(torch.int64).cpu().numpy().astype("uint32")) if dtype == "u32" else cp.asarray(kt)
        ops = {
            "keys": (lambda: (torch.sort(kt, stable=True), sync()), lambda: (cp.sort(kc), sync())),
            "pairs": (
                lambda: (vt[torch.sort(kt, stable=True).indices], sync()),
                lambda: (vc[cp.argsort(kc)], sync()),
            ),
        }
        for mode, (ft, fc) in ops.items():
            for lib, f in (("torch", ft), ("cupy", fc)):
                s = timed(f, reps)
                print(f"RESULT | sort {mode} {n >> 20}M {dtype} | {lib} {s * 1e6:.1f} µs per call, {n / s / 1e9:.2f} G keys/s")
