"""GPU acceleration through the actor model, from Python.

Open a device, move arrays to it and back, run GEMM, FFT, reductions, sort and random
fills on it, and share its buffers with PyTorch, CuPy and NumPy through DLPack without a
copy::

    import numpy as np
    import atomr_accel_cuda as ac

    dev = ac.Device("auto")            # a GPU when one is usable, else the CPU device
    a = dev.upload(np.random.rand(64, 32).astype(np.float32))
    b = dev.upload(np.random.rand(32, 16).astype(np.float32))
    c = dev.matmul(a, b).numpy()       # row-major, like NumPy
    view = np.from_dlpack(a)           # the same memory (CPU device), no copy
"""

from ._native import (  # noqa: F401
    Buffer,
    Device,
    DeviceLost,
    GpuError,
    InvalidArgument,
    LibraryError,
    NumericalError,
    OutOfMemory,
    Stale,
    Timeout,
    Unsupported,
)

__all__ = [
    "Buffer",
    "Device",
    "DeviceLost",
    "GpuError",
    "InvalidArgument",
    "LibraryError",
    "NumericalError",
    "OutOfMemory",
    "Stale",
    "Timeout",
    "Unsupported",
]
