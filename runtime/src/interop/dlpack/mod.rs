//! DLPack, the array-exchange standard of PyTorch, CuPy, JAX, NumPy and TensorFlow: a
//! `GpuRef` leaves as a managed tensor another library reads and writes in place
//! ([`GpuRef::to_dlpack`](crate::GpuRef::to_dlpack)), and a managed tensor of another
//! library becomes a `GpuRef` ([`Interop::from_dlpack`](super::Interop::from_dlpack)) —
//! no copy either way.
//!
//! Ownership is DLPack's: whoever holds a [`DlpackTensor`] calls its deleter exactly once
//! (dropping it does), and the producer's memory lives until then. An exported tensor
//! keeps a clone of our buffer; an imported one is kept by the buffer until its last use
//! has finished on the GPU.
//!
//! Streams follow the Python protocol's `__dlpack__(stream=…)`: the producer makes the
//! consumer's stream wait (an event, not a host block) for the buffer's pending writes
//! ([`ConsumerStream`]). What the consumer enqueues after that is its own business: before
//! the device uses the buffer again, synchronise that work (or hand the tensor back
//! through `from_dlpack`, whose stream the producer orders).

mod export;
pub mod ffi;

pub use export::host_tensor;
mod import;

use std::ptr::NonNull;

use crate::dtype::{DTypeBase, DTypeKind};
use ffi::{type_code, DLDataType, DLManagedTensor, DLManagedTensorVersioned, DLTensor};

/// Which stream the consumer of an exported tensor will use it on (Python's
/// `__dlpack__(stream=…)` values), so the producer orders it after the buffer's writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerStream {
    /// No ordering (`-1`): the consumer has synchronised already.
    Unordered,
    /// CUDA's legacy default stream (`1`, and what `None` means on CUDA).
    LegacyDefault,
    /// The calling thread's per-thread default stream (`2`).
    PerThreadDefault,
    /// A `CUstream` handle of the device's context, as an integer.
    Handle(usize),
}

impl ConsumerStream {
    /// The protocol's integer (or `None`) as a `ConsumerStream`; `0` is ambiguous in the
    /// protocol and refused.
    pub fn from_protocol(stream: Option<i64>) -> Result<Self, crate::GpuError> {
        Ok(match stream {
            None | Some(1) => ConsumerStream::LegacyDefault,
            Some(-1) => ConsumerStream::Unordered,
            Some(2) => ConsumerStream::PerThreadDefault,
            Some(h) if h > 2 => ConsumerStream::Handle(h as usize),
            Some(h) => {
                return Err(crate::GpuError::InvalidArgument(
                    crate::Invalid::new(format!(
                        "stream {h} is not a DLPack stream value: -1 (no ordering), 1 (legacy default), 2 (per-thread \
                         default) or a CUstream handle"
                    ))
                    .arg("stream"),
                ))
            }
        })
    }

    /// The raw handle the driver takes, or `None` for no ordering.
    pub(crate) fn raw(self) -> Option<usize> {
        match self {
            ConsumerStream::Unordered => None,
            ConsumerStream::LegacyDefault => Some(1),
            ConsumerStream::PerThreadDefault => Some(2),
            ConsumerStream::Handle(h) => Some(h),
        }
    }
}

/// A DLPack managed tensor of either ABI: the versioned one of DLPack ≥ 1.0 or the
/// unversioned one older consumers ask for. Sealed: the two structs of [`ffi`].
pub trait ManagedTensor: sealed::Sealed + Sized + 'static {
    /// The tensor.
    fn dl_tensor(&self) -> &DLTensor;
    /// The flags (none in the unversioned ABI).
    fn flags(&self) -> u64;
    /// The producer's DLPack major version (0 for the unversioned ABI).
    fn major(&self) -> u32;
    /// The producer's deleter, if any.
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)>;
    /// Calls the deleter, if any.
    ///
    /// # Safety
    /// `this` is a live managed tensor whose deleter has not run; it is dangling after.
    unsafe fn delete(this: NonNull<Self>) {
        // SAFETY: the caller's contract; the deleter is the producer's own for `this`.
        unsafe {
            if let Some(d) = this.as_ref().deleter() {
                d(this.as_ptr())
            }
        }
    }
    /// A managed tensor of `tensor`, owning `ctx`, freed by `deleter`.
    fn assemble(
        tensor: DLTensor,
        flags: u64,
        ctx: *mut std::ffi::c_void,
        deleter: unsafe extern "C" fn(*mut Self),
    ) -> Self;
    /// The producer's context pointer.
    fn manager_ctx(&self) -> *mut std::ffi::c_void;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::DLManagedTensorVersioned {}
    impl Sealed for super::DLManagedTensor {}
}

