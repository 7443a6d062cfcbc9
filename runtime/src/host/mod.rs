//! Pinned host buffers and their pool.
//!
//! Copies between the GPU and page-locked host memory run at full PCIe/NVLink speed and
//! truly asynchronously (55 GB/s on the H200 against 7–8 GB/s pageable, DESIGN.md). Pinning
//! is expensive (a driver call that locks pages), so buffers come from a per-device pool
//! and return to it when dropped. An isolated device's buffers are ranges of shared
//! memory that its worker page-locks (`shared.rs`).

use std::sync::Arc;

use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::sys::pinned::PinnedMem;
use crate::wire::{Reader, SharedRange, Side, Wire, Writer};

mod pool;
mod shared;

pub(crate) use self::pool::{PinnedPool, STAGING_BYTES};
pub(crate) use self::shared::SharedHost;
pub(crate) use crate::sys::plain::PlainMem;

/// The memory behind a [`PinnedBuf`].
pub(crate) enum HostMem<T> {
    /// Page-locked memory of a CUDA context.
    Pinned(PinnedMem<T>),
    /// The CPU device's stand-in: ordinary memory.
    Plain(PlainMem<T>),
    /// An isolated device's: a range of shared memory its worker page-locks.
    Shared(SharedHost<T>),
}

impl<T: DTypeBase> HostMem<T> {
    pub(crate) fn len(&self) -> usize {
        match self {
            HostMem::Pinned(p) => p.len(),
            HostMem::Plain(v) => v.len(),
            HostMem::Shared(s) => s.len(),
        }
    }

    /// The same memory as elements of `U`, if its bytes are a whole number of them (the
    /// pool's reuse across element types; an isolated device's shared range is never
    /// pooled, and stays as it is).
    pub(crate) fn recast<U: DTypeBase>(self) -> Result<HostMem<U>, Self> {
        match self {
            HostMem::Pinned(p) => p.recast().map(HostMem::Pinned).map_err(HostMem::Pinned),
            HostMem::Plain(p) => p.recast().map(HostMem::Plain).map_err(HostMem::Plain),
            HostMem::Shared(s) => Err(HostMem::Shared(s)),
        }
    }

    /// Sets every element to zero (after any copy still writing it).
    pub(crate) fn fill_default(&mut self) -> Result<(), GpuError> {
        match self {
            HostMem::Pinned(p) => p.as_mut_slice()?.fill(T::default()),
            HostMem::Plain(v) => v.fill(T::default()),
            HostMem::Shared(s) => s.as_mut_slice().fill(T::default()),
        }
        Ok(())
    }
}

/// A device buffer together with the pinned buffer it was uploaded from.
pub type Uploaded<T> = (crate::gpu_ref::GpuRef<T>, PinnedBuf<T>);

/// A host buffer of `len` elements of `T`, page-locked on a CUDA device, that returns to
/// its device's pool when dropped. Pass it by value to `Device::upload_pinned` /
/// `Device::download_pinned`; they hand it back once the copy is done.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// let mut staging = dev.pinned::<f32>(4).await?; // page-locked, from the device's pool
/// staging.as_mut_slice()?.copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
/// let (x, staging) = dev.upload_pinned(staging).await?; // one DMA; the buffer comes back
/// dev.scal(10.0, &x).await?;
/// let staging = dev.download_pinned(&x, staging).await?;
/// assert_eq!(staging.as_slice()?, &[10.0, 20.0, 30.0, 40.0]);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct PinnedBuf<T: DTypeBase> {
    mem: Option<HostMem<T>>,
    /// Where it goes when dropped (`None` for an isolated device's: its range returns
    /// to the device's pinned arena with its last holder).
    pool: Option<Arc<PinnedPool>>,
}

/// Pinned buffers are not journalled: a replay stops at one with `Unsupported`.
fn not_journalled() -> GpuError {
    GpuError::Unsupported("pinned host buffers are not journalled".into())
}

