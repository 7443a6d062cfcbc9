//! `MappedCell<T>`: values (one, or a batch's) in page-locked host memory that GPU work
//! writes directly.
//!
//! A library routine that reports a verdict through a device pointer (cuSOLVER's `info`)
//! would otherwise write device memory that then has to be copied back: a driver call and
//! a cudarc event record and wait on the actor's thread, and a copy the GPU runs after the
//! routine, before the work counts as complete — a few µs on every call, which a small
//! factorization notices (BENCHMARKS.md, "info written to mapped memory"). Page-locked
//! memory allocated `CU_MEMHOSTALLOC_DEVICEMAP` has a device address through which a
//! kernel writes it over the bus; once the stream's work is known complete (its
//! completion awaited), the write is visible to the host and is read from here.
//!
//! The cell cannot see that completion itself: [`MappedCell::device_ptr`] marks it
//! written-to, [`MappedCell::read_completed`] is for callers that awaited the stream, and
//! dropping a cell whose writer was never awaited (a reply abandoned mid-flight) waits for
//! the stream first, so that the GPU never writes a page the host has freed; a caller
//! whose wait failed leaks the cell instead ([`MappedCell::leak`]), so that a stuck
//! stream cannot hold its thread.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::sys::{cuMemHostGetDevicePointer_v2, CUdeviceptr, CU_MEMHOSTALLOC_DEVICEMAP};
use cudarc::driver::{result as dresult, CudaStream, DeviceRepr, ValidAsZeroBits};

use crate::error::GpuError;
use crate::sys::pinned::alloc_host_zeroed;

/// `len` values of `T` in mapped page-locked memory, written by work on one stream: one
/// for a routine's `info`, a batch's worth for a batched routine's.
pub(crate) struct MappedCell<T> {
    host: NonNull<T>,
    /// How many values the cell holds (at least one).
    len: usize,
    /// The same memory as the device addresses it.
    device: CUdeviceptr,
    /// The stream whose work writes the cell.
    stream: Arc<CudaStream>,
    /// Work that may write the cell was enqueued and not yet awaited.
    pending: bool,
}

// SAFETY: the cell owns its allocation exclusively, like a `Box<T>`; the host pointer is
// never shared, and every access goes through `&mut self`.
unsafe impl<T: Send> Send for MappedCell<T> {}

impl<T: DeviceRepr + ValidAsZeroBits + Copy> MappedCell<T> {
    /// A zeroed cell of one value for work on `stream`.
    pub(crate) fn zeroed(stream: &Arc<CudaStream>) -> Result<Self, GpuError> {
        Self::zeroed_many(stream, 1)
    }

    /// A zeroed cell of `len` values (at least one) for work on `stream`.
    pub(crate) fn zeroed_many(stream: &Arc<CudaStream>, len: usize) -> Result<Self, GpuError> {
        let len = len.max(1);
        // Allocation and mapping need the stream's context bound to this thread.
        stream.context().bind_to_thread()?;
        // Mapped into the device's address space (DEVICEMAP), cached (the host reads it).
        let host = alloc_host_zeroed::<T>(len, CU_MEMHOSTALLOC_DEVICEMAP)?;
        let mut device: CUdeviceptr = 0;
        // SAFETY: `host` is a live DEVICEMAP allocation of this context; the driver writes
        // the device address into `device` (flags must be 0).
        let mapped = unsafe { cuMemHostGetDevicePointer_v2(&mut device, host.as_ptr() as *mut c_void, 0) }.result();
        if let Err(e) = mapped {
            // SAFETY: allocated above by `cuMemHostAlloc`, not shared, no GPU work uses it.
            let _ = unsafe { dresult::free_host(host.as_ptr() as *mut c_void) };
            return Err(e.into());
        }
        Ok(MappedCell {
            host,
            len,
            device,
            stream: stream.clone(),
            pending: false,
        })
    }

    /// The device address, for a routine about to be enqueued on the cell's stream; the
    /// cell counts as written-to until [`MappedCell::read_completed`].
    pub(crate) fn device_ptr(&mut self) -> CUdeviceptr {
        self.pending = true;
        self.device
    }

    /// Gives the cell up without waiting, for a caller whose wait for the stream failed
    /// (a timeout: the GPU may still write the cell, and a wait in `Drop` could last as
    /// long as the stuck work). The page stays allocated for the life of the process:
    /// a few bytes, on a path that already failed.
    pub(crate) fn leak(self) {
        std::mem::forget(self);
    }

    /// How many values the cell holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The first value, for a caller that has awaited the completion of everything
    /// enqueued on the cell's stream since the last [`MappedCell::device_ptr`]: the GPU's
    /// write is visible to the host once that work is complete.
    pub(crate) fn read_completed(&mut self) -> T {
        self.completed()[0]
    }

    /// Every value, on the same terms as [`MappedCell::read_completed`].
    pub(crate) fn completed(&mut self) -> &[T] {
        self.pending = false;
        // The GPU wrote the values behind the compiler's back; the completion the caller
        // awaited ordered those writes before this point.
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        // SAFETY: `host` holds `len` live, aligned, initialised `T`s owned by the cell,
        // which nothing writes while the caller holds `&mut self` (no work pending).
        unsafe { std::slice::from_raw_parts(self.host.as_ptr(), self.len) }
    }

    /// Sets the first `n` values (at most all) to zero again, for reuse by a routine that
    /// reports through them. Only between uses: no work that writes the cell may be
    /// pending.
    pub(crate) fn clear(&mut self, n: usize) {
        debug_assert!(!self.pending, "a mapped cell cleared while GPU work may write it");
        // SAFETY: at most `len` values owned by the cell, no GPU work pending on them;
        // all-zero bits are a valid `T` (`ValidAsZeroBits`).
        unsafe { std::ptr::write_bytes(self.host.as_ptr(), 0, n.min(self.len)) }
    }
}

impl<T> Drop for MappedCell<T> {
    fn drop(&mut self) {
        // Work that may still write the cell must finish before its pages are freed (a
        // write to freed mapped memory is a device fault). After a fault the wait fails at
        // once and the memory is freed all the same. Either way the context is bound,
        // which freeing needs.
        if self.pending {
            let _ = self.stream.synchronize();
        } else {
            let _ = self.stream.context().bind_to_thread();
        }
        // SAFETY: `host` came from `cuMemHostAlloc` and is freed exactly once, here, with
        // no work that writes it left on its stream.
        let _ = unsafe { dresult::free_host(self.host.as_ptr() as *mut c_void) };
    }
}

impl<T> std::fmt::Debug for MappedCell<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MappedCell({} values, pending {})", self.len, self.pending)
    }
}
