//! DLPack tensors as Python capsules, both ways: the `"dltensor_versioned"` (DLPack ≥ 1.0)
//! and `"dltensor"` capsules of Python's `__dlpack__` protocol.
//!
//! The protocol's ownership rule: a consumer renames the capsule to `"used_…"` and then
//! owns the tensor (calls its deleter); a capsule dropped unconsumed deletes its tensor
//! in the capsule's destructor.

use std::ffi::{c_void, CStr};

use atomr_accel_cuda::interop::dlpack::ffi::{DLManagedTensor, DLManagedTensorVersioned};
use atomr_accel_cuda::interop::dlpack::{DlpackTensor, ManagedTensor};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::errors::invalid;

/// A managed-tensor ABI and its capsule names.
pub trait Capsule: ManagedTensor {
    /// The name of an unconsumed capsule.
    const NAME: &'static CStr;
    /// The name a consumer gives it.
    const USED: &'static CStr;
}

impl Capsule for DLManagedTensorVersioned {
    const NAME: &'static CStr = c"dltensor_versioned";
    const USED: &'static CStr = c"used_dltensor_versioned";
}

impl Capsule for DLManagedTensor {
    const NAME: &'static CStr = c"dltensor";
    const USED: &'static CStr = c"used_dltensor";
}

/// Deletes the tensor of a capsule nobody consumed.
unsafe extern "C" fn destructor<M: Capsule>(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with a live capsule; only an unconsumed one (still named
    // `M::NAME`) owns its tensor.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, M::NAME.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(capsule, M::NAME.as_ptr()) as *mut M;
            if let Some(p) = std::ptr::NonNull::new(p) {
                drop(DlpackTensor::from_raw(p));
            }
        } else {
            ffi::PyErr_Clear();
        }
    }
}

/// `t` as a capsule a DLPack consumer takes.
pub fn into_capsule<M: Capsule>(py: Python<'_>, t: DlpackTensor<M>) -> PyResult<Py<PyAny>> {
    let ptr = t.into_raw();
    // SAFETY: a live managed tensor handed to the capsule, whose destructor (or the
    // consumer) deletes it once; the name is a static C string.
    unsafe {
        let cap = ffi::PyCapsule_New(ptr.as_ptr() as *mut c_void, M::NAME.as_ptr(), Some(destructor::<M>));
        if cap.is_null() {
            drop(DlpackTensor::from_raw(ptr));
            return Err(PyErr::fetch(py));
        }
        Ok(Py::from_owned_ptr(py, cap))
    }
}

/// A tensor taken from a producer's capsule, in whichever ABI it came.
pub enum Taken {
    /// DLPack ≥ 1.0.
    Versioned(DlpackTensor<DLManagedTensorVersioned>),
    /// The unversioned ABI.
    Legacy(DlpackTensor<DLManagedTensor>),
}

impl Taken {
    /// The tensor as a capsule again, in its ABI: handed on to a consumer.
    pub fn into_capsule(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self {
            Taken::Versioned(t) => into_capsule(py, t),
            Taken::Legacy(t) => into_capsule(py, t),
        }
    }
}

/// Consumes a capsule from `__dlpack__`: renames it as used and takes its tensor.
pub fn take(capsule: &Bound<'_, PyAny>) -> PyResult<Taken> {
    fn grab<M: Capsule>(capsule: &Bound<'_, PyAny>) -> Option<DlpackTensor<M>> {
        let raw = capsule.as_ptr();
        // SAFETY: `raw` is a live object (borrowed); the capsule calls check its type and
        // name, and a successful rename hands the tensor to us, exactly once.
        unsafe {
            if ffi::PyCapsule_IsValid(raw, M::NAME.as_ptr()) != 1 {
                ffi::PyErr_Clear();
                return None;
            }
            let p = std::ptr::NonNull::new(ffi::PyCapsule_GetPointer(raw, M::NAME.as_ptr()) as *mut M)?;
            if ffi::PyCapsule_SetName(raw, M::USED.as_ptr()) != 0 {
                ffi::PyErr_Clear();
                return None;
            }
            Some(DlpackTensor::from_raw(p))
        }
    }
    if let Some(t) = grab::<DLManagedTensorVersioned>(capsule) {
        return Ok(Taken::Versioned(t));
    }
    if let Some(t) = grab::<DLManagedTensor>(capsule) {
        return Ok(Taken::Legacy(t));
    }
    Err(invalid("__dlpack__ returned no unconsumed DLPack capsule"))
}

/// Calls `obj.__dlpack__(stream=stream)` asking for DLPack 1.x, falling back to the
/// producer's default for one that predates `max_version`.
pub fn request<'py>(obj: &Bound<'py, PyAny>, stream: Option<usize>) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("stream", stream)?;
    kwargs.set_item("max_version", (1, 1))?;
    match obj.call_method("__dlpack__", (), Some(&kwargs)) {
        Ok(c) => Ok(c),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyTypeError>(py) => {
            let kwargs = pyo3::types::PyDict::new(py);
            kwargs.set_item("stream", stream)?;
            obj.call_method("__dlpack__", (), Some(&kwargs))
        }
        Err(e) => Err(e),
    }
}