/// An isolated device's pinned buffer crosses as its range of the device's shared
/// arena (the request holds the range until the reply hands it back); any other pinned
/// buffer is refused by an isolated device.
impl<T: DTypeBase> Wire for PinnedBuf<T> {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        let shared = match (self.mem(), w.side) {
            (_, Side::Journal(_)) => return Err(not_journalled()),
            (HostMem::Shared(s), Side::Client(c)) if c.pinned.owns(s.range()) => {
                w.keep.push(Box::new(s.range().clone()));
                s
            }
            (HostMem::Shared(s), Side::Worker(_)) => s,
            (_, Side::Client(c)) => {
                return Err(GpuError::invalid(format!(
                    "a pinned buffer of another device, not of isolated device {}: take it from this device \
                     (Device::pinned)",
                    c.device_id
                )))
            }
            (_, Side::Worker(_)) => {
                return Err(GpuError::Internal(
                    "a worker's own pinned buffer cannot cross to the user process".into(),
                ))
            }
        };
        let (offset, bytes) = shared.range().place();
        w.put_u64(offset as u64);
        w.put_u64(bytes as u64);
        w.put_u64(shared.len() as u64);
        Ok(())
    }

    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        let (offset, bytes, len) = (r.take_usize()?, r.take_usize()?, r.take_usize()?);
        if len.checked_mul(std::mem::size_of::<T>()).is_none_or(|b| b > bytes) {
            return Err(GpuError::invalid(format!(
                "a pinned buffer of {len} {} elements in a range of {bytes} bytes",
                T::NAME
            )));
        }
        match r.side {
            Side::Client(c) => Ok(PinnedBuf::shared(SharedHost::new(c.pinned.find(offset, bytes)?, len))),
            Side::Worker(wc) => Ok(PinnedBuf::shared(SharedHost::new(
                SharedRange::in_worker(&wc.pinned, offset, bytes)?,
                len,
            ))),
            Side::Journal(_) => Err(not_journalled()),
        }
    }
}

impl<T: DTypeBase> std::fmt::Debug for PinnedBuf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedBuf<{}>(len {})", T::NAME, self.len())
    }
}

impl<T: DTypeBase> PinnedBuf<T> {
    pub(crate) fn new(mem: HostMem<T>, pool: Arc<PinnedPool>) -> Self {
        PinnedBuf {
            mem: Some(mem),
            pool: Some(pool),
        }
    }

    /// An isolated device's buffer (or a worker's view of one).
    pub(crate) fn shared(mem: SharedHost<T>) -> Self {
        PinnedBuf {
            mem: Some(HostMem::Shared(mem)),
            pool: None,
        }
    }

    pub(crate) fn mem(&self) -> &HostMem<T> {
        self.mem.as_ref().expect("present until drop")
    }

    pub(crate) fn mem_mut(&mut self) -> &mut HostMem<T> {
        self.mem.as_mut().expect("present until drop")
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.mem().len()
    }

    /// True for a zero-length buffer (never handed out).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The contents, after any copy still writing into the buffer has finished.
    pub fn as_slice(&self) -> Result<&[T], GpuError> {
        match self.mem() {
            HostMem::Pinned(p) => Ok(p.as_slice()?),
            HostMem::Plain(v) => Ok(v),
            // Back from its last request: its copy is done.
            HostMem::Shared(s) => Ok(s.as_slice()),
        }
    }

    /// The contents for writing, after any copy still using the buffer has finished.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T], GpuError> {
        match self.mem_mut() {
            HostMem::Pinned(p) => Ok(p.as_mut_slice()?),
            HostMem::Plain(v) => Ok(v),
            HostMem::Shared(s) => Ok(s.as_mut_slice()),
        }
    }
}

impl<T: DTypeBase> Drop for PinnedBuf<T> {
    fn drop(&mut self) {
        if let (Some(mem), Some(pool)) = (self.mem.take(), &self.pool) {
            pool.give_back(mem);
        }
    }
}

/// Threads that copy one chunk between the caller's memory and a pinned buffer: one
/// thread copies ~7 GB/s on the H200 host, below the pageable copy of the driver itself
/// (10–11 GB/s device to host) and far below the DMA (55 GB/s).
pub(crate) const COPY_THREADS: usize = 4;

/// `dst.copy_from_slice(src)`, split over up to [`COPY_THREADS`] scoped threads (the
/// caller's among them) where the machine has the cores.
pub(crate) fn copy_wide<T: Copy + Send + Sync>(dst: &mut [T], src: &[T]) {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(COPY_THREADS);
    let bytes = std::mem::size_of_val(src);
    if threads < 2 || bytes < (1 << 20) {
        dst.copy_from_slice(src);
        return;
    }
    let part = src.len().div_ceil(threads);
    std::thread::scope(|s| {
        let mut pairs = dst.chunks_mut(part).zip(src.chunks(part));
        let first = pairs.next();
        for (d, s_) in pairs {
            s.spawn(move || d.copy_from_slice(s_));
        }
        if let Some((d, s_)) = first {
            d.copy_from_slice(s_);
        }
    });
}
