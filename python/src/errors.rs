//! Python exceptions for the runtime's errors: one class per kind of `GpuError`, all
//! under `atomr_accel_cuda.GpuError`, so Python code catches as precisely as Rust code
//! matches.

use atomr_accel_cuda::GpuError as E;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::PyErr;

pyo3::create_exception!(atomr_accel_cuda, GpuError, PyException, "Every error of the runtime.");
pyo3::create_exception!(
    atomr_accel_cuda,
    InvalidArgument,
    GpuError,
    "A bad argument: shape, dtype, device, layout."
);
pyo3::create_exception!(
    atomr_accel_cuda,
    Stale,
    GpuError,
    "A buffer from before its device's context was rebuilt."
);
pyo3::create_exception!(
    atomr_accel_cuda,
    OutOfMemory,
    GpuError,
    "The device has no room for the allocation."
);
pyo3::create_exception!(
    atomr_accel_cuda,
    Unsupported,
    GpuError,
    "Not available on this device or build."
);
pyo3::create_exception!(
    atomr_accel_cuda,
    DeviceLost,
    GpuError,
    "The device failed and is not coming back."
);
pyo3::create_exception!(
    atomr_accel_cuda,
    Timeout,
    GpuError,
    "No answer within the request timeout."
);
pyo3::create_exception!(
    atomr_accel_cuda,
    LibraryError,
    GpuError,
    "A CUDA library (cuBLAS, cuFFT, …) failed."
);
pyo3::create_exception!(
    atomr_accel_cuda,
    NumericalError,
    GpuError,
    "A singular matrix, no convergence."
);

/// The Python exception for `e`, its message the runtime's own.
pub fn to_py(e: E) -> PyErr {
    let msg = e.to_string();
    match e {
        E::InvalidArgument(_) => InvalidArgument::new_err(msg),
        E::Stale { .. } => Stale::new_err(msg),
        E::OutOfMemory { .. } => OutOfMemory::new_err(msg),
        E::Unsupported(_) => Unsupported::new_err(msg),
        E::DeviceLost(_) | E::ContextPoisoned { .. } => DeviceLost::new_err(msg),
        E::Timeout(_) => Timeout::new_err(msg),
        E::Library { .. } => LibraryError::new_err(msg),
        E::Numerical { .. } => NumericalError::new_err(msg),
        _ => GpuError::new_err(msg),
    }
}

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("GpuError", py.get_type::<GpuError>())?;
    m.add("InvalidArgument", py.get_type::<InvalidArgument>())?;
    m.add("Stale", py.get_type::<Stale>())?;
    m.add("OutOfMemory", py.get_type::<OutOfMemory>())?;
    m.add("Unsupported", py.get_type::<Unsupported>())?;
    m.add("DeviceLost", py.get_type::<DeviceLost>())?;
    m.add("Timeout", py.get_type::<Timeout>())?;
    m.add("LibraryError", py.get_type::<LibraryError>())?;
    m.add("NumericalError", py.get_type::<NumericalError>())?;
    Ok(())
}

/// `InvalidArgument` with `msg`, for checks made on the Python side of the binding.
pub fn invalid(msg: impl Into<String>) -> PyErr {
    InvalidArgument::new_err(msg.into())
}
