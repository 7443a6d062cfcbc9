//! Large copies between ordinary (pageable) host memory and a GPU buffer, staged through
//! two pinned buffers of the device's pool.
//!
//! Why: the CUDA driver stages a pageable copy itself, through small buffers, one after
//! the other (7–13 GB/s on the H200, `benches/copies.rs`). An upload, write or download
//! of an owned `Vec` (and an isolated device's, from its shared arena) is served here
//! instead: 8 MiB chunks alternate between two pinned buffers, the host copy of one chunk
//! (split over a few threads, `host::copy_wide`) overlapping the DMA of the other.

use cudarc::driver::{CudaStream, CudaView, CudaViewMut};

use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::host::{copy_wide, HostMem, PinnedBuf};

/// Bytes per chunk (as `Device::write_slice` stages).
const CHUNK_BYTES: usize = 8 << 20;

/// Elements of `T` per chunk.
pub(crate) fn chunk_len<T>() -> usize {
    (CHUNK_BYTES / std::mem::size_of::<T>().max(1)).max(1)
}

/// Whether a copy of `len` elements is staged (two chunks or more; below that the
/// driver's own copy costs no more).
pub(crate) fn stages<T>(len: usize) -> bool {
    len >= 2 * chunk_len::<T>()
}

/// The pinned memory of a staging buffer (a CUDA device's pool holds only pinned ones).
fn pinned<T: DTypeBase>(b: &mut PinnedBuf<T>) -> Result<&mut crate::sys::pinned::PinnedMem<T>, GpuError> {
    match b.mem_mut() {
        HostMem::Pinned(p) => Ok(p),
        HostMem::Plain(_) | HostMem::Shared(_) => Err(GpuError::Internal(
            "a staging buffer not of the CUDA device's own pinned memory".into(),
        )),
    }
}

/// Enqueues the copy of `data` into `dst` (same length) on `stream`, chunk by chunk
/// through the two pinned buffers `bufs` (a chunk each); returns once the last chunk is
/// enqueued (each buffer waits for its last copy before anyone writes it again).
pub(crate) fn htod<T: DTypeBase>(
    bufs: &mut [PinnedBuf<T>; 2],
    stream: &CudaStream,
    data: &[T],
    dst: &mut CudaViewMut<'_, T>,
) -> Result<(), GpuError> {
    let chunk = chunk_len::<T>();
    for (i, part) in data.chunks(chunk).enumerate() {
        let p = pinned(&mut bufs[i % 2])?;
        // Waits for this buffer's previous chunk to have left before overwriting it.
        copy_wide(&mut p.as_mut_slice()?[..part.len()], part);
        let mut range = dst.slice_mut(i * chunk..i * chunk + part.len());
        p.copy_to_device(stream, &mut range)?;
    }
    Ok(())
}

/// Copies `src` into a new `Vec`, chunk by chunk through the two pinned buffers `bufs`:
/// the DMA of one chunk overlaps the host copy of the one before; returns when all is
/// copied.
pub(crate) fn dtoh<T: DTypeBase>(
    bufs: &mut [PinnedBuf<T>; 2],
    stream: &CudaStream,
    src: &CudaView<'_, T>,
) -> Result<Vec<T>, GpuError> {
    let (n, chunk) = (src.len(), chunk_len::<T>());
    let chunks = n.div_ceil(chunk);
    let range = |i: usize| i * chunk..(i * chunk + chunk).min(n);
    for (i, b) in bufs.iter_mut().enumerate().take(chunks) {
        pinned(b)?.copy_from_device(stream, &src.slice(range(i)))?;
    }
    let mut out = vec![T::default(); n];
    for i in 0..chunks {
        let p = pinned(&mut bufs[i % 2])?;
        // Waits for chunk i to have arrived.
        copy_wide(&mut out[range(i)], &p.as_slice()?[..range(i).len()]);
        if i + 2 < chunks {
            p.copy_from_device(stream, &src.slice(range(i + 2)))?;
        }
    }
    Ok(out)
}
