//! Thin FFI wrappers for what cudarc's safe layer lacks. Every `unsafe` block of the
//! runtime that talks to CUDA lives here, each with its `// SAFETY:` reasoning.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{result as dresult, CudaStream};

use crate::error::GpuError;

mod absent;
#[cfg(feature = "blas")]
mod cublas;
pub(crate) mod cublaslt;
#[cfg(feature = "fft")]
mod cufft;
#[cfg(feature = "rand")]
mod curand;
#[cfg(feature = "solver")]
pub mod cusolver;
#[cfg(feature = "sparse")]
pub(crate) mod cusparse;
pub(crate) mod foreign;
pub(crate) mod graph;
pub(crate) mod hopper;
pub(crate) mod ipc;
pub(crate) mod launch;
pub(crate) mod managed;
pub(crate) mod mapped;
pub(crate) mod matrix_pointers;
#[cfg(feature = "nccl")]
pub(crate) mod nccl;
mod nvrtc;
pub(crate) mod peer;
pub(crate) mod pinned;
pub(crate) mod plain;
pub(crate) mod uninit;

#[cfg(not(feature = "fft"))]
pub use absent::CufftFloat;
#[cfg(not(feature = "rand"))]
pub use absent::CurandFloat;
#[cfg(not(feature = "solver"))]
pub use absent::CusolverFloat;
#[cfg(not(feature = "sparse"))]
pub use absent::CusparseFloat;
#[cfg(not(feature = "nccl"))]
pub use absent::NcclType;
#[cfg(not(feature = "blas"))]
pub use absent::{CublasBatchedLu, CublasGemm, CublasLevel1};
#[cfg(feature = "blas")]
pub use cublas::{CublasBatchedLu, CublasGemm, CublasLevel1, Vector, VectorMut};
#[cfg(feature = "nccl")]
pub use cudarc::nccl::NcclType;
#[cfg(feature = "fft")]
pub use cufft::CufftFloat;
#[cfg(feature = "rand")]
pub use curand::{CurandFloat, CurandGen, Draw};
#[cfg(feature = "solver")]
pub use cusolver::CusolverFloat;
#[cfg(feature = "sparse")]
pub use cusparse::CusparseFloat;
pub use nvrtc::CUDA_INCLUDE_ENV;
pub(crate) use nvrtc::{compile_image, nvrtc_version};

/// The callback `cuLaunchHostFunc` runs: takes back the boxed closure and calls it.
unsafe extern "C" fn host_fn_trampoline(user_data: *mut c_void) {
    // SAFETY: `user_data` is the pointer produced by `Box::into_raw` in `launch_host_fn`,
    // and CUDA calls this function at most once per launch, so the box is reclaimed
    // exactly once.
    let f = unsafe { Box::from_raw(user_data as *mut Box<dyn FnOnce() + Send>) };
    f();
}

/// Enqueues `f` to run on a CUDA driver thread once all work before it on `stream` is
/// done. After a device fault CUDA never runs it (DESIGN.md): callers must pair it with
/// a fault check and a deadline. The closure is leaked in that case — a bounded cost paid
/// only on a dead context.
pub(crate) fn launch_host_fn(stream: &Arc<CudaStream>, f: Box<dyn FnOnce() + Send>) -> Result<(), GpuError> {
    stream.context().bind_to_thread()?;
    let user_data = Box::into_raw(Box::new(f)) as *mut c_void;
    // SAFETY: the stream handle is valid for the lifetime of `stream`; the trampoline
    // matches `CUhostFn`'s signature and consumes `user_data` exactly once. On an error
    // return CUDA will not call it, so the box is reclaimed here.
    let r = unsafe { dresult::stream::launch_host_function(stream.cu_stream(), host_fn_trampoline, user_data) };
    if let Err(e) = r {
        // SAFETY: the launch failed, so CUDA holds no reference to `user_data`.
        drop(unsafe { Box::from_raw(user_data as *mut Box<dyn FnOnce() + Send>) });
        return Err(e.into());
    }
    Ok(())
}

/// Microseconds on the machine's monotonic clock (`CLOCK_MONOTONIC`): one clock for every
/// process of the machine, so timelines of a user process and its workers line up.
#[cfg(unix)]
pub(crate) fn monotonic_us() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

/// Microseconds on a monotonic clock: this process's own off Unix, where no worker
/// process shares the timeline (isolated devices are Linux-only).
#[cfg(not(unix))]
pub(crate) fn monotonic_us() -> f64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64() * 1e6
}

/// This process's effective user id: who files it creates belong to, and so who the
/// kernel cache trusts.
#[cfg(unix)]
pub(crate) fn effective_uid() -> u32 {
    // SAFETY: geteuid takes nothing, cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() }
}

/// True if the CUDA driver library can be loaded. cudarc's dynamic loading panics on
/// first use when it cannot, so the runtime asks first.
pub(crate) fn cuda_driver_present() -> bool {
    // SAFETY: only tries to open the shared library; no CUDA call is made.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// True if CUDA device `id` exists and can be initialised.
pub(crate) fn cuda_device_usable(id: usize) -> bool {
    cuda_driver_present()
        && cudarc::driver::CudaContext::device_count()
            .map(|n| (id as i32) < n)
            .unwrap_or(false)
}
