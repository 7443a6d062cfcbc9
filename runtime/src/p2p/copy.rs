//! `Device::copy_to`: a buffer of one device into a buffer of another.

use crate::backend::state::BackendKind;
use crate::device::context_actor::ContextActorCopyFromPeerDType;
use crate::device::{DType, Device};
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;
use crate::host::STAGING_BYTES;

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
    /// device or an isolated device (whose memory lives in its worker process) on either
    /// side it goes through this process's memory: downloaded from this device and
    /// written into `to` a window at a time.
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
        if self.same_device(to) {
            return self.copy(src, dst).await;
        }
        let (from_info, to_info) = (self.ready().await?, to.ready().await?);
        let in_process = self.config().isolation.is_none() && to.config().isolation.is_none();
        if in_process && from_info.backend == BackendKind::Cuda && to_info.backend == BackendKind::Cuda {
            // Served by `to`'s context: `dst` is checked there as any of its buffers,
            // `src` against this device's generation as of now.
            let (device, generation) = (self.id(), self.state().generation);
            let (src, dst) = (src.clone(), dst.clone());
            return to
                .call(|reply| <T as ContextActorCopyFromPeerDType>::__into_msg(src, device, generation, dst, reply))
                .await;
        }
        self.copy_staged(src, to, dst).await
    }

    /// `src` into `dst` of `to` through this process's memory, a window of
    /// [`STAGING_BYTES`] at a time: downloaded into a host buffer, written from it (each
    /// copy staged through the pinned pool, or an isolated device's shared arena), so the
    /// host holds two windows, not the whole buffer — the next window is read from this
    /// device while the last one is written into `to`.
    async fn copy_staged<T: DType>(&self, src: &GpuRef<T>, to: &Device, dst: &GpuRef<T>) -> Result<(), GpuError> {
        let n = src.len();
        let window = (STAGING_BYTES / std::mem::size_of::<T>().max(1)).max(1);
        let windows: Vec<std::ops::Range<usize>> = (0..n).step_by(window).map(|s| s..(s + window).min(n)).collect();
        let Some(first) = windows.first() else {
            return Ok(());
        };
        let mut current = vec![T::default(); first.len()];
        let mut next = vec![T::default(); if windows.len() > 1 { window } else { 0 }];
        self.download_into(&src.view(first.clone())?, &mut current).await?;
        for (k, w) in windows.iter().enumerate() {
            let written = dst.view(w.clone())?;
            match windows.get(k + 1) {
                Some(after) => {
                    let read = src.view(after.clone())?;
                    let into = &mut next[..after.len()];
                    let (wrote, got) = futures::join!(
                        to.write_slice(&written, &current[..w.len()]),
                        self.download_into(&read, into)
                    );
                    wrote?;
                    got?;
                    std::mem::swap(&mut current, &mut next);
                }
                None => to.write_slice(&written, &current[..w.len()]).await?,
            }
        }
        Ok(())
    }
}
