//! Making other libraries' memory a `GpuRef`: a cudarc `CudaSlice` (ours from then on),
//! or a raw address whose owner the buffer keeps alive.

use std::ptr::NonNull;

use cudarc::driver::CudaSlice;

use super::Interop;
use crate::dtype::DTypeBase;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::{GpuRef, HostElems, Storage};

impl Interop {
    /// Makes a cudarc slice of this device's context a `GpuRef` (no copy): every device
    /// operation takes it, and dropping the last handle frees it as cudarc would
    /// (stream-ordered, after its uses). `InvalidArgument` for an empty slice or one of
    /// another context; `Unsupported` on the CPU device.
    pub fn adopt<T: DTypeBase>(&self, slice: CudaSlice<T>) -> Result<GpuRef<T>, GpuError> {
        let ours = self.context()?;
        if slice.context().cu_ctx() != ours.cu_ctx() {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "a CudaSlice of another CUDA context (device {}) than device {}'s: allocate it on Interop::stream \
                     or a stream of Interop::context",
                    slice.ordinal(),
                    self.device_id()
                ))
                .arg("slice"),
            ));
        }
        if slice.is_empty() {
            return Err(empty("slice"));
        }
        let len = slice.len();
        Ok(GpuRef::new(
            self.device_id(),
            self.generation(),
            len,
            Storage::Cuda(slice),
            None,
        ))
    }

    /// Wraps `len` elements of `T` at `ptr` — a device address on a GPU, a host address
    /// on the CPU device — as a `GpuRef`, without a copy. The buffer keeps `owner` alive
    /// and drops it (which may free the memory: a release callback, another library's
    /// handle) once the buffer is gone and its last GPU use has finished; the memory is
    /// never freed by us.
    ///
    /// Checked: a null, misaligned or empty range, and on a GPU an address the driver
    /// does not know, of another device, or running past its allocation — each an
    /// `InvalidArgument`.
    ///
    /// # Safety
    /// The memory must hold `len` valid, initialised values of `T`, stay allocated until
    /// `owner` is dropped, and not be written by anyone else while the buffer is in use
    /// except in an order the caller establishes (a synchronised stream, an event).
    pub unsafe fn from_raw_parts<T: DTypeBase, O: Send + Sync + 'static>(
        &self,
        ptr: u64,
        len: usize,
        owner: O,
    ) -> Result<GpuRef<T>, GpuError> {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            GpuError::InvalidArgument(
                Invalid::new(format!("{len} elements of {} overflow the address space", T::NAME)).arg("len"),
            )
        })?;
        if len == 0 {
            return Err(empty("len"));
        }
        if ptr == 0 || ptr % std::mem::align_of::<T>() as u64 != 0 {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "address {ptr:#x} is null or not aligned to {} bytes for {}",
                    std::mem::align_of::<T>(),
                    T::NAME
                ))
                .arg("ptr")
                .mismatch(
                    format_args!("a non-null multiple of {}", std::mem::align_of::<T>()),
                    format_args!("{ptr:#x}"),
                ),
            ));
        }
        let storage = match &self.stream {
            None => {
                let host = NonNull::new(ptr as usize as *mut T).expect("checked non-null");
                // SAFETY: the caller's contract: `len` initialised values alive until
                // `owner` goes, which the buffer drops only after its storage.
                Storage::Cpu(unsafe { HostElems::borrowed(host, len) })
            }
            Some(stream) => {
                let a = crate::sys::foreign::allocation_of(stream.context(), ptr)?;
                if a.device != self.device_id() as i32 {
                    return Err(GpuError::InvalidArgument(
                        Invalid::new(format!(
                            "address {ptr:#x} is memory of GPU {}, not of device {}: copy it across first",
                            a.device,
                            self.device_id()
                        ))
                        .arg("ptr")
                        .mismatch(
                            format_args!("memory of GPU {}", self.device_id()),
                            format_args!("memory of GPU {}", a.device),
                        ),
                    ));
                }
                let end = (ptr - a.base).checked_add(bytes as u64);
                if end.is_none_or(|e| e > a.bytes as u64) {
                    return Err(GpuError::InvalidArgument(
                        Invalid::new(format!(
                            "{len} elements of {} at {ptr:#x} run past the end of its allocation ({} bytes from {:#x})",
                            T::NAME,
                            a.bytes,
                            a.base
                        ))
                        .arg("len"),
                    ));
                }
                // SAFETY: a live allocation of this context holding `len` elements (checked
                // above, valid values by the caller's contract); the slice never frees it —
                // the buffer leaks it back before dropping `owner` (`gpu_ref::Buffer`).
                let mut slice = unsafe { stream.upgrade_device_ptr::<T>(ptr, len) };
                // A first write recorded on this handle's stream: every later use waits
                // for what is queued there (a DLPack producer's ordering, say).
                drop(cudarc::driver::DevicePtrMut::device_ptr_mut(&mut slice, stream));
                Storage::Cuda(slice)
            }
        };
        Ok(GpuRef::new_foreign(
            self.device_id(),
            self.generation(),
            len,
            storage,
            Box::new(owner),
        ))
    }
}

fn empty(arg: &str) -> GpuError {
    GpuError::InvalidArgument(Invalid::new("an empty buffer: a device buffer holds at least one element").arg(arg))
}
