//! Managed (unified) memory: allocation, freeing, host views, prefetch and advice — the
//! calls cudarc's `CudaSlice` does not make for memory it did not allocate.

use std::sync::Arc;

use cudarc::driver::sys::{self as ds, CUmemLocation, CUmemLocationType as Lt, CUmem_advise as Adv};
use cudarc::driver::{result, CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};

use crate::error::GpuError;
use crate::memory::{Advice, Location};

/// `len` zeroed elements of managed memory, as a `CudaSlice` on `stream` (so every
/// device operation takes it). Free it with [`free_managed`], never by dropping it.
pub(crate) fn alloc_managed<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    len: usize,
) -> Result<CudaSlice<T>, GpuError> {
    let ctx = stream.context();
    if ctx.attribute(ds::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)? == 0 {
        return Err(GpuError::Unsupported("this GPU has no managed memory".into()));
    }
    ctx.bind_to_thread()?;
    let bytes = len * std::mem::size_of::<T>();
    // SAFETY: a fresh managed allocation of `bytes` bytes, attached globally (every
    // stream may use it); it is zeroed below before anyone reads it.
    let ptr = unsafe { result::malloc_managed(bytes, ds::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL) }
        .map_err(|e| GpuError::from_cuda_code(e.0 as i32, format!("{e:?}"), bytes as u64))?;
    // SAFETY: `ptr` holds `bytes` bytes; the memset is ordered on `stream`, before every
    // later use of the slice (which orders itself after the stream's events).
    let zeroed = unsafe { result::memset_d8_async(ptr, 0, bytes, stream.cu_stream()) };
    if let Err(e) = zeroed {
        // SAFETY: allocated above, not shared.
        let _ = unsafe { result::memory_free(ptr) };
        return Err(e.into());
    }
    // SAFETY: `ptr` is a live allocation of `len` elements of `T`, zeroed (a valid `T`);
    // the slice does not own it in cudarc's sense — [`free_managed`] releases it with
    // `cuMemFree`, as managed memory requires.
    Ok(unsafe { stream.upgrade_device_ptr(ptr, len) })
}

/// Frees memory from [`alloc_managed`] once the work that uses it has finished.
pub(crate) fn free_managed<T>(slice: CudaSlice<T>) -> Result<(), GpuError> {
    let stream = slice.stream().clone();
    // `leak` orders the slice's stream after the buffer's last readers and writers.
    let ptr = slice.leak();
    stream.synchronize()?;
    // SAFETY: `ptr` came from `cuMemAllocManaged` in `alloc_managed`; every use has
    // completed (synchronized above) and nothing refers to it any more.
    unsafe { result::memory_free(ptr) }?;
    Ok(())
}

/// The elements of a managed allocation, seen from the host.
///
/// # Safety
/// `ptr` must be the start of a live managed allocation of `len` elements of `T`, with
/// no GPU work on it in flight for the lifetime of the returned slice, and no other
/// reference to it.
pub(crate) unsafe fn host_view<'a, T>(ptr: u64, len: usize) -> &'a mut [T] {
    // SAFETY: managed memory is addressable from the host at its device address; the
    // caller guarantees liveness, quiescence and exclusivity.
    unsafe { std::slice::from_raw_parts_mut(ptr as *mut T, len) }
}

/// The driver's location of `l`: a device by ordinal, or the host.
///
/// Written without naming the id field: CUDA 13.2 moved it into a union (and 13.4 gave the
/// union a second member), so its Rust spelling depends on the CUDA version of cudarc's
/// bindings, which the `cuda-12` / `cuda-13` features (or the build machine's toolkit)
/// choose. The layout is the same in every version: the type, then a 32-bit id.
fn location(l: Location, device: i32) -> CUmemLocation {
    const _: () = assert!(std::mem::size_of::<CUmemLocation>() == 8);
    let (type_, id) = match l {
        Location::Device => (Lt::CU_MEM_LOCATION_TYPE_DEVICE, device),
        Location::Host => (Lt::CU_MEM_LOCATION_TYPE_HOST, 0),
    };
    // SAFETY: `CUmemLocation` is a plain C struct of an enum and a 32-bit integer (or a
    // union whose first member is that integer) for which all-zero bits are valid (0 is
    // CU_MEM_LOCATION_TYPE_INVALID); the id is the `c_int` at offset 4 in every version, as
    // the size assertion above and `#[repr(C)]` fix, and the write stays inside the value.
    unsafe {
        let mut loc: CUmemLocation = std::mem::zeroed();
        loc.type_ = type_;
        (&mut loc as *mut CUmemLocation).cast::<i32>().add(1).write(id);
        loc
    }
}

/// Enqueues a prefetch of `bytes` at `ptr` to `to` on `stream`.
pub(crate) fn prefetch(ptr: u64, bytes: usize, to: Location, stream: &CudaStream) -> Result<(), GpuError> {
    let to = location(to, stream.context().ordinal() as i32);
    // SAFETY: the caller passes a live managed allocation of `bytes` bytes; the prefetch
    // is ordered on `stream`.
    unsafe { result::mem_prefetch_async(ptr, bytes, to, stream.cu_stream()) }?;
    Ok(())
}

/// Applies `advice` to `bytes` at `ptr` on `device`.
pub(crate) fn advise(ptr: u64, bytes: usize, advice: Advice, device: i32) -> Result<(), GpuError> {
    let (adv, loc) = match advice {
        Advice::ReadMostly(true) => (Adv::CU_MEM_ADVISE_SET_READ_MOSTLY, Location::Device),
        Advice::ReadMostly(false) => (Adv::CU_MEM_ADVISE_UNSET_READ_MOSTLY, Location::Device),
        Advice::PreferredLocation(Some(l)) => (Adv::CU_MEM_ADVISE_SET_PREFERRED_LOCATION, l),
        Advice::PreferredLocation(None) => (Adv::CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, Location::Device),
        Advice::AccessedBy(l, true) => (Adv::CU_MEM_ADVISE_SET_ACCESSED_BY, l),
        Advice::AccessedBy(l, false) => (Adv::CU_MEM_ADVISE_UNSET_ACCESSED_BY, l),
    };
    let loc = location(loc, device);
    // SAFETY: the caller passes a live managed allocation of `bytes` bytes; advice
    // changes only how the driver places it.
    unsafe { result::mem_advise(ptr, bytes, adv, loc) }?;
    Ok(())
}
