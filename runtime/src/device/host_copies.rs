//! Copies between a device and ordinary host memory (`&[T]`, `&mut [T]`, `Vec<T>`),
//! staged through the device's pinned pool.
//!
//! Why: a copy from pageable memory is staged by the CUDA driver itself, through small
//! buffers of its own, one after the other: 7–8 GB/s on the H200 where page-locked
//! memory moves at ~55 GB/s (`benches/copies.rs`). Here the caller's task copies chunk
//! after chunk of its slice into pinned buffers of the pool while the device DMAs the
//! previous ones, so the host copy and the transfer overlap and no buffer is allocated
//! or faulted per call; each chunk's host copy is split over a few threads (one copies
//! ~7 GB/s there). Slices are borrowed: nothing is copied into a message first.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;

use futures::future::{maybe_done, MaybeDone};

use crate::device::context_actor::{ContextActorDownloadPinnedAtDType, ContextActorWritePinnedAtDType};
use crate::device::{DType, Device};
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;
use crate::host::{copy_wide, PinnedBuf, STAGING_BYTES};
use crate::wire::HostData;

/// Bytes per staging chunk (the pool's staging size, which
/// `DeviceConfig::pinned_initial_buffers` pins ahead).
const CHUNK_BYTES: usize = STAGING_BYTES;

/// Chunks in flight: one being filled (or drained) by the host, the others transferring.
const DEPTH: usize = 3;

/// A transfer of one chunk; resolves with its pinned buffer.
type InFlight<'a, T> = Pin<Box<dyn Future<Output = Result<PinnedBuf<T>, GpuError>> + Send + 'a>>;

/// A chunk's request, sent: polled once, so it left for the device while the caller goes
/// on copying (even on a single-threaded runtime), and its answer kept if already in.
struct Sent<'a, T: DType>(Pin<Box<MaybeDone<InFlight<'a, T>>>>);

impl<'a, T: DType> Sent<'a, T> {
    async fn send(f: InFlight<'a, T>) -> Self {
        let mut f = Box::pin(maybe_done(f));
        let _ = futures::poll!(f.as_mut());
        Sent(f)
    }

    async fn done(mut self) -> Result<PinnedBuf<T>, GpuError> {
        self.0.as_mut().await;
        self.0.as_mut().take_output().expect("just completed")
    }
}

