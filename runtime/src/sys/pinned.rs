//! `PinnedMem<T>`: page-locked host memory whose copies the GPU does not signal by
//! interrupt.
//!
//! cudarc's `PinnedHostSlice` marks every copy into or out of it with an event created
//! `CU_EVENT_BLOCKING_SYNC`, and the GPU raises an interrupt each time it reaches such an
//! event, so that a thread blocked on it can be woken. Nothing in the runtime blocks on
//! those events: completions spin on events of their own, and by the time a buffer is read
//! its copy is known done. The interrupts are pure cost, paid by whichever CPU takes the
//! GPU's interrupts: on the H200 host (a virtual machine) each one held that CPU for
//! ~28 µs, and a spinning actor or caller that ran there saw its reply that much later —
//! one interrupt per solver call (its `info` read-back, before `sys::mapped`), so every
//! call of a process whose caller or solver thread sat on that CPU (BENCHMARKS.md, "GPU
//! interrupts").
//!
//! This is the same memory (`cuMemHostAlloc`, cached: the CPU reads it at full speed)
//! with a spin-wait event (`CU_EVENT_DISABLE_TIMING`), which the GPU passes silently. As
//! with cudarc's type, reading or writing the buffer, and dropping it, first waits for
//! the last copy enqueued with it — only while one may still be running: a wait that saw
//! it finish is not repeated (each is a driver call on the actor's thread).

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags::CU_EVENT_DISABLE_TIMING;
use cudarc::driver::{
    result as dresult, CudaContext, CudaEvent, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, ValidAsZeroBits,
};

use crate::error::GpuError;

/// `len` elements of `T` in page-locked host memory, with the event that marks the end of
/// the last copy enqueued with them.
pub(crate) struct PinnedMem<T> {
    ptr: NonNull<T>,
    len: usize,
    /// Recorded after each copy; never `BLOCKING_SYNC` (see the module's doc).
    last_copy: CudaEvent,
    /// A copy was enqueued and no wait has seen it finish yet.
    copying: AtomicBool,
}

// SAFETY: `PinnedMem` owns its allocation exclusively, like a `Box<[T]>`; the raw pointer
// is never shared, and every access goes through `&self` / `&mut self`.
unsafe impl<T: Send> Send for PinnedMem<T> {}
// SAFETY: shared access only hands out `&[T]`.
unsafe impl<T: Sync> Sync for PinnedMem<T> {}

