//! Memory and streams of other libraries (`interop`): what a device pointer handed to us
//! belongs to, and making a stream we did not create wait for ours.

use std::sync::Arc;

use cudarc::driver::sys::{self as ds, CUpointer_attribute as Pa};
use cudarc::driver::{CudaContext, CudaStream};

use crate::error::GpuError;

/// The allocation a device address lies in, as the driver knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Allocation {
    /// Its first byte.
    pub(crate) base: u64,
    /// Its size in bytes.
    pub(crate) bytes: usize,
    /// The ordinal of the GPU it lives on.
    pub(crate) device: i32,
}

/// The driver's view of `ptr`: the allocation it lies in and its GPU, with `ctx` current.
/// An address the driver does not know (host memory, freed memory, a made-up number) is
/// an `InvalidArgument` naming it.
pub(crate) fn allocation_of(ctx: &Arc<CudaContext>, ptr: u64) -> Result<Allocation, GpuError> {
    ctx.bind_to_thread()?;
    let unknown = |what: &str, r: ds::CUresult| {
        GpuError::invalid(format!(
            "{ptr:#x} is not device memory the CUDA driver knows ({what}: {r:?}): pass the address of a live \
             allocation of this process"
        ))
    };
    let mut device: i32 = -1;
    // SAFETY: `device` is a valid out-parameter of the attribute's type (an int); the
    // driver only reads `ptr` as a number.
    let r = unsafe {
        ds::cuPointerGetAttribute(
            (&mut device as *mut i32).cast(),
            Pa::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            ptr,
        )
    };
    if r != ds::CUresult::CUDA_SUCCESS {
        return Err(unknown("cuPointerGetAttribute", r));
    }
    let (mut base, mut bytes) = (0u64, 0usize);
    // SAFETY: two valid out-parameters of the documented types.
    let r = unsafe { ds::cuMemGetAddressRange_v2(&mut base, &mut bytes, ptr) };
    if r != ds::CUresult::CUDA_SUCCESS {
        return Err(unknown("cuMemGetAddressRange", r));
    }
    Ok(Allocation { base, bytes, device })
}

/// Makes `consumer` — a raw stream handle of another library (1: the legacy default
/// stream, 2: the per-thread default stream, else a `CUstream`) — wait for everything
/// enqueued on `ours` so far, without blocking the host: an event recorded on `ours`
/// that `consumer` waits on.
///
/// # Safety
/// `consumer` must be 1, 2 or a live stream of `ours`'s context.
pub(crate) unsafe fn make_wait(consumer: usize, ours: &Arc<CudaStream>) -> Result<(), GpuError> {
    ours.context().bind_to_thread()?;
    let event = ours.record_event(None)?;
    // SAFETY: the caller vouches for `consumer`; the event is live (destroying it after
    // the wait is enqueued is allowed: the wait keeps what it needs).
    let r = unsafe { ds::cuStreamWaitEvent(consumer as ds::CUstream, event.cu_event(), 0) };
    if r != ds::CUresult::CUDA_SUCCESS {
        return Err(GpuError::invalid(format!(
            "stream {consumer:#x} cannot wait for this device's work ({r:?}): pass a live stream of this device's \
             context, 1 (the legacy default stream) or 2 (the per-thread default stream)"
        )));
    }
    Ok(())
}
