//! A DLPack managed tensor of another library as a `GpuRef`, without a copy: the buffer
//! owns the tensor and calls its deleter once its last use has finished.

use super::ffi::{device_type, FLAG_READ_ONLY};
use super::{dl_dtype, DlpackTensor, ManagedTensor};
use crate::dtype::DTypeBase;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;
use crate::interop::Interop;

impl Interop {
    /// Makes another library's DLPack tensor a `GpuRef` of this device, sharing its
    /// memory. The tensor must be of this device (`kDLCUDA` with this GPU's ordinal, or
    /// `kDLCUDAManaged`; `kDLCPU` or `kDLCUDAHost` on the CPU device), of element type
    /// `T`, writable, and compact row-major (strides null or those of its shape); each
    /// other case is an `InvalidArgument` saying which. The buffer keeps the tensor and
    /// runs its deleter after the buffer's last use has finished.
    ///
    /// On a GPU, ask the producer to order the memory for [`Interop::stream`] (Python:
    /// `x.__dlpack__(stream=…)` with its handle): the buffer's first use waits for that
    /// stream.
    pub fn from_dlpack<T: DTypeBase, M: ManagedTensor>(&self, tensor: DlpackTensor<M>) -> Result<GpuRef<T>, GpuError> {
        let managed = tensor.managed();
        if managed.major() > super::ffi::DLPACK_MAJOR {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "a DLPack {}.x tensor: this crate reads DLPack {} (ask the producer for max_version=({}, {}))",
                    managed.major(),
                    super::ffi::DLPACK_MAJOR,
                    super::ffi::DLPACK_MAJOR,
                    super::ffi::DLPACK_MINOR
                ))
                .arg("tensor"),
            ));
        }
        if managed.flags() & FLAG_READ_ONLY != 0 {
            return Err(GpuError::InvalidArgument(
                Invalid::new("a read-only DLPack tensor: a GpuRef may be written by any operation; copy it first")
                    .arg("tensor"),
            ));
        }
        let t = tensor.tensor();
        let (want, ok) = match self.stream {
            Some(_) => (
                format!("kDLCUDA device {}", self.device_id()),
                (t.device.device_type == device_type::CUDA && t.device.device_id == self.device_id() as i32)
                    || t.device.device_type == device_type::CUDA_MANAGED,
            ),
            None => (
                "kDLCPU (host memory)".to_string(),
                matches!(t.device.device_type, device_type::CPU | device_type::CUDA_HOST),
            ),
        };
        if !ok {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "a DLPack tensor of device type {} id {}, not of this device ({want}): move it there first",
                    t.device.device_type, t.device.device_id
                ))
                .arg("tensor")
                .mismatch(
                    want,
                    format_args!("device type {} id {}", t.device.device_type, t.device.device_id),
                ),
            ));
        }
        if t.dtype != dl_dtype::<T>() {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "a DLPack tensor of dtype (code {}, {} bits, {} lanes), not {}",
                    t.dtype.code,
                    t.dtype.bits,
                    t.dtype.lanes,
                    T::NAME
                ))
                .arg("T")
                .mismatch(
                    T::NAME,
                    format_args!("DLPack code {} bits {}", t.dtype.code, t.dtype.bits),
                ),
            ));
        }
        let shape = tensor.shape();
        let len = elements(&shape, tensor.strides().as_deref())?;
        let ptr = tensor.data_ptr();
        // SAFETY: DLPack's contract, which `DlpackTensor::from_raw` took on: the memory
        // holds the described elements until the deleter runs, and the deleter runs when
        // the buffer drops its owner — the tensor itself — after its last use.
        unsafe { self.from_raw_parts::<T, DlpackTensor<M>>(ptr, len, tensor) }
    }
}

/// The elements of a compact row-major tensor of extents `shape` (strides null, or those
/// of the shape; a stride of an extent-1 axis is free); any other layout, or none at
/// all, is an `InvalidArgument`.
fn elements(shape: &[i64], strides: Option<&[i64]>) -> Result<usize, GpuError> {
    let bad_shape = || {
        GpuError::InvalidArgument(
            Invalid::new(format!(
                "a DLPack tensor of shape {shape:?}: no elements, or a negative extent"
            ))
            .arg("tensor"),
        )
    };
    let mut len: usize = 1;
    for &d in shape {
        let d = usize::try_from(d).map_err(|_| bad_shape())?;
        len = len.checked_mul(d).ok_or_else(bad_shape)?;
    }
    if len == 0 {
        return Err(bad_shape());
    }
    if let Some(strides) = strides {
        let mut expect: i64 = 1;
        for (&d, &s) in shape.iter().zip(strides).rev() {
            if d != 1 && s != expect {
                return Err(GpuError::InvalidArgument(
                    Invalid::new(format!(
                        "a DLPack tensor of shape {shape:?} with strides {strides:?} is not compact row-major: make it \
                         contiguous first (x.contiguous(), numpy.ascontiguousarray)"
                    ))
                    .arg("tensor"),
                ));
            }
            expect *= d;
        }
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::elements;

    #[test]
    fn only_compact_row_major_tensors_are_taken() {
        assert_eq!(elements(&[2, 3], None).unwrap(), 6);
        assert_eq!(elements(&[2, 3], Some(&[3, 1])).unwrap(), 6);
        assert_eq!(elements(&[], None).unwrap(), 1);
        assert_eq!(elements(&[1, 4], Some(&[99, 1])).unwrap(), 4);
        assert!(elements(&[2, 3], Some(&[1, 2])).is_err());
        assert!(elements(&[0, 3], None).is_err());
        assert!(elements(&[-1, 3], None).is_err());
        assert!(elements(&[i64::MAX, 4], None).is_err());
    }
}