impl ManagedTensor for DLManagedTensorVersioned {
    fn dl_tensor(&self) -> &DLTensor {
        &self.dl_tensor
    }
    fn flags(&self) -> u64 {
        self.flags
    }
    fn major(&self) -> u32 {
        self.version.major
    }
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
    fn assemble(
        tensor: DLTensor,
        flags: u64,
        ctx: *mut std::ffi::c_void,
        deleter: unsafe extern "C" fn(*mut Self),
    ) -> Self {
        DLManagedTensorVersioned {
            version: ffi::DLPackVersion {
                major: ffi::DLPACK_MAJOR,
                minor: ffi::DLPACK_MINOR,
            },
            manager_ctx: ctx,
            deleter: Some(deleter),
            flags,
            dl_tensor: tensor,
        }
    }
    fn manager_ctx(&self) -> *mut std::ffi::c_void {
        self.manager_ctx
    }
}

impl ManagedTensor for DLManagedTensor {
    fn dl_tensor(&self) -> &DLTensor {
        &self.dl_tensor
    }
    fn flags(&self) -> u64 {
        0
    }
    fn major(&self) -> u32 {
        0
    }
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
    fn assemble(
        tensor: DLTensor,
        _flags: u64,
        ctx: *mut std::ffi::c_void,
        deleter: unsafe extern "C" fn(*mut Self),
    ) -> Self {
        DLManagedTensor {
            dl_tensor: tensor,
            manager_ctx: ctx,
            deleter: Some(deleter),
        }
    }
    fn manager_ctx(&self) -> *mut std::ffi::c_void {
        self.manager_ctx
    }
}

/// An owned DLPack managed tensor: its deleter runs when this is dropped, unless it was
/// handed on with [`DlpackTensor::into_raw`] (a Python capsule, a C consumer).
pub struct DlpackTensor<M: ManagedTensor = DLManagedTensorVersioned> {
    ptr: NonNull<M>,
}

// SAFETY: a managed tensor is a description of memory plus a deleter the standard lets
// any thread call once; this type calls it at most once (on drop or never after
// `into_raw`).
unsafe impl<M: ManagedTensor> Send for DlpackTensor<M> {}
// SAFETY: shared access only reads the description.
unsafe impl<M: ManagedTensor> Sync for DlpackTensor<M> {}

impl<M: ManagedTensor> std::fmt::Debug for DlpackTensor<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self.tensor();
        f.debug_struct("DlpackTensor")
            .field("device", &t.device)
            .field("dtype", &t.dtype)
            .field("shape", &self.shape())
            .field("strides", &self.strides())
            .finish()
    }
}

impl<M: ManagedTensor> DlpackTensor<M> {
    /// Takes ownership of a managed tensor from another library.
    ///
    /// # Safety
    /// `ptr` must point to a live managed tensor of that ABI whose deleter has not run,
    /// with `ndim` valid shape entries (and strides, when not null), describing memory
    /// that stays valid until the deleter runs; nobody else may call its deleter.
    pub unsafe fn from_raw(ptr: NonNull<M>) -> Self {
        DlpackTensor { ptr }
    }

    /// Hands the tensor on: the receiver now calls its deleter.
    pub fn into_raw(self) -> NonNull<M> {
        let ptr = self.ptr;
        std::mem::forget(self);
        ptr
    }

    /// The tensor's description.
    pub fn tensor(&self) -> &DLTensor {
        // SAFETY: live until the deleter runs, which only `drop` does.
        unsafe { self.ptr.as_ref() }.dl_tensor()
    }

