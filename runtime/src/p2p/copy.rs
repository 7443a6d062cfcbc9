//! `Device::copy_to`: a buffer of one device into a buffer of another.

use crate::backend::state::BackendKind;
use crate::device::context_actor::ContextActorCopyFromPeerDType;
use crate::device::{DType, Device};
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;

impl Device {
    /// Copies `src`, a buffer of this device, into `dst`, a buffer of `to` of the same
    /// length, and resolves when the copy is done.
    ///
    /// Each buffer is checked against its own device (one of an older generation is
    /// `Stale`, one of a third device `InvalidArgument`), and the copy is ordered after
    /// the work already enqueued on either buffer. Between two GPUs it is a CUDA peer
    /// copy on `to`'s stream — one DMA where the pair has peer access (see
    /// [`Topology`](crate::p2p::Topology)), staged by the driver otherwise; two `Device`s
    /// on one GPU copy within it; within one device it is [`Device::copy`]; with the CPU
    /// device on either side it is a download from this device and a write into `to`.
    /// `Unsupported` when either device is isolated (README: what is missing).
    pub async fn copy_to<T: DType>(&self, src: &GpuRef<T>, to: &Device, dst: &GpuRef<T>) -> Result<(), GpuError> {
        if src.len() != dst.len() {
            return Err(GpuError::InvalidArgument(Invalid::length(
                format!(
                    "copy of {} elements into a buffer of {} on another device",
                    src.len(),
                    dst.len()
                ),
                "dst",
                src.len(),
                dst.len(),
            )));
        }
        for d in [self, to] {
            if d.config().isolation.is_some() {
                return Err(GpuError::Unsupported(format!(
                    "a copy between devices where {d:?} is isolated: download from one and upload to the other"
                )));
            }
        }
        if self.same_device(to) {
            return self.copy(src, dst).await;
        }
        let (from_info, to_info) = (self.ready().await?, to.ready().await?);
        if from_info.backend == BackendKind::Cuda && to_info.backend == BackendKind::Cuda {
            // Served by `to`'s context: `dst` is checked there as any of its buffers,
            // `src` against this device's generation as of now.
            let (device, generation) = (self.id(), self.state().generation);
            let (src, dst) = (src.clone(), dst.clone());
            return to
                .call(|reply| <T as ContextActorCopyFromPeerDType>::__into_msg(src, device, generation, dst, reply))
                .await;
        }
        let staged = self.download(src).await?;
        to.write(dst, staged).await
    }
}
