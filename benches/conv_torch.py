"""PyTorch's conv2d (forward, and the two backward directions through
torch.ops.aten.convolution_backward) and max_pool2d for the shapes of benches/conv.rs,
each call synchronized, median of 7 rounds of 20. cuDNN's heuristics pick the algorithm
(torch.backends.cudnn.benchmark off, PyTorch's default) and f32 stays f32 (TF32 off), as
in ours. Run on the GPU host: python3 benches/conv_torch.py
"""
import torch
import torch.nn.functional as F

from torch_timing import timed

torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = False


def sync(t):
    torch.cuda.synchronize()
    return t


for dtype, name, fmt in ((torch.float32, "f32", torch.contiguous_format), (torch.float16, "f16", torch.channels_last)):
    label = ("nchw" if fmt == torch.contiguous_format else "nhwc") + " " + name
    x = (torch.rand(32, 64, 56, 56, device="cuda", dtype=dtype) * 2 - 1).to(memory_format=fmt)
    w = (torch.rand(64, 64, 3, 3, device="cuda", dtype=dtype) * 2 - 1).to(memory_format=fmt)
    dy = (torch.rand(32, 64, 56, 56, device="cuda", dtype=dtype) * 2 - 1).to(memory_format=fmt)
    flops = 2.0 * 32 * 64 * 56 * 56 * 64 * 9

    def bwd(mask):
        return lambda: sync(torch.ops.aten.convolution_backward(
            dy, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, mask))

    for what, f in (("conv2d", lambda: sync(F.conv2d(x, w, padding=1))),
                    ("conv2d_backward_data", bwd([True, False, False])),
                    ("conv2d_backward_filter", bwd([False, True, False]))):
        s = timed(f)
        print(f"RESULT | dnn.{what} 32x64x56x56 k64 3x3 {label} | torch {s * 1e6:.1f} µs ({flops / s / 1e12:.1f} TFLOP/s)")
    px = (torch.rand(32, 64, 112, 112, device="cuda", dtype=dtype) * 2 - 1).to(memory_format=fmt)
    s = timed(lambda: sync(F.max_pool2d(px, 3, 2, 1)))
    gbs = (px.numel() + px.numel() // 4) * px.element_size() / s / 1e9
    print(f"RESULT | dnn.max_pool2d 32x64x112x112 3x3/2 {label} | torch {s * 1e6:.1f} µs, {gbs:.0f} GB/s")
