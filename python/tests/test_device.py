"""The Python package on the device at hand (the CPU device in CI; a GPU when
ATOMR_TEST_DEVICE=cuda): every operation against a float64 NumPy reference on fresh
random data, DLPack round trips that share memory (same address, writes seen both
ways), and the typed exceptions."""

import os

import numpy as np
import pytest

import atomr_accel_cuda as ac

KIND = os.environ.get("ATOMR_TEST_DEVICE", "cpu")
rng = np.random.default_rng()


@pytest.fixture(scope="module")
def dev():
    return ac.Device(KIND)


def test_opens_the_device_asked_for(dev):
    assert dev.backend == ("cuda" if KIND.startswith("cuda") else "cpu")
    assert dev.name


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "complex64", "complex128"])
def test_upload_download_round_trip(dev, dtype):
    x = (rng.standard_normal((7, 5)) * 50).astype(dtype)
    if np.issubdtype(x.dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((7, 5)).astype(dtype)
    b = dev.upload(x)
    assert b.shape == [7, 5] and b.dtype == dtype and b.size == 35
    back = b.numpy()
    assert back.dtype == x.dtype and back.shape == x.shape
    np.testing.assert_array_equal(back, x)


def test_upload_takes_non_contiguous_arrays(dev):
    x = rng.standard_normal((6, 8))[:, ::2]
    np.testing.assert_array_equal(dev.upload(x).numpy(), x)


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-5), ("float64", 1e-12)])
def test_matmul_is_row_major_like_numpy(dev, dtype, tol):
    a, b = rng.standard_normal((33, 20)), rng.standard_normal((20, 17))
    got = dev.matmul(dev.upload(a.astype(dtype)), dev.upload(b.astype(dtype))).numpy()
    want = a.astype(dtype).astype(np.float64) @ b.astype(dtype).astype(np.float64)
    assert got.shape == (33, 17)
    assert np.max(np.abs(got - want)) / np.max(np.abs(want)) < tol


def conv2d_reference(x, w, stride, padding, dilation, groups):
    """torch.nn.functional.conv2d in float64 NumPy: NCHW input, [K, C/g, R, S] filters."""
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    p = (h + 2 * ph - dh * (r - 1) - 1) // sh + 1
    q = (wd + 2 * pw - dw * (s - 1) - 1) // sw + 1
    y = np.zeros((n, k, p, q))
    kg = k // groups
    for f in range(k):
        g = f // kg
        for i in range(r):
            for j in range(s):
                patch = xp[:, g * cg:(g + 1) * cg, i * dh:i * dh + sh * p:sh, j * dw:j * dw + sw * q:sw]
                y[:, f] += np.einsum("ncpq,c->npq", patch[:, :, :p, :q], w[f, :, i, j])
    return y


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-4), ("float64", 1e-12)])
def test_conv2d_like_torch(dev, dtype, tol):
    x = rng.standard_normal((2, 4, 9, 8)).astype(dtype)
    w = rng.standard_normal((6, 2, 3, 2)).astype(dtype)
    got = dev.conv2d(dev.upload(x), dev.upload(w), stride=(2, 1), padding=1, dilation=(1, 2), groups=2).numpy()
    want = conv2d_reference(x.astype(np.float64), w.astype(np.float64), (2, 1), (1, 1), (1, 2), 2)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= tol * np.max(np.abs(want))


