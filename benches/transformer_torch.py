"""The transformer block of examples/transformer_block.rs in PyTorch eager (and
torch.compile where it works): pre-norm, non-causal attention as einsum + softmax +
einsum (and, a second row, through F.scaled_dot_product_attention), GELU (tanh form) MLP, residuals; f32 and bf16; the same shape as the example's
arguments. Each block synchronized, median of 7 rounds of 5.
Run on the GPU host: python3 benches/transformer_torch.py [batch seq model heads]
"""
import sys
import time

import torch
import torch.nn.functional as F

b, t, d, h = (int(a) for a in (sys.argv[1:5] if len(sys.argv) >= 5 else (8, 1024, 1024, 16)))
f, dh = 4 * d, d // h


def block(x, p, sdpa=False):
    ln = F.layer_norm(x, (d,), p["g1"], p["be1"])
    q, k, v = ln @ p["wq"], ln @ p["wk"], ln @ p["wv"]
    heads = (b, t, h, dh)
    if sdpa:
        # F.scaled_dot_product_attention (flash / memory-efficient kernels) on [b, h, t, dh].
        qh, kh, vh = (y.view(heads).transpose(1, 2) for y in (q, k, v))
        o = F.scaled_dot_product_attention(qh, kh, vh).transpose(1, 2).reshape(b, t, d)
    else:
        s = torch.einsum("bqhc,bkhc->bhqk", q.view(heads), k.view(heads)) * (dh ** -0.5)
        o = torch.einsum("bhqk,bkhc->bqhc", torch.softmax(s, -1), v.view(heads)).reshape(b, t, d)
    hid = x + o @ p["wo"]
    u = F.gelu(F.layer_norm(hid, (d,), p["g2"], p["be2"]) @ p["w1"] + p["b1"], approximate="tanh")
    return hid + u @ p["w2"] + p["b2"]


def timed(fn, reps=5):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    v = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
            torch.cuda.synchronize()
        v.append((time.perf_counter() - t0) / reps)
    v.sort()
    return v[len(v) // 2]


flops = 2.0 * b * t * (4 * d * d + 2 * d * f) + 4.0 * b * t * t * d
for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
    g = torch.Generator(device="cuda").manual_seed(1)
    r = lambda *s, scale=1.0: (torch.rand(*s, device="cuda", dtype=dtype, generator=g) * 2 - 1) * scale
    p = {"wq": r(d, d, scale=d ** -0.5), "wk": r(d, d, scale=d ** -0.5), "wv": r(d, d, scale=d ** -0.5),
         "wo": r(d, d, scale=d ** -0.5), "w1": r(d, f, scale=d ** -0.5), "b1": r(f, scale=0.1),
         "w2": r(f, d, scale=f ** -0.5), "b2": r(d, scale=0.1), "g1": 1 + r(d, scale=0.2), "be1": r(d, scale=0.1),
         "g2": 1 + r(d, scale=0.2), "be2": r(d, scale=0.1)}
    x = r(b, t, d)
    with torch.no_grad():
        s = timed(lambda: block(x, p))
        print(f"RESULT | transformer block {b}x{t}x{d}, {h} heads {name} | torch eager {s * 1e3:.3f} ms ({flops / s / 1e12:.1f} TFLOP/s)")
        s = timed(lambda: block(x, p, sdpa=True))
        print(f"RESULT | transformer block {b}x{t}x{d}, {h} heads {name} | torch eager, SDPA {s * 1e3:.3f} ms ({flops / s / 1e12:.1f} TFLOP/s)")
        try:
            compiled = torch.compile(block)
            s = timed(lambda: compiled(x, p))
            print(f"RESULT | transformer block {b}x{t}x{d}, {h} heads {name} | torch.compile {s * 1e3:.3f} ms ({flops / s / 1e12:.1f} TFLOP/s)")
        except Exception as e:  # noqa: BLE001 — report and go on
            print(f"torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