impl<T: DeviceRepr + ValidAsZeroBits> PinnedMem<T> {
    /// `len` zeroed elements, page-locked in `ctx`.
    pub(crate) fn zeroed(ctx: &Arc<CudaContext>, len: usize) -> Result<Self, GpuError> {
        // (Also binds the context to this thread, which the allocation needs.)
        let last_copy = ctx.new_event(Some(CU_EVENT_DISABLE_TIMING))?;
        let ptr = alloc_host_zeroed::<T>(len, 0)?;
        Ok(PinnedMem {
            ptr,
            len,
            last_copy,
            copying: AtomicBool::new(false),
        })
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The same page-locked memory as elements of `U`, if its bytes are a whole number
    /// of them (`cuMemHostAlloc` memory is page-aligned: every element type's alignment).
    /// The memory and its last copy's event carry over; the pool calls this only for
    /// types of which every bit pattern is a value.
    pub(crate) fn recast<U: DeviceRepr + ValidAsZeroBits>(self) -> Result<PinnedMem<U>, Self> {
        let bytes = self.len * std::mem::size_of::<T>();
        let size = std::mem::size_of::<U>();
        if size == 0 || bytes % size != 0 || std::mem::align_of::<U>() > 4096 {
            return Err(self);
        }
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so the event is moved out exactly once and the
        // allocation changes owner without being freed.
        let last_copy = unsafe { std::ptr::read(&this.last_copy) };
        Ok(PinnedMem {
            ptr: this.ptr.cast::<U>(),
            len: bytes / size,
            last_copy,
            copying: AtomicBool::new(this.copying.load(Ordering::Acquire)),
        })
    }

    /// Waits for the last copy enqueued with the buffer, if no wait has seen it finish
    /// yet (a spin on its event; at once when the stream is known past it).
    fn settle(&self) -> Result<(), GpuError> {
        if self.copying.load(Ordering::Acquire) {
            self.last_copy.synchronize()?;
            self.copying.store(false, Ordering::Release);
        }
        Ok(())
    }

    /// The contents, once the last copy enqueued with the buffer has finished.
    pub(crate) fn as_slice(&self) -> Result<&[T], GpuError> {
        self.settle()?;
        // SAFETY: `len` initialised elements owned by `self` (zeroed at allocation, since
        // written only by copies of whole `T`s), and no copy is in flight.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) })
    }

    /// The contents for writing, once the last copy enqueued with the buffer has finished.
    pub(crate) fn as_mut_slice(&mut self) -> Result<&mut [T], GpuError> {
        self.settle()?;
        // SAFETY: as in `as_slice`, and `&mut self` makes this the only reference.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) })
    }

    /// Enqueues on `stream` a copy of `src` (a buffer or a range of one, no longer than
    /// this buffer) into the start of the buffer.
    pub(crate) fn copy_from_device(&mut self, stream: &CudaStream, src: &impl DevicePtr<T>) -> Result<(), GpuError> {
        fits(src.len(), self.len)?;
        // A copy still reading the buffer must finish before this one overwrites it.
        self.settle()?;
        let (from, _read) = src.device_ptr(stream);
        // SAFETY: the buffer holds `len` elements, at least as many as `src` (checked); it
        // stays allocated until the copy is done (`Drop` waits for `last_copy`, recorded
        // just after it), and `&mut self` keeps Rust off it until then (`as_slice` waits).
        let dst = unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), src.len()) };
        // SAFETY: `from` is `src`'s device address, valid on `stream` (the guard orders
        // the copy after `src`'s last writer and records the read).
        unsafe { dresult::memcpy_dtoh_async(dst, from, stream.cu_stream()) }?;
        self.mark_copy(stream)
    }

    /// Enqueues on `stream` a copy of the start of the buffer into `dst` (a buffer or a
    /// range of one, no longer than this buffer).
    pub(crate) fn copy_to_device(
        &mut self,
        stream: &CudaStream,
        dst: &mut impl DevicePtrMut<T>,
    ) -> Result<(), GpuError> {
        let n = dst.len();
        fits(n, self.len)?;
        // Reading while a copy into the buffer may still be writing it would copy a mix.
        self.settle()?;
        let (to, _write) = dst.device_ptr_mut(stream);
        // SAFETY: the buffer holds `len` initialised elements, at least as many as `dst`
        // (checked); it is neither written nor freed before the copy is done
        // (`as_mut_slice`, `copy_from_device` and `Drop` wait for `last_copy`, recorded
        // just after it).
        let src = unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), n) };
        // SAFETY: `to` is `dst`'s device address, valid on `stream` (the guard orders the
        // copy after `dst`'s last user and records the write).
        unsafe { dresult::memcpy_htod_async(to, src, stream.cu_stream()) }?;
        self.mark_copy(stream)
    }

    /// Records `last_copy` after the copy just enqueued on `stream`. Should the record
    /// fail, no later wait would cover that copy: the stream is waited for instead.
    fn mark_copy(&mut self, stream: &CudaStream) -> Result<(), GpuError> {
        if let Err(e) = self.last_copy.record(stream) {
            let _ = stream.synchronize();
            return Err(e.into());
        }
        self.copying.store(true, Ordering::Release);
        Ok(())
    }
}

/// `len` zeroed elements of `T` in page-locked memory of the context bound to this
/// thread, allocated with `cuMemHostAlloc` `flags` (0: cached; `DEVICEMAP`: also mapped
/// into the device); freed with `cuMemFreeHost`. Shared by [`PinnedMem`] and
/// `sys::mapped::MappedCell`.
pub(crate) fn alloc_host_zeroed<T: ValidAsZeroBits>(len: usize, flags: u32) -> Result<NonNull<T>, GpuError> {
    let bytes = len
        .checked_mul(std::mem::size_of::<T>())
        .filter(|b| *b <= isize::MAX as usize)
        .ok_or_else(|| GpuError::invalid(format!("a pinned buffer of {len} elements overflows")))?;
    // SAFETY: asks for `bytes` (at least one, so that the pointer is a real allocation)
    // of page-locked memory in the bound context. The pointer is checked below.
    let raw = unsafe { dresult::malloc_host(bytes.max(1), flags) }?;
    let ptr = NonNull::new(raw as *mut T).ok_or(GpuError::OutOfMemory {
        requested_bytes: bytes as u64,
    })?;
    // SAFETY: `ptr` addresses `bytes` writable bytes just allocated and owned by the
    // caller; an all-zero bit pattern is a valid `T` (`ValidAsZeroBits`). `cuMemHostAlloc`
    // memory is aligned for any type.
    unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, len) };
    Ok(ptr)
}

/// `Ok` if a copy of `n` elements fits the pinned buffer's `len` (it moves its first `n`).
fn fits(n: usize, len: usize) -> Result<(), GpuError> {
    if n <= len {
        return Ok(());
    }
    Err(GpuError::invalid(format!(
        "a copy of {n} elements through a pinned buffer of {len}"
    )))
}

impl<T> Drop for PinnedMem<T> {
    fn drop(&mut self) {
        // Freeing memory a copy still uses would let the GPU write into freed pages: wait
        // for the last copy first. After a device fault the wait fails at once (the
        // context's work is over), and the memory is freed all the same.
        // (The wait also binds the context, which freeing needs: always made here.)
        let _ = self.last_copy.synchronize();
        // `cuMemFreeHost` synchronises the context: apart from graph captures.
        let ptr = self.ptr.as_ptr() as *mut c_void;
        // SAFETY: `ptr` came from `cuMemHostAlloc` and is freed exactly once, here, after
        // the last copy using it.
        let _ = super::graph::apart_from_captures(|| unsafe { dresult::free_host(ptr) });
    }
}