    /// The managed tensor itself (version, flags, context).
    pub fn managed(&self) -> &M {
        // SAFETY: as in `tensor`.
        unsafe { self.ptr.as_ref() }
    }

    /// The extents.
    pub fn shape(&self) -> Vec<i64> {
        let t = self.tensor();
        // SAFETY: `from_raw`'s contract (or our own export): `ndim` entries.
        (0..t.ndim.max(0) as usize)
            .map(|i| unsafe { *t.shape.add(i) })
            .collect()
    }

    /// The strides in elements, `None` for a compact row-major tensor.
    pub fn strides(&self) -> Option<Vec<i64>> {
        let t = self.tensor();
        // SAFETY: as in `shape`.
        (!t.strides.is_null()).then(|| {
            (0..t.ndim.max(0) as usize)
                .map(|i| unsafe { *t.strides.add(i) })
                .collect()
        })
    }

    /// The address of the first element (`data + byte_offset`).
    pub fn data_ptr(&self) -> u64 {
        let t = self.tensor();
        (t.data as u64).wrapping_add(t.byte_offset)
    }
}

impl<M: ManagedTensor> Drop for DlpackTensor<M> {
    fn drop(&mut self) {
        // SAFETY: owned, deleter not yet run (`into_raw` forgets `self`).
        unsafe { M::delete(self.ptr) }
    }
}

/// DLPack's name for element type `T`.
pub fn dl_dtype<T: DTypeBase>() -> DLDataType {
    let size = std::mem::size_of::<T>();
    let code = match (T::KIND, T::NAME) {
        (_, "bf16") => type_code::BFLOAT,
        (_, "f8e4m3") => type_code::FLOAT8_E4M3FN,
        (_, "f8e5m2") => type_code::FLOAT8_E5M2,
        (DTypeKind::Float, _) => type_code::FLOAT,
        (DTypeKind::Int, _) => type_code::INT,
        (DTypeKind::UInt, _) => type_code::UINT,
        (DTypeKind::Complex, _) => type_code::COMPLEX,
    };
    DLDataType {
        code,
        bits: (size * 8) as u8,
        lanes: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::Complex;
    use half::{bf16, f16};

    #[test]
    fn element_types_have_dlpack_names() {
        let d = |c, b| DLDataType {
            code: c,
            bits: b,
            lanes: 1,
        };
        assert_eq!(dl_dtype::<f32>(), d(type_code::FLOAT, 32));
        assert_eq!(dl_dtype::<f64>(), d(type_code::FLOAT, 64));
        assert_eq!(dl_dtype::<f16>(), d(type_code::FLOAT, 16));
        assert_eq!(dl_dtype::<bf16>(), d(type_code::BFLOAT, 16));
        assert_eq!(dl_dtype::<i8>(), d(type_code::INT, 8));
        assert_eq!(dl_dtype::<u32>(), d(type_code::UINT, 32));
        assert_eq!(dl_dtype::<i64>(), d(type_code::INT, 64));
        assert_eq!(dl_dtype::<Complex<f32>>(), d(type_code::COMPLEX, 64));
        assert_eq!(dl_dtype::<Complex<f64>>(), d(type_code::COMPLEX, 128));
        assert_eq!(dl_dtype::<crate::dtype::f8e4m3>(), d(type_code::FLOAT8_E4M3FN, 8));
    }

    #[test]
    fn protocol_stream_values() {
        assert_eq!(
            ConsumerStream::from_protocol(None).unwrap(),
            ConsumerStream::LegacyDefault
        );
        assert_eq!(
            ConsumerStream::from_protocol(Some(-1)).unwrap(),
            ConsumerStream::Unordered
        );
        assert_eq!(
            ConsumerStream::from_protocol(Some(2)).unwrap(),
            ConsumerStream::PerThreadDefault
        );
        assert_eq!(
            ConsumerStream::from_protocol(Some(0x5000)).unwrap(),
            ConsumerStream::Handle(0x5000)
        );
        assert!(ConsumerStream::from_protocol(Some(0)).is_err());
        assert!(ConsumerStream::from_protocol(Some(-7)).is_err());
    }
}
