//! What the benches calling cuSPARSE raw share: the element types with cuSPARSE's name
//! for them, a buffer's address for a descriptor, and a status check.
#![allow(dead_code)]

use std::ffi::c_void;
use std::sync::Arc;

use atomr_accel_cuda::prelude::SparseScalar;
use cudarc::cusparse::sys;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

/// The element types, with cuSPARSE's name for them.
pub trait Elem: SparseScalar + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits {
    const DATA: sys::cudaDataType;
}
impl Elem for f32 {
    const DATA: sys::cudaDataType = sys::cudaDataType::CUDA_R_32F;
}
impl Elem for f64 {
    const DATA: sys::cudaDataType = sys::cudaDataType::CUDA_R_64F;
}

/// `s`'s device address, ordered for a use on `stream` (the guard dropped at once: the
/// benches synchronize their stream between calls).
pub fn address<T>(s: &CudaSlice<T>, stream: &Arc<CudaStream>) -> *mut c_void {
    let (p, _guard) = s.device_ptr(stream);
    p as *mut c_void
}

/// Panics on a failed cuSPARSE call.
pub fn ok(s: sys::cusparseStatus_t) {
    s.result().unwrap();
}
