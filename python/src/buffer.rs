//! `Buffer`: a device buffer with a shape, as Python holds one. It speaks DLPack both
//! ways, so `torch.from_dlpack(buf)`, `cupy.from_dlpack(buf)` and `numpy.from_dlpack(buf)`
//! share its memory.

use std::sync::Arc;

use atomr_accel_cuda::interop::dlpack::ConsumerStream;
use atomr_accel_cuda::interop::Access;
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;

use crate::capsule::into_capsule;
use crate::device::Shared;
use crate::dtype::{any_type, AnyRef};
use crate::errors::{invalid, to_py};

/// A buffer of a device, with a shape (row-major).
#[pyclass(module = "atomr_accel_cuda", frozen)]
pub struct Buffer {
    pub(crate) dev: Arc<Shared>,
    pub(crate) r: AnyRef,
    pub(crate) shape: Vec<usize>,
}

impl Buffer {
    /// Elements in the buffer.
    pub(crate) fn size(&self) -> usize {
        self.shape.iter().product()
    }
}

#[pymethods]
impl Buffer {
    /// The extents.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.shape.clone()
    }

    /// The element type's NumPy name.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.r.dtype()
    }

    /// Elements in all.
    #[getter(size)]
    fn py_size(&self) -> usize {
        self.size()
    }

    fn __len__(&self) -> usize {
        self.shape.first().copied().unwrap_or(1)
    }

    /// The address of the first element (device memory on a GPU, host memory on the CPU
    /// device): what shows that an exchange shared memory rather than copying it.
    #[getter]
    fn data_ptr(&self) -> PyResult<u64> {
        let iop = &self.dev.iop;
        any_type!(&self.r, "data_ptr", x => match iop.stream() {
            Ok(s) => x.with_device_ptr(iop, s, Access::Read, |p| p).map_err(to_py),
            Err(_) => x.with_host(|v| v.as_ptr() as u64).map_err(to_py),
        })
    }

    /// The same buffer with other extents (their product unchanged): no copy.
    fn reshape(&self, shape: Vec<usize>) -> PyResult<Buffer> {
        if shape.iter().product::<usize>() != self.size() {
            return Err(invalid(format!("cannot reshape {:?} into {shape:?}", self.shape)));
        }
        Ok(Buffer {
            dev: self.dev.clone(),
            r: self.r.clone(),
            shape,
        })
    }

    /// A host copy as a NumPy array of this shape.
    fn numpy(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.dev.download(py, self)
    }

    /// `(device type, device id)` as DLPack names them: `(2, n)` for CUDA GPU `n`,
    /// `(1, 0)` for the CPU device.
    fn __dlpack_device__(&self) -> (i32, i32) {
        self.dev.dlpack_device()
    }

    /// This buffer as a DLPack capsule (the Python array-exchange protocol): the consumer
    /// shares its memory. `stream` is the consumer's CUDA stream (made to wait for the
    /// buffer's pending work); `max_version` ≥ (1, 0) gets the versioned ABI.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        if dl_device.is_some_and(|d| d != self.dev.dlpack_device()) {
            return Err(PyBufferError::new_err(
                "the buffer cannot be exported to another device: download it",
            ));
        }
        if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "this producer shares memory and does not copy: call numpy() for a copy",
            ));
        }
        let iop = &self.dev.iop;
        let consumer = if iop.is_cuda() {
            ConsumerStream::from_protocol(stream).map_err(to_py)?
        } else {
            ConsumerStream::Unordered
        };
        let shape = &self.shape[..];
        let shape = if shape.is_empty() { &[1][..] } else { shape };
        if max_version.is_some_and(|(major, _)| major >= 1) {
            let t = any_type!(&self.r, "__dlpack__", x => x.to_dlpack(iop, shape, None, consumer).map_err(to_py))?;
            into_capsule(py, t)
        } else {
            let t = any_type!(&self.r, "__dlpack__", x => x.to_dlpack_unversioned(iop, shape, None, consumer).map_err(to_py))?;
            into_capsule(py, t)
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "Buffer(shape={:?}, dtype={}, device={})",
            self.shape,
            self.r.dtype(),
            self.dev.describe()
        )
    }
}

/// A host copy NumPy takes through DLPack: what `Buffer.numpy()` hands over (the
/// downloaded vector itself, not a second copy), in the ABI NumPy asks for.
#[pyclass(module = "atomr_accel_cuda")]
pub struct HostArray {
    pub(crate) make: Option<MakeTensor>,
}

/// Builds the host tensor, versioned (`true`) or not.
pub(crate) type MakeTensor =
    Box<dyn FnOnce(bool) -> Result<crate::capsule::Taken, atomr_accel_cuda::GpuError> + Send + Sync>;

#[pymethods]
impl HostArray {
    fn __dlpack_device__(&self) -> (i32, i32) {
        (1, 0)
    }

    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &mut self,
        py: Python<'_>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let _ = (stream, dl_device, copy);
        let make = self
            .make
            .take()
            .ok_or_else(|| PyBufferError::new_err("exported already"))?;
        make(max_version.is_some_and(|(major, _)| major >= 1))
            .map_err(to_py)?
            .into_capsule(py)
    }
}
