//! A `GpuRef` as a DLPack managed tensor: the consumer reads and writes our memory in
//! place, a clone of the handle keeping the buffer alive until it calls the deleter.

use super::ffi::{device_type, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLTensor};
use super::{dl_dtype, ConsumerStream, DlpackTensor, ManagedTensor};
use crate::dtype::DTypeBase;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;
use crate::interop::Interop;

/// Most dimensions an exported tensor may have (DLPack sets none; this bounds a
/// caller's mistake).
const MAX_DIMS: usize = 32;

/// What an exported tensor's `manager_ctx` owns: the memory's owner (a clone of the
/// buffer, a host vector) and the extents its `shape`/`strides` pointers point into.
struct Exported {
    _owner: Box<dyn std::any::Any + Send + Sync>,
    shape: Box<[i64]>,
    strides: Option<Box<[i64]>>,
}

/// Frees an exported tensor: what a consumer calls once, when done with it.
unsafe extern "C" fn delete_exported<M: ManagedTensor>(this: *mut M) {
    if this.is_null() {
        return;
    }
    // SAFETY: `this` and its context were made by `Box::into_raw` in `managed`, and
    // DLPack's contract has the deleter called once.
    unsafe {
        let managed = Box::from_raw(this);
        drop(Box::from_raw(managed.manager_ctx() as *mut Exported));
    }
}

/// A managed tensor of `T` elements at `data` on `device`, laid out as `extents` says,
/// whose deleter drops `owner`.
fn managed<M: ManagedTensor, T: DTypeBase>(
    owner: Box<dyn std::any::Any + Send + Sync>,
    data: *mut std::ffi::c_void,
    device: DLDevice,
    (shape, strides): Extents,
) -> DlpackTensor<M> {
    let mut ctx = Box::new(Exported {
        _owner: owner,
        shape,
        strides,
    });
    let tensor = DLTensor {
        data,
        device,
        ndim: ctx.shape.len() as i32,
        dtype: dl_dtype::<T>(),
        shape: ctx.shape.as_mut_ptr(),
        strides: ctx.strides.as_mut().map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        byte_offset: 0,
    };
    let ctx = Box::into_raw(ctx);
    let managed = Box::new(M::assemble(tensor, 0, ctx.cast(), delete_exported::<M>));
    let ptr = std::ptr::NonNull::new(Box::into_raw(managed)).expect("a box is never null");
    // SAFETY: just built: live, its deleter unrun, its extents owned by its context.
    unsafe { DlpackTensor::from_raw(ptr) }
}

/// A host vector as a `kDLCPU` managed tensor of extents `shape` (row-major, their
/// product the vector's length) that owns it: how results reach NumPy without a copy
/// (`numpy.from_dlpack`), or any DLPack consumer of host memory.
pub fn host_tensor<M: ManagedTensor, T: DTypeBase>(v: Vec<T>, shape: &[usize]) -> Result<DlpackTensor<M>, GpuError> {
    let extents = layout(v.len(), shape, None)?;
    let mut v = v.into_boxed_slice();
    let data = v.as_mut_ptr().cast();
    let device = DLDevice {
        device_type: device_type::CPU,
        device_id: 0,
    };
    Ok(managed::<M, T>(Box::new(v), data, device, extents))
}

impl<T: DTypeBase> GpuRef<T> {
    /// This handle's elements as a DLPack (≥ 1.0) managed tensor of extents `shape`
    /// (row-major, their product the handle's length) or, with `strides` (in elements),
    /// any layout whose every element lies in the handle's window — no copy: the consumer
    /// (PyTorch, CuPy, NumPy, JAX) works on our memory, and the tensor keeps the buffer
    /// alive until its deleter runs. `consumer` is the stream it will be used on: that
    /// stream is made to wait for the buffer's pending work ([`ConsumerStream`]; ignored
    /// on the CPU device, whose work is done when it returns).
    ///
    /// `InvalidArgument` for a layout that does not fit the window, `Stale` for a
    /// buffer of an earlier generation than `interop`'s.
    pub fn to_dlpack(
        &self,
        interop: &Interop,
        shape: &[usize],
        strides: Option<&[usize]>,
        consumer: ConsumerStream,
    ) -> Result<DlpackTensor<DLManagedTensorVersioned>, GpuError> {
        self.export(interop, shape, strides, consumer)
    }

    /// As [`GpuRef::to_dlpack`], in the unversioned ABI of DLPack < 1.0 (what a consumer
    /// that asks for no version gets: `__dlpack__()` without `max_version`).
    pub fn to_dlpack_unversioned(
        &self,
        interop: &Interop,
        shape: &[usize],
        strides: Option<&[usize]>,
        consumer: ConsumerStream,
    ) -> Result<DlpackTensor<DLManagedTensor>, GpuError> {
        self.export(interop, shape, strides, consumer)
    }

