//! Device memory left as the allocator hands it out: not zeroed, for a buffer that a
//! launch fills before anything reads it (the runtime's own temporaries — a sort's radix
//! forms and payloads, a copy it gathers from), where zeroing is a wasted pass over the
//! memory (a 256 MiB memset takes about 0.1 ms on an H100). In `sys/` because cudarc
//! marks such an allocation `unsafe`, and `unsafe` lives here.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, DriverError};

use crate::dtype::DTypeBase;

/// `len` elements of `T` on `stream`, not zeroed; `None` for an element type some of
/// whose bit patterns are not values (the caller zeroes those instead).
pub(crate) fn alloc_uninit<T: DTypeBase + DeviceRepr>(
    stream: &Arc<CudaStream>,
    len: usize,
) -> Option<Result<CudaSlice<T>, DriverError>> {
    if !T::EVERY_BIT_PATTERN {
        return None;
    }
    // SAFETY: the memory is device memory, which no Rust reference ever points into: it
    // is only read by kernels and by copies to the host, and every bit pattern of `T`
    // is a value of `T` (checked above), so reading an element before anything wrote it
    // gives an unspecified value of `T`, never undefined behaviour. The allocation is
    // ordered on `stream` like every other use of the buffer.
    Some(unsafe { stream.alloc::<T>(len) })
}