def test_pooling_like_torch(dev):
    x = rng.standard_normal((2, 3, 7, 6))
    got = dev.max_pool2d(dev.upload(x), 3, stride=2, padding=1).numpy()
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    want = np.stack([[[[xp[n, c, 2 * i:2 * i + 3, 2 * j:2 * j + 3].max() for j in range(3)] for i in range(4)]
                      for c in range(3)] for n in range(2)])
    np.testing.assert_array_equal(got, want)
    got = dev.avg_pool2d(dev.upload(x), 2).numpy()
    np.testing.assert_allclose(got, x[:, :, :6, :].reshape(2, 3, 3, 2, 3, 2).mean(axis=(3, 5)), rtol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_like_torch(dev, causal):
    q, k, v = (rng.standard_normal(s) for s in ((2, 3, 5, 16), (2, 3, 7, 16), (2, 3, 7, 16)))
    got = dev.scaled_dot_product_attention(dev.upload(q), dev.upload(k), dev.upload(v), is_causal=causal).numpy()
    s = q @ k.swapaxes(-1, -2) / 4.0
    if causal:
        s = np.where(np.tril(np.ones((5, 7), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    want = (p / p.sum(axis=-1, keepdims=True)) @ v
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_fft_along_the_last_axis(dev):
    x = (rng.standard_normal((4, 64)) + 1j * rng.standard_normal((4, 64))).astype(np.complex128)
    got = dev.fft(dev.upload(x)).numpy()
    np.testing.assert_allclose(got, np.fft.fft(x, axis=-1), rtol=1e-10, atol=1e-10)
    back = dev.fft(dev.upload(got), inverse=True).numpy() / 64
    np.testing.assert_allclose(back, x, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8"])
def test_reductions(dev, dtype):
    x = (rng.standard_normal(10_001) * 100).astype(dtype) if "int" in dtype else rng.standard_normal(10_001).astype(dtype)
    b = dev.upload(x)
    ref = x.astype(np.float64)
    tol = 1e-3 if dtype == "float32" else 1e-9
    assert abs(dev.sum(b) - ref.sum()) <= tol * max(1.0, np.abs(ref).sum())
    assert dev.min(b) == x.min() and dev.max(b) == x.max()
    assert dev.argmin(b) == int(np.argmin(x)) and dev.argmax(b) == int(np.argmax(x))
    if "int" in dtype:
        assert isinstance(dev.sum(b), int)


def test_sort_in_place(dev):
    x = rng.standard_normal(5000).astype(np.float32)
    b = dev.upload(x)
    dev.sort(b)
    np.testing.assert_array_equal(b.numpy(), np.sort(x))


def test_random_fills(dev):
    b = dev.zeros([1 << 16], "float64")
    dev.seed(11)
    dev.normal(b, 2.0, 0.5)
    v = b.numpy()
    assert abs(v.mean() - 2.0) < 0.02 and abs(v.std() - 0.5) < 0.02
    dev.uniform(b)
    v = b.numpy()
    assert v.min() > 0.0 and v.max() <= 1.0 and abs(v.mean() - 0.5) < 0.01


def test_typed_exceptions(dev):
    a = dev.upload(np.ones((3, 4), np.float32))
    with pytest.raises(ac.InvalidArgument, match="inner extents"):
        dev.matmul(a, a)
    with pytest.raises(ac.InvalidArgument, match="does not take int32"):
        dev.fft(dev.upload(np.ones(8, np.int32)))
    with pytest.raises(ac.InvalidArgument):
        dev.matmul(a, dev.upload(np.ones((4, 2), np.float64)))
    with pytest.raises(ac.InvalidArgument):
        ac.Device("tpu")
    assert issubclass(ac.Stale, ac.GpuError) and issubclass(ac.OutOfMemory, ac.GpuError)
    with pytest.raises(ac.OutOfMemory):
        dev.zeros([1 << 40], "float64")


@pytest.mark.skipif(KIND != "cpu", reason="NumPy shares host memory: the CPU device")
def test_numpy_shares_memory_both_ways(dev):
    x = rng.standard_normal(1000)
    b = dev.upload(x)
    view = np.from_dlpack(b)
    assert view.ctypes.data == b.data_ptr, "numpy.from_dlpack(buffer) is the buffer itself"
    np.testing.assert_array_equal(view, x)
    # A device write shows in the NumPy view: the same memory.
    dev.sort(b)
    np.testing.assert_array_equal(view, np.sort(x))
    # A NumPy array becomes a buffer without a copy, and device writes show in it.
    arr = rng.standard_normal((10, 10))
    shared = dev.from_dlpack(arr)
    assert shared.data_ptr == arr.ctypes.data and shared.shape == [10, 10]
    expect = np.sort(arr.ravel())
    dev.sort(shared)
    np.testing.assert_array_equal(arr.ravel(), expect)
    # ... and keeps it alive after NumPy lets go.
    addr = shared.data_ptr
    del arr
    assert shared.data_ptr == addr
    np.testing.assert_array_equal(shared.numpy().ravel(), expect)


def test_bad_dlpack_imports(dev):
    if KIND == "cpu":
        with pytest.raises(ac.InvalidArgument, match="compact row-major"):
            dev.from_dlpack(np.ones((4, 4))[:, ::2])
        with pytest.raises(ac.InvalidArgument, match="element type"):
            dev.from_dlpack(np.ones(4, dtype=np.bool_))
    else:
        with pytest.raises(ac.InvalidArgument, match="not of this device"):
            dev.from_dlpack(np.ones(4))
    with pytest.raises(BufferError):
        dev.upload(np.ones(3)).__dlpack__(dl_device=(7, 3))


def test_kernels_launch_by_name(dev):
    names = dict(dev.kernels())
    assert "axpy" in names and "f32" in names["axpy"]
    x, y = rng.standard_normal(3000), rng.standard_normal(3000)
    bx, by = dev.upload(x), dev.upload(y)
    dev.launch("axpy", 1.75, bx, by, elements=3000, dtypes="f64")
    # A GPU fuses a·x + y (one rounding): within an ulp of the terms, not of the result.
    np.testing.assert_allclose(by.numpy(), 1.75 * x + y, rtol=1e-14, atol=1e-14)
    y32 = rng.standard_normal(1000).astype(np.float32)
    b32 = dev.upload(y32)
    dev.launch("scale_shift", np.float32(2.0), np.float32(-1.0), b32, elements=1000, dtypes="f32")
    np.testing.assert_allclose(b32.numpy(), 2.0 * y32.astype(np.float64) - 1.0, rtol=1e-6, atol=1e-6)
    with pytest.raises(ac.InvalidArgument, match="8 bytes of scalar where the kernel takes 4"):
        dev.launch("scale_shift", 2.0, -1.0, b32, elements=1000, dtypes="f32")
    with pytest.raises(ac.InvalidArgument, match="no #\\[kernel\\] named"):
        dev.launch("nope", b32, elements=10)
    with pytest.raises(ac.InvalidArgument, match="elements=N or grid"):
        dev.launch("axpy", 1.0, bx, by, dtypes="f64")
