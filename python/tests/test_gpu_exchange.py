"""On a GPU (ATOMR_TEST_DEVICE=cuda): PyTorch tensors and CuPy arrays cross both ways
without a copy — the same device address, writes seen on both sides — and a tensor runs
through a #[kernel] in place. Each library's part is skipped where it is not installed."""

import os
import time

import numpy as np
import pytest

import atomr_accel_cuda as ac

pytestmark = pytest.mark.skipif(not os.environ.get("ATOMR_TEST_DEVICE", "").startswith("cuda"), reason="needs ATOMR_TEST_DEVICE=cuda")


@pytest.fixture(scope="module")
def dev():
    return ac.Device(os.environ["ATOMR_TEST_DEVICE"])


def test_torch_tensors_cross_both_ways(dev):
    torch = pytest.importorskip("torch")
    t = torch.randn(4096, device="cuda", dtype=torch.float64)
    want = t.cpu().numpy().copy()
    b = dev.from_dlpack(t)
    assert b.data_ptr == t.data_ptr(), "the buffer is the tensor's memory"
    dev.launch("scale_shift", 3.0, 0.5, b, elements=4096, dtypes="f64")
    torch.cuda.synchronize()
    # One fused multiply-add on the GPU: within an ulp of the terms, not of the result.
    np.testing.assert_allclose(t.cpu().numpy(), 3.0 * want + 0.5, rtol=1e-14, atol=1e-14)
    # Ours to torch: the same address, torch's writes seen by us.
    ours = dev.upload(np.arange(1000, dtype=np.float32))
    u = torch.from_dlpack(ours)
    assert u.data_ptr() == ours.data_ptr and u.device.type == "cuda"
    u.mul_(2)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(ours.numpy(), 2 * np.arange(1000, dtype=np.float32))
    # bfloat16 and half cross too.
    for dt in (torch.float16, torch.bfloat16):
        h = torch.randn(64, device="cuda").to(dt)
        assert dev.from_dlpack(h).data_ptr == h.data_ptr()


def test_cupy_arrays_cross_both_ways(dev):
    cp = pytest.importorskip("cupy")
    a = cp.random.standard_normal(5000)
    b = dev.from_dlpack(a)
    assert b.data_ptr == a.data.ptr
    dev.sort(b)
    np.testing.assert_array_equal(cp.asnumpy(a), np.sort(cp.asnumpy(a)))
    ours = dev.upload(np.linspace(0, 1, 777))
    c = cp.from_dlpack(ours)
    assert c.data.ptr == ours.data_ptr
    assert abs(float(c.sum()) - dev.sum(ours)) < 1e-9


def test_exchange_cost(dev, capsys):
    torch = pytest.importorskip("torch")
    t = torch.randn(1 << 20, device="cuda")
    ours = dev.upload(np.ones(1 << 20, np.float32))
    n = 2000
    for _ in range(100):
        dev.from_dlpack(t)
        torch.from_dlpack(ours)
    t0 = time.perf_counter()
    for _ in range(n):
        dev.from_dlpack(t)
    t_in = (time.perf_counter() - t0) / n * 1e6
    t0 = time.perf_counter()
    for _ in range(n):
        torch.from_dlpack(ours)
    t_out = (time.perf_counter() - t0) / n * 1e6
    with capsys.disabled():
        print(f"\nexchange cost: torch -> atomr {t_in:.1f} us, atomr -> torch {t_out:.1f} us (mean of {n})")
