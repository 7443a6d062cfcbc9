//! The DLPack C ABI (`dlpack.h`, version 1.1): the structs every producer and consumer
//! shares, laid out as C lays them out.
//!
//! Written here rather than taken from a crate: the only maintained one (`dlpark`)
//! changed its API in each of its last four releases and pins a pyo3 version through its
//! Python feature, while these few structs are frozen by the standard.

use std::ffi::c_void;

/// The DLPack version this crate produces.
pub const DLPACK_MAJOR: u32 = 1;
/// The DLPack minor version this crate produces.
pub const DLPACK_MINOR: u32 = 1;

/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the consumer must not write the tensor.
pub const FLAG_READ_ONLY: u64 = 1 << 0;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the producer made a copy for this exchange.
pub const FLAG_IS_COPIED: u64 = 1 << 1;

/// `DLPackVersion`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Incompatible when it differs.
    pub major: u32,
    /// Compatible additions.
    pub minor: u32,
}

/// `DLDeviceType` values this crate meets (the enum is an `int32_t` in C).
pub mod device_type {
    /// Host memory.
    pub const CPU: i32 = 1;
    /// CUDA device memory.
    pub const CUDA: i32 = 2;
    /// Page-locked host memory from `cudaMallocHost`.
    pub const CUDA_HOST: i32 = 3;
    /// CUDA managed (unified) memory.
    pub const CUDA_MANAGED: i32 = 13;
}

/// `DLDevice`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDevice {
    /// A [`device_type`] value.
    pub device_type: i32,
    /// The device ordinal (0 for the host).
    pub device_id: i32,
}

/// `DLDataTypeCode` values (a `uint8_t` in `DLDataType`).
pub mod type_code {
    /// Signed integer.
    pub const INT: u8 = 0;
    /// Unsigned integer.
    pub const UINT: u8 = 1;
    /// IEEE floating point.
    pub const FLOAT: u8 = 2;
    /// bfloat16.
    pub const BFLOAT: u8 = 4;
    /// Complex (interleaved real and imaginary parts).
    pub const COMPLEX: u8 = 5;
    /// FP8 E4M3 without infinities (`__nv_fp8_e4m3`).
    pub const FLOAT8_E4M3FN: u8 = 10;
    /// FP8 E5M2 (`__nv_fp8_e5m2`).
    pub const FLOAT8_E5M2: u8 = 12;
}

/// `DLDataType`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDataType {
    /// A [`type_code`] value.
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes per element (1 for a scalar type).
    pub lanes: u16,
}

/// `DLTensor`: where the elements are and how they are laid out.
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    /// The allocation's address (device or host, per `device`).
    pub data: *mut c_void,
    /// Where `data` lives.
    pub device: DLDevice,
    /// Dimensions.
    pub ndim: i32,
    /// The element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or null for a compact row-major tensor.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// `DLManagedTensorVersioned` (DLPack ≥ 1.0): a tensor with its owner's context and the
/// deleter the consumer calls when done.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The ABI version of the producer.
    pub version: DLPackVersion,
    /// The producer's state.
    pub manager_ctx: *mut c_void,
    /// Frees the tensor and releases the producer's hold; may be null.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// [`FLAG_READ_ONLY`], [`FLAG_IS_COPIED`].
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

/// `DLManagedTensor`: the unversioned form of DLPack < 1.0, still what a consumer gets that
/// asks for no version (the `"dltensor"` capsule of Python's protocol).
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's state.
    pub manager_ctx: *mut c_void,
    /// Frees the tensor and releases the producer's hold; may be null.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The offsets of `dlpack.h` on a 64-bit target: what a C consumer reads.
    #[test]
    fn the_layout_is_dlpack_h() {
        assert_eq!(size_of::<DLDevice>(), 8);
        assert_eq!(size_of::<DLDataType>(), 4);
        assert_eq!(offset_of!(DLTensor, device), 8);
        assert_eq!(offset_of!(DLTensor, ndim), 16);
        assert_eq!(offset_of!(DLTensor, dtype), 20);
        assert_eq!(offset_of!(DLTensor, shape), 24);
        assert_eq!(offset_of!(DLTensor, strides), 32);
        assert_eq!(offset_of!(DLTensor, byte_offset), 40);
        assert_eq!(size_of::<DLTensor>(), 48);
        assert_eq!(offset_of!(DLManagedTensorVersioned, manager_ctx), 8);
        assert_eq!(offset_of!(DLManagedTensorVersioned, deleter), 16);
        assert_eq!(offset_of!(DLManagedTensorVersioned, flags), 24);
        assert_eq!(offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
        assert_eq!(offset_of!(DLManagedTensor, manager_ctx), 48);
        assert_eq!(offset_of!(DLManagedTensor, deleter), 56);
    }
}
