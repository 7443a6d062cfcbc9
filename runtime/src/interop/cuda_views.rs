//! Lending a `GpuRef` to cudarc code or to raw CUDA: as a cudarc view, or as a device
//! address for work enqueued on a stream — with the buffer's stream ordering kept.
//!
//! Why closures: the buffer stays locked while the caller enqueues (no actor of the
//! device enqueues on it meanwhile), and the use is recorded in the buffer's events when
//! the closure returns — after the caller's work is on the stream, so the device's later
//! work on the buffer waits for it.

use cudarc::driver::{CudaStream, CudaView, CudaViewMut};

use super::{cpu_has_no_cuda, Interop};
use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::gpu_ref::{GpuRef, Region, RegionMut};

/// How lent memory is used: what it waits for and what waits for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read only: waits for the buffer's last writer; later writers wait for it.
    Read,
    /// Written (and maybe read): waits for the last writer and every reader since; every
    /// later use waits for it.
    Write,
}

impl<T: DTypeBase> GpuRef<T> {
    /// Runs `f` on this handle's elements as a cudarc view, to read — for a cudarc launch
    /// (`.arg(&view)`), copy or library call. cudarc orders every such use by the
    /// buffer's events: the stream it enqueues on waits for the buffer's last writer, and
    /// the use is recorded so the device's later writes wait for it. The buffer is locked
    /// while `f` runs: keep `f` to enqueueing.
    ///
    /// `Stale` for a buffer of an earlier generation than `interop`'s, `InvalidArgument`
    /// for one of another device, `Unsupported` on the CPU device (use
    /// [`GpuRef::with_host`]).
    pub fn with_cuda_view<R>(&self, interop: &Interop, f: impl FnOnce(&CudaView<'_, T>) -> R) -> Result<R, GpuError> {
        interop.check(self)?;
        let guard = self.lock();
        match guard.region() {
            Region::Cuda(view) => Ok(f(&view)),
            Region::Cpu(_) => Err(cpu_has_no_cuda()),
        }
    }

    /// As [`GpuRef::with_cuda_view`], to write: a cudarc view of this handle's elements
    /// that cudarc's launches and copies may write, ordered after every earlier use.
    pub fn with_cuda_view_mut<R>(
        &self,
        interop: &Interop,
        f: impl FnOnce(&mut CudaViewMut<'_, T>) -> R,
    ) -> Result<R, GpuError> {
        interop.check(self)?;
        let mut guard = self.lock();
        match guard.region_mut() {
            RegionMut::Cuda(mut view) => Ok(f(&mut view)),
            RegionMut::Cpu(_) => Err(cpu_has_no_cuda()),
        }
    }

    /// Runs `f` with the device address of this handle's first element, for work `f`
    /// enqueues on `stream` (a raw kernel launch, another library's call): before `f`,
    /// `stream` is made to wait for the buffer's last writer (and, for `Access::Write`,
    /// its readers); after, the use is recorded on `stream`, so the device's later work
    /// on the buffer waits for what `f` enqueued. The address is valid while the buffer
    /// lives; using it is `unsafe` on the caller's side: stay within
    /// [`GpuRef::num_bytes`], on `stream`, and keep a clone of this handle until that
    /// work has finished.
    ///
    /// `stream` must be of the device's context (`InvalidArgument` otherwise); `Stale`,
    /// `InvalidArgument` and `Unsupported` as for [`GpuRef::with_cuda_view`].
    pub fn with_device_ptr<R>(
        &self,
        interop: &Interop,
        stream: &CudaStream,
        access: Access,
        f: impl FnOnce(u64) -> R,
    ) -> Result<R, GpuError> {
        interop.check(self)?;
        let ours = interop.context()?;
        if stream.context().cu_ctx() != ours.cu_ctx() {
            return Err(GpuError::InvalidArgument(
                crate::error::Invalid::new(format!(
                    "the stream is of another CUDA context than device {}'s: pass a stream of its context \
                     (Interop::stream, or one made from Interop::context)",
                    interop.device_id()
                ))
                .arg("stream"),
            ));
        }
        let mut guard = self.lock();
        let (ptr, recorded) = guard.address(stream, access == Access::Write)?;
        let r = f(ptr);
        drop(recorded);
        Ok(r)
    }
}