    fn export<M: ManagedTensor>(
        &self,
        interop: &Interop,
        shape: &[usize],
        strides: Option<&[usize]>,
        consumer: ConsumerStream,
    ) -> Result<DlpackTensor<M>, GpuError> {
        interop.check(self)?;
        let (shape, strides) = layout(self.len(), shape, strides)?;
        let mut guard = self.lock();
        let (data, device) = match interop.stream.as_ref() {
            Some(stream) => {
                // The handle's stream waits for the buffer's writer and readers; the
                // export counts as a write there, so the device's later work waits for
                // this point; then the consumer's stream waits for it too.
                let (ptr, recorded) = guard.address(stream, true)?;
                drop(recorded);
                if let Some(raw) = consumer.raw() {
                    // SAFETY: a value of the protocol (1, 2) or, by `ConsumerStream::Handle`'s
                    // documented contract, a stream of this device's context.
                    unsafe { crate::sys::foreign::make_wait(raw, stream) }?;
                }
                (
                    ptr as usize as *mut std::ffi::c_void,
                    DLDevice {
                        device_type: device_type::CUDA,
                        device_id: interop.device_id() as i32,
                    },
                )
            }
            None => {
                let (ptr, _) = guard
                    .host_raw_at(self.window())
                    .ok_or_else(|| GpuError::invalid("a GPU buffer on the CPU device"))?;
                (
                    ptr.cast(),
                    DLDevice {
                        device_type: device_type::CPU,
                        device_id: 0,
                    },
                )
            }
        };
        drop(guard);
        Ok(managed::<M, T>(Box::new(self.clone()), data, device, (shape, strides)))
    }
}

/// An exported tensor's extents and strides, as DLPack stores them.
type Extents = (Box<[i64]>, Option<Box<[i64]>>);

/// Checks a layout against a window of `len` elements: row-major extents whose product
/// is `len`, or extents and strides whose furthest element lies inside the window.
fn layout(len: usize, shape: &[usize], strides: Option<&[usize]>) -> Result<Extents, GpuError> {
    let bad = |what: String| {
        GpuError::InvalidArgument(Invalid::new(what).arg(if strides.is_some() { "strides" } else { "shape" }))
    };
    if shape.is_empty() || shape.len() > MAX_DIMS || shape.contains(&0) {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!(
                "shape {shape:?}: an exported tensor has 1 to {MAX_DIMS} extents, each at least 1"
            ))
            .arg("shape"),
        ));
    }
    let to_i64 = |v: &[usize]| -> Result<Box<[i64]>, GpuError> {
        v.iter()
            .map(|&x| i64::try_from(x).map_err(|_| bad(format!("{x} does not fit DLPack's int64"))))
            .collect()
    };
    match strides {
        None => {
            let count = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
            if count != Some(len) {
                return Err(GpuError::InvalidArgument(
                    Invalid::new(format!(
                        "shape {shape:?} does not hold the {len} elements of the buffer"
                    ))
                    .arg("shape")
                    .mismatch(
                        format_args!("extents whose product is {len}"),
                        format_args!("{shape:?}"),
                    ),
                ));
            }
            Ok((to_i64(shape)?, None))
        }
        Some(strides) => {
            if strides.len() != shape.len() {
                return Err(bad(format!("{} strides for {} extents", strides.len(), shape.len())));
            }
            let furthest = shape.iter().zip(strides).try_fold(0usize, |at, (&d, &s)| {
                (d - 1).checked_mul(s).and_then(|o| at.checked_add(o))
            });
            if furthest.is_none_or(|f| f >= len) {
                return Err(bad(format!(
                    "shape {shape:?} with strides {strides:?} reaches past the {len} elements of the buffer"
                )));
            }
            Ok((to_i64(shape)?, Some(to_i64(strides)?)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::layout;
    use crate::interop::dlpack::ffi::{device_type, DLManagedTensor, DLManagedTensorVersioned};
    use crate::interop::dlpack::{dl_dtype, host_tensor, DlpackTensor};

    #[test]
    fn a_host_vector_leaves_as_its_own_tensor() {
        let v: Vec<f64> = (0..12).map(|i| i as f64 * 0.5).collect();
        let addr = v.as_ptr() as u64;
        let t: DlpackTensor<DLManagedTensorVersioned> = host_tensor(v, &[3, 4]).unwrap();
        assert_eq!(t.data_ptr(), addr, "the vector itself, not a copy");
        assert_eq!((t.shape(), t.strides()), (vec![3, 4], None));
        assert_eq!(t.tensor().device.device_type, device_type::CPU);
        assert_eq!(t.tensor().dtype, dl_dtype::<f64>());
        // SAFETY: 12 f64 alive until `t` drops.
        let seen = unsafe { std::slice::from_raw_parts(t.data_ptr() as *const f64, 12) };
        assert_eq!(seen[11], 5.5);
        drop(t);
        let old: Result<DlpackTensor<DLManagedTensor>, _> = host_tensor(vec![1u8; 5], &[2, 2]);
        assert!(old.is_err(), "a shape that does not hold the vector");
    }

    #[test]
    fn layouts_are_checked_against_the_window() {
        assert!(layout(6, &[2, 3], None).is_ok());
        assert!(layout(6, &[6], None).is_ok());
        assert!(layout(6, &[4, 2], None).is_err());
        assert!(layout(6, &[], None).is_err());
        assert!(layout(6, &[0, 6], None).is_err());
        // Column-major 2×3 in 6 elements; a transposed view; one past the end.
        assert!(layout(6, &[2, 3], Some(&[1, 2])).is_ok());
        assert!(layout(6, &[3, 2], Some(&[2, 1])).is_ok());
        assert!(layout(6, &[2, 3], Some(&[3, 2])).is_err());
        assert!(layout(6, &[2, 3], Some(&[1])).is_err());
        assert!(layout(usize::MAX, &[2, usize::MAX], Some(&[usize::MAX, 1])).is_err());
    }
}
