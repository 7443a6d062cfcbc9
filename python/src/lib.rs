//! Python bindings of atomr-accel-cuda (the `atomr_accel_cuda` package): devices,
//! buffers that cross to PyTorch, CuPy and NumPy through DLPack without a copy, and the
//! device's GEMM, FFT, reductions, sort and random fills.

mod buffer;
mod capsule;
mod device;
mod dtype;
mod errors;
mod kernels;
mod runtime;

use pyo3::prelude::*;

/// The native module; `atomr_accel_cuda/__init__.py` re-exports it.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<device::Device>()?;
    m.add_class::<buffer::Buffer>()?;
    m.add_class::<buffer::HostArray>()?;
    errors::register(m)?;
    Ok(())
}