impl<T> std::fmt::Debug for PinnedMem<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedMem(len {})", self.len)
    }
}

/// Memory this process did not allocate but copies through — an isolated device's
/// pinned arena, mapped in its worker — page-locked with the context by
/// `cuMemHostRegister`, range by range as buffers are first used, so their copies are
/// DMA at full speed. A range carved anew over ranges registered before (their buffers
/// were freed) replaces them. Everything is unregistered when this is dropped.
pub(crate) struct HostRegistrations {
    ctx: Arc<CudaContext>,
    /// Start address → length of each registered range.
    ranges: std::sync::Mutex<std::collections::BTreeMap<usize, usize>>,
}

impl HostRegistrations {
    pub(crate) fn new(ctx: Arc<CudaContext>) -> Self {
        HostRegistrations {
            ctx,
            ranges: Default::default(),
        }
    }

    /// Page-locks `bytes` at `ptr` (page-aligned, a whole number of pages of this
    /// process's memory that stays mapped while registered) unless exactly that range
    /// already is.
    pub(crate) fn ensure(&self, ptr: *const u8, bytes: usize) -> Result<(), GpuError> {
        let start = ptr as usize;
        let mut ranges = self.ranges.lock().unwrap_or_else(|p| p.into_inner());
        if ranges.get(&start) == Some(&bytes) {
            return Ok(());
        }
        self.ctx.bind_to_thread()?;
        let end = start + bytes;
        let overlapping: Vec<usize> = ranges
            .range(..end)
            .filter(|(&s, &len)| s + len > start)
            .map(|(&s, _)| s)
            .collect();
        for s in overlapping {
            ranges.remove(&s);
            // SAFETY: FFI edge: `s` was registered by this table with this context and
            // is unregistered once; no copy uses it (its buffer was freed before its
            // memory was carved into the range asked for now).
            unsafe { cudarc::driver::sys::cuMemHostUnregister(s as *mut c_void) }.result()?;
        }
        // SAFETY: FFI edge: the caller guarantees `bytes` of mapped memory at `ptr`,
        // page-aligned; `PORTABLE` makes it page-locked for every context.
        unsafe {
            cudarc::driver::sys::cuMemHostRegister_v2(
                ptr as *mut c_void,
                bytes,
                cudarc::driver::sys::CU_MEMHOSTREGISTER_PORTABLE,
            )
        }
        .result()?;
        ranges.insert(start, bytes);
        Ok(())
    }
}

impl Drop for HostRegistrations {
    fn drop(&mut self) {
        let ranges = std::mem::take(self.ranges.get_mut().unwrap_or_else(|p| p.into_inner()));
        if ranges.is_empty() || self.ctx.bind_to_thread().is_err() {
            return;
        }
        // Unregistering synchronises the context: apart from graph captures.
        super::graph::apart_from_captures(|| {
            for s in ranges.into_keys() {
                // SAFETY: FFI edge: registered by this table, unregistered once; the
                // context's work is over (its engine is being dropped).
                let _ = unsafe { cudarc::driver::sys::cuMemHostUnregister(s as *mut c_void) };
            }
        });
    }
}

/// Enqueues on `stream` a copy of `src` into `dst` (same length).
///
/// # Safety
/// `src` must stay valid and unwritten until `stream` has passed the copy (the caller
/// holds its memory until then).
pub(crate) unsafe fn copy_host_to_device<T: DeviceRepr>(
    stream: &CudaStream,
    src: &[T],
    dst: &mut impl DevicePtrMut<T>,
) -> Result<(), GpuError> {
    fits(src.len(), dst.len())?;
    fits(dst.len(), src.len())?;
    let (to, _write) = dst.device_ptr_mut(stream);
    // SAFETY: `to` is `dst`'s device address on `stream` (the guard orders the copy after
    // its last user and records the write); `src` outlives the copy (caller).
    unsafe { dresult::memcpy_htod_async(to, src, stream.cu_stream()) }?;
    Ok(())
}

/// Enqueues on `stream` a copy of `src` into `dst` (same length).
///
/// # Safety
/// `dst` must stay valid, and unread and unwritten by the host, until `stream` has
/// passed the copy (the caller holds its memory until then).
pub(crate) unsafe fn copy_device_to_host<T: DeviceRepr>(
    stream: &CudaStream,
    src: &impl DevicePtr<T>,
    dst: &mut [T],
) -> Result<(), GpuError> {
    fits(src.len(), dst.len())?;
    fits(dst.len(), src.len())?;
    let (from, _read) = src.device_ptr(stream);
    // SAFETY: `from` is `src`'s device address on `stream` (ordered after its last
    // writer, the read recorded); `dst` outlives the copy (caller).
    unsafe { dresult::memcpy_dtoh_async(dst, from, stream.cu_stream()) }?;
    Ok(())
}