impl Device {
    /// Copies `src` into `dst` (same length), staged in chunks through pinned buffers so
    /// the host copy overlaps the transfer; resolves when `dst` holds it (on an isolated
    /// device the pinned buffers are shared memory its worker copies from: no copy in
    /// the worker). Below one chunk, it is [`Device::write`].
    pub async fn write_slice<T: DType>(&self, dst: &GpuRef<T>, src: &[T]) -> Result<(), GpuError> {
        same_len(src.len(), dst.len(), "src")?;
        let chunk = chunk_len::<T>();
        if !self.stages::<T>(src.len()) {
            return self.write_message(dst, src).await;
        }
        let mut free: Vec<PinnedBuf<T>> = Vec::with_capacity(DEPTH);
        let mut inflight: VecDeque<Sent<'_, T>> = VecDeque::with_capacity(DEPTH);
        for (i, part) in src.chunks(chunk).enumerate() {
            let mut buf = match (free.pop(), inflight.len()) {
                (Some(b), _) => b,
                (None, n) if n < DEPTH => self.pinned_scratch::<T>(chunk).await?,
                (None, _) => inflight.pop_front().expect("one in flight").done().await?,
            };
            copy_wide(&mut buf.as_mut_slice()?[..part.len()], part);
            let (dst, len) = (dst.clone(), part.len());
            let f: InFlight<'_, T> = Box::pin(async move {
                self.call(|reply| <T as ContextActorWritePinnedAtDType>::__into_msg(dst, i * chunk, buf, len, reply))
                    .await
            });
            inflight.push_back(Sent::send(f).await);
        }
        for f in inflight {
            f.done().await?;
        }
        Ok(())
    }

    /// Uploads `src` into a new buffer, staged like [`Device::write_slice`].
    pub async fn upload_slice<T: DType>(&self, src: &[T]) -> Result<GpuRef<T>, GpuError> {
        if !self.stages::<T>(src.len()) {
            return self.upload_message(src).await;
        }
        let dst = self.alloc::<T>(src.len()).await?;
        self.write_slice(&dst, src).await?;
        Ok(dst)
    }

    /// Copies `src` into `dst` (same length), the caller's memory: chunks are downloaded
    /// into pinned buffers while the host copies earlier ones out.
    pub async fn download_into<T: DType>(&self, src: &GpuRef<T>, dst: &mut [T]) -> Result<(), GpuError> {
        same_len(dst.len(), src.len(), "dst")?;
        if !self.stages::<T>(dst.len()) {
            let v = self.download_message(src).await?;
            dst.copy_from_slice(&v);
            return Ok(());
        }
        let chunk = chunk_len::<T>();
        let n = dst.len().div_ceil(chunk);
        let total = dst.len();
        let start = |i: usize, buf: PinnedBuf<T>| -> InFlight<'_, T> {
            let (src, len) = (src.clone(), chunk.min(total - i * chunk));
            Box::pin(async move {
                self.call(|reply| <T as ContextActorDownloadPinnedAtDType>::__into_msg(src, i * chunk, buf, len, reply))
                    .await
            })
        };
        let mut inflight = VecDeque::with_capacity(DEPTH);
        for i in 0..n.min(DEPTH) {
            let buf = self.pinned_scratch::<T>(chunk).await?;
            inflight.push_back(Sent::send(start(i, buf)).await);
        }
        for (i, out) in dst.chunks_mut(chunk).enumerate() {
            let buf = inflight.pop_front().expect("chunk i in flight").done().await?;
            copy_wide(out, &buf.as_slice()?[..out.len()]);
            if i + DEPTH < n {
                inflight.push_back(Sent::send(start(i + DEPTH, buf)).await);
            }
        }
        Ok(())
    }

    /// Allocates a buffer holding `data` (a `Vec`, a slice, an array). A large upload
    /// (a chunk or more) is staged like [`Device::upload_slice`] — the host copy into
    /// pinned buffers overlapping the transfers, at about twice the speed of a copy from
    /// pageable memory and the same on an isolated device (whose pinned buffers its
    /// worker DMAs from); a small one goes as one message.
    pub async fn upload<T: DType>(&self, data: impl Into<HostData<T>>) -> Result<GpuRef<T>, GpuError> {
        let data = data.into();
        if self.stages::<T>(data.len()) {
            return self.upload_slice(&data).await;
        }
        self.upload_message(data).await
    }

    /// Overwrites `dst` with `data` (same length): a large write staged like
    /// [`Device::write_slice`], a small one as one message.
    pub async fn write<T: DType>(&self, dst: &GpuRef<T>, data: impl Into<HostData<T>>) -> Result<(), GpuError> {
        let data = data.into();
        if self.stages::<T>(data.len()) {
            return self.write_slice(dst, &data).await;
        }
        self.write_message(dst, data).await
    }

    /// Copies a buffer (or view) to the host: a large one downloaded in chunks through
    /// pinned buffers like [`Device::download_into`] — into a new vector, the host copy
    /// of each chunk overlapping the transfer of the next —, a small one as one message.
    pub async fn download<T: DType>(&self, src: &GpuRef<T>) -> Result<Vec<T>, GpuError> {
        if self.stages::<T>(src.len()) {
            let mut out = vec![T::default(); src.len()];
            self.download_into(src, &mut out).await?;
            return Ok(out);
        }
        self.download_message(src).await
    }

    /// Whether a copy of `len` elements is staged: at least a chunk, on a device whose
    /// pinned buffers may hold a chunk, no `Recorder` attached (a journal holds a
    /// write's data, not a pinned buffer's). The CPU device stages too: its "pinned"
    /// buffers are plain memory, the copies as many as a direct write's, and the chunk
    /// pipeline runs in CI (in-process and isolated).
    fn stages<T: DType>(&self, len: usize) -> bool {
        let chunk_bytes = (chunk_len::<T>() * std::mem::size_of::<T>()) as u64;
        len >= chunk_len::<T>()
            && chunk_bytes <= self.config().pinned_buffer_max_bytes
            && self.journal_slot().get().is_none()
    }
}

/// Elements of `T` per chunk.
fn chunk_len<T>() -> usize {
    (CHUNK_BYTES / std::mem::size_of::<T>().max(1)).max(1)
}

/// `Ok` if the host side holds `want` elements, else the `InvalidArgument` naming it.
fn same_len(got: usize, want: usize, what: &str) -> Result<(), GpuError> {
    if got == want {
        return Ok(());
    }
    Err(GpuError::InvalidArgument(Invalid::length(
        format!("a host {what} of {got} elements for a device buffer of {want}"),
        what,
        want,
        got,
    )))
}
