//! `cuLaunchKernel` on a parameter list built once: what cudarc's launch builder does,
//! without growing its argument list one push at a time (our launches know their
//! parameter count before they start) and without its per-slice events (our buffers are
//! ordered by `gpu_ref::locked`).

use std::ffi::c_void;

use cudarc::driver::{result, CudaFunction, CudaStream};

use crate::error::GpuError;

/// Grid, block and dynamic shared memory of one launch.
pub(crate) struct Dims {
    pub(crate) grid: (u32, u32, u32),
    pub(crate) block: (u32, u32, u32),
    pub(crate) shared_mem_bytes: u32,
}

/// Enqueues `f` on `stream`.
///
/// # Safety
/// `params` must hold one pointer per kernel parameter, in order, each to a live value
/// of the parameter's type (device addresses for pointers), and `dims` must fit the
/// device and the function (validated by the caller).
pub(crate) unsafe fn launch(
    stream: &CudaStream,
    f: &CudaFunction,
    dims: &Dims,
    params: &mut [*mut c_void],
) -> Result<(), GpuError> {
    stream.context().bind_to_thread()?;
    // SAFETY: the function belongs to the stream's context (loaded by this device's
    // kernel or module actor); `params` and `dims` satisfy the caller's contract above.
    unsafe {
        result::launch_kernel(
            f.cu_function(),
            dims.grid,
            dims.block,
            dims.shared_mem_bytes,
            stream.cu_stream(),
            params,
        )
    }?;
    Ok(())
}
