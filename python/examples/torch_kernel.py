"""A PyTorch tensor through one of our #[kernel]s and back, with no copy.

The tensor's memory becomes a Buffer (DLPack), the kernel `scale_shift` runs on it in
place, and PyTorch sees the result in the same tensor: the addresses printed are equal.
Without a CUDA build of PyTorch (or without a GPU) the same flow runs on a NumPy array
and the CPU device.

    python python/examples/torch_kernel.py
"""

import numpy as np

import atomr_accel_cuda as ac

dev = ac.Device("auto")
try:
    import torch

    have_torch_cuda = torch.cuda.is_available() and dev.backend == "cuda"
except ImportError:
    have_torch_cuda = False

if have_torch_cuda:
    t = torch.randn(1 << 20, device="cuda", dtype=torch.float32)
    before = t.cpu().numpy().astype(np.float64)
    b = dev.from_dlpack(t)
    print(f"torch tensor at {t.data_ptr():#x}, our buffer at {b.data_ptr:#x}: {'the same memory' if t.data_ptr() == b.data_ptr else 'A COPY'}")
    dev.launch("scale_shift", np.float32(2.0), np.float32(1.0), b, elements=t.numel(), dtypes="f32")
    torch.cuda.synchronize()
    after = t.cpu().numpy().astype(np.float64)
    back = torch.from_dlpack(b)
    print(f"and back to torch: {back.data_ptr():#x}")
    assert t.data_ptr() == b.data_ptr == back.data_ptr()
else:
    a = np.random.default_rng().standard_normal(1 << 20).astype(np.float32)
    before = a.astype(np.float64)
    b = dev.from_dlpack(a)
    print(f"({dev.backend} device, no CUDA PyTorch: a NumPy array instead)")
    print(f"array at {a.ctypes.data:#x}, our buffer at {b.data_ptr:#x}: {'the same memory' if a.ctypes.data == b.data_ptr else 'A COPY'}")
    dev.launch("scale_shift", np.float32(2.0), np.float32(1.0), b, elements=a.size, dtypes="f32")
    after = a.astype(np.float64)
    assert a.ctypes.data == b.data_ptr

err = np.max(np.abs(after - (2.0 * before + 1.0)))
print(f"y = 2x + 1 in place: max error {err:.1e}")
assert err < 1e-5
