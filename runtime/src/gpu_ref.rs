//! `GpuRef<T>`: a typed, generation-checked handle to a device buffer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::CudaSlice;

mod host_elems;
mod locked;
mod operands;
mod parts;

pub(crate) use host_elems::HostElems;

use locked::Held;
pub(crate) use locked::{Locked, Region, RegionMut};
pub(crate) use operands::{lock2, lock4, lock5, with_inputs, with_operands, with_span};
pub(crate) use parts::{check_apart, with_parts, with_parts_and};

use crate::dtype::DTypeBase;
use crate::error::GpuError;

static NEXT_BUFFER: AtomicU64 = AtomicU64::new(1);

/// What frees a worker's buffer — or event, or graph — when the user process drops its
/// last handle to it: the link to that worker (in the device tier, which this floor does
/// not name).
pub(crate) trait BufferOwner: Send + Sync {
    /// The user process holds no handle to buffer `id` any more.
    fn free(&self, id: u64);
    /// The user process holds no handle to event `id` any more.
    fn free_event(&self, id: u64);
    /// The user process holds no handle to graph `id` any more.
    fn free_graph(&self, id: u64);
}

/// The user-process side of an isolated device's buffer: its id in the worker. Dropping
/// it (with the last `GpuRef` clone) frees the worker's buffer.
pub(crate) struct RemoteBuf {
    pub(crate) id: u64,
    pub(crate) instance: u64,
    pub(crate) link: std::sync::Weak<dyn BufferOwner>,
}

impl Drop for RemoteBuf {
    fn drop(&mut self) {
        if let Some(link) = self.link.upgrade() {
            link.free(self.id);
        }
    }
}

/// Where a buffer's elements live.
pub(crate) enum Storage<T> {
    /// Host memory of the CPU device (its own, or borrowed from a foreign owner).
    Cpu(HostElems<T>),
    /// Device memory. Stream ordering comes with it: cudarc records the last writer's
    /// event on the slice and makes later users on other streams wait on it, and frees it
    /// stream-ordered after pending work when dropped.
    Cuda(CudaSlice<T>),
}

pub(crate) struct Buffer<T> {
    id: u64,
    device_id: usize,
    generation: u64,
    len: usize,
    storage: Mutex<Held<T>>,
    /// Returns the bytes to the CPU device's budget when the buffer goes.
    on_drop: Option<Box<dyn Fn(u64) + Send + Sync>>,
    /// Managed (unified) memory: host-addressable, freed with `cuMemFree`.
    managed: bool,
    /// A buffer of an isolated device: the memory is in the worker process, this is its
    /// id there (the `Storage` is empty).
    remote: Option<RemoteBuf>,
    /// Memory another library allocated (a cudarc program, PyTorch through DLPack, a raw
    /// pointer): what keeps it alive while the buffer lives, released only after the
    /// GPU work on the buffer has finished. The storage then never frees the memory.
    foreign: Option<Foreign>,
}

/// The owner of memory a buffer borrows: dropped (which may free the memory — a DLPack
/// deleter, a cudarc `CudaSlice`, a release callback) once the buffer is gone and its
/// last use has completed.
pub(crate) type Foreign = Box<dyn std::any::Any + Send + Sync>;

impl<T> Drop for Buffer<T> {
    fn drop(&mut self) {
        if let Some(f) = &self.on_drop {
            f((self.len * std::mem::size_of::<T>()) as u64);
        }
        let held = self.storage.get_mut().unwrap_or_else(|p| p.into_inner());
        // cudarc frees the slice after the uses its events know of: all of them, then.
        held.record();
        if self.managed {
            if let Storage::Cuda(s) = std::mem::replace(&mut held.storage, Storage::Cpu(HostElems::empty())) {
                if let Err(e) = crate::sys::managed::free_managed(s) {
                    tracing::warn!(error = %e, "could not free managed memory");
                }
            }
        }
        if let Some(owner) = self.foreign.take() {
            if let Storage::Cuda(s) = std::mem::replace(&mut held.storage, Storage::Cpu(HostElems::empty())) {
                // `leak` orders the slice's stream after the buffer's last readers and
                // writers without freeing: the memory is the owner's to free, once that
                // work is done.
                let stream = s.stream().clone();
                s.leak();
                if let Err(e) = stream.synchronize() {
                    tracing::warn!(error = %e, "could not wait for the work on a borrowed buffer; its owner is kept");
                    std::mem::forget(owner);
                    return;
                }
            }
            drop(owner);
        }
    }
}

/// A handle to `len` elements of `T` on one device, valid for one generation of that
/// device's context.
///
/// Cheap to clone and to put in messages. Every use checks that the buffer belongs to
/// the device it is used on and to that device's current generation, so a handle from
/// before a context rebuild fails with `Stale` instead of touching freed memory.
/// Dropping the last clone frees the memory (after the work that uses it).
///
/// A handle may be a *view*: a window of `len` elements starting at element `start` of
/// its buffer ([`GpuRef::view`]). A view is a `GpuRef` like any other — every operation
/// takes it and sees only its window — and shares the buffer's generation check, stream
/// ordering and lifetime (it keeps the buffer alive). Making one copies nothing.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// let x = dev.upload((0..10).map(|i| i as f32).collect::<Vec<_>>()).await?;
/// let tail = x.view(6..)?; // a window of the same buffer, no copy
/// assert_eq!(dev.download(&tail).await?, vec![6.0, 7.0, 8.0, 9.0]);
/// let [first, second] = x.panels([3, 3])?; // consecutive operands cut from one buffer
/// dev.scal(2.0, &second).await?;
/// assert_eq!(dev.download(&first).await?, vec![0.0, 1.0, 2.0]);
/// assert_eq!(dev.download(&second).await?, vec![6.0, 8.0, 10.0]);
/// assert!(!first.overlaps(&second) && tail.same_buffer(&x));
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct GpuRef<T: DTypeBase> {
    buf: Arc<Buffer<T>>,
    /// First element of the window, in the buffer.
    start: usize,
    /// Elements in the window.
    len: usize,
}

impl<T: DTypeBase> Clone for GpuRef<T> {
    fn clone(&self) -> Self {
        GpuRef {
            buf: self.buf.clone(),
            start: self.start,
            len: self.len,
        }
    }
}

impl<T: DTypeBase> std::fmt::Debug for GpuRef<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuRef<{}>(#{} ", T::NAME, self.buf.id)?;
        if self.is_view() {
            write!(f, "[{}..{}] of {} ", self.start, self.start + self.len, self.buf.len)?;
        } else {
            write!(f, "len {} ", self.len)?;
        }
        write!(f, "on device {} gen {})", self.buf.device_id, self.buf.generation)
    }
}

impl<T: DTypeBase> GpuRef<T> {
    pub(crate) fn new(
        device_id: usize,
        generation: u64,
        len: usize,
        storage: Storage<T>,
        on_drop: Option<Box<dyn Fn(u64) + Send + Sync>>,
    ) -> Self {
        GpuRef {
            buf: Arc::new(Buffer {
                id: NEXT_BUFFER.fetch_add(1, Ordering::Relaxed),
                device_id,
                generation,
                len,
                storage: Mutex::new(Held::new(storage)),
                on_drop,
                managed: false,
                remote: None,
                foreign: None,
            }),
            start: 0,
            len,
        }
    }

    /// A handle to a buffer of an isolated device's worker.
    pub(crate) fn new_remote(device_id: usize, generation: u64, len: usize, remote: RemoteBuf) -> Self {
        let mut r = GpuRef::new(device_id, generation, len, Storage::Cpu(HostElems::empty()), None);
        Arc::get_mut(&mut r.buf).expect("just created").remote = Some(remote);
        r
    }

    /// A handle to memory `owner` keeps alive (`interop`): the storage borrows it and
    /// never frees it; `owner` is dropped after the buffer's last use has completed.
    pub(crate) fn new_foreign(
        device_id: usize,
        generation: u64,
        len: usize,
        storage: Storage<T>,
        owner: Foreign,
    ) -> Self {
        let mut r = GpuRef::new(device_id, generation, len, storage, None);
        Arc::get_mut(&mut r.buf).expect("just created").foreign = Some(owner);
        r
    }

    /// The owner of borrowed memory (what `interop` put there), to recognise its kind.
    pub(crate) fn foreign_owner(&self) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.buf.foreign.as_deref()
    }

    /// True for memory borrowed from another library (a cudarc slice, a DLPack tensor, a
    /// raw pointer, an IPC handle): the buffer keeps its owner alive instead of freeing it.
    pub fn is_borrowed(&self) -> bool {
        self.buf.foreign.is_some()
    }

    /// A view of elements `range` of this handle's window (so views of views compose):
    /// no copy, the same buffer, its generation check and stream ordering. Every
    /// operation that takes a `GpuRef` takes a view and touches only its elements.
    ///
    /// One operation may take several views of one buffer; it rejects only an output
    /// that overlaps another of its operands (`InvalidArgument`), as BLAS leaves that
    /// undefined. An empty range is an `InvalidArgument` (the device never hands out
    /// empty buffers, and no operation takes one).
    pub fn view(&self, range: impl std::ops::RangeBounds<usize>) -> Result<GpuRef<T>, GpuError> {
        use std::ops::Bound;
        let lo = match range.start_bound() {
            Bound::Included(&a) => Some(a),
            Bound::Excluded(&a) => a.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let hi = match range.end_bound() {
            Bound::Included(&b) => b.checked_add(1),
            Bound::Excluded(&b) => Some(b),
            Bound::Unbounded => Some(self.len),
        };
        match (lo, hi) {
            (Some(lo), Some(hi)) if lo < hi && hi <= self.len => Ok(GpuRef {
                buf: self.buf.clone(),
                start: self.start + lo,
                len: hi - lo,
            }),
            _ => {
                let show = |b: Option<usize>| b.map_or("∞".to_string(), |b| b.to_string());
                Err(GpuError::InvalidArgument(
                    crate::error::Invalid::new(format!(
                        "view {}..{} of a {}-element {}: a view takes a non-empty range within 0..{}",
                        show(lo),
                        show(hi),
                        self.len,
                        if self.is_view() { "view" } else { "buffer" },
                        self.len,
                    ))
                    .arg("range")
                    .mismatch(
                        format_args!("a non-empty range within 0..{}", self.len),
                        "a range outside it",
                    ),
                ))
            }
        }
    }

    /// Columns `cols` of a column-major matrix with `rows` rows stored in this handle
    /// (leading dimension `rows`): contiguous in memory, so a plain view. For a block of
    /// rows too, take a view from its first element and pass the parent's leading
    /// dimension to the operation (`Gemm::leading`, `Gemv::leading`).
    pub fn columns(&self, rows: usize, cols: std::ops::Range<usize>) -> Result<GpuRef<T>, GpuError> {
        if rows == 0 || self.len % rows != 0 {
            return Err(GpuError::InvalidArgument(
                crate::error::Invalid::new(format!(
                    "columns of a {rows}-row matrix from {} elements: the rows must divide the length",
                    self.len
                ))
                .arg("rows"),
            ));
        }
        let (lo, hi) = (cols.start.saturating_mul(rows), cols.end.saturating_mul(rows));
        self.view(lo..hi)
    }

    /// This handle's window cut in two at `mid`: elements `..mid` and `mid..` (both
    /// non-empty, else an `InvalidArgument`), e.g. a matrix and its right-hand sides.
    pub fn split_at(&self, mid: usize) -> Result<(GpuRef<T>, GpuRef<T>), GpuError> {
        Ok((self.view(..mid)?, self.view(mid..)?))
    }

    /// Consecutive panels of `lens` elements from the start of this handle's window: a
    /// workspace carved into an operation's operands (`let [a, b] = ws.panels([n * n,
    /// n])?`), which every operation takes side by side as long as the one it writes
    /// lies apart from the others. Elements past the last panel stay unused. A zero
    /// length, or panels longer than the window, is an `InvalidArgument`.
    pub fn panels<const N: usize>(&self, lens: [usize; N]) -> Result<[GpuRef<T>; N], GpuError> {
        let total = lens.iter().try_fold(0usize, |t, &l| t.checked_add(l));
        if lens.contains(&0) || total.is_none_or(|t| t > self.len) {
            return Err(GpuError::InvalidArgument(
                crate::error::Invalid::new(format!(
                    "panels of {lens:?} elements from a {}-element window: each panel takes at least one element, \
                     and together no more than the window",
                    self.len
                ))
                .arg("lens")
                .mismatch(
                    format_args!("non-empty panels of at most {} elements in all", self.len),
                    format_args!("{lens:?}"),
                ),
            ));
        }
        let mut at = 0;
        Ok(lens.map(|l| {
            let panel = GpuRef {
                buf: self.buf.clone(),
                start: self.start + at,
                len: l,
            };
            at += l;
            panel
        }))
    }

    /// True for a view narrower than its buffer.
    pub fn is_view(&self) -> bool {
        self.len != self.buf.len
    }

    /// The first element of this handle's window in its buffer (0 unless a view).
    pub fn offset(&self) -> usize {
        self.start
    }

    /// Elements of the whole buffer this handle is a window of.
    pub fn buffer_len(&self) -> usize {
        self.buf.len
    }

    /// A handle over the whole buffer this handle is a window of.
    pub(crate) fn whole(&self) -> GpuRef<T> {
        GpuRef {
            buf: self.buf.clone(),
            start: 0,
            len: self.buf.len,
        }
    }

    /// The element range of this handle's window in its buffer.
    pub(crate) fn window(&self) -> std::ops::Range<usize> {
        self.start..self.start + self.len
    }

    /// True if both handles are windows of one buffer and share an element (handles of
    /// two element types never do: a buffer has one).
    pub fn overlaps<U: DTypeBase>(&self, other: &GpuRef<U>) -> bool {
        self.id() == other.id() && self.start < other.start + other.len && other.start < self.start + self.len
    }

    /// Whether any handle to the buffer still lives — without keeping it alive (what a
    /// replay journal holds for each buffer it names, to note when it goes).
    pub(crate) fn liveness(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let weak = Arc::downgrade(&self.buf);
        move || weak.strong_count() > 0
    }

    /// The worker-side identity of an isolated device's buffer.
    pub(crate) fn remote(&self) -> Option<&RemoteBuf> {
        self.buf.remote.as_ref()
    }

    /// A handle to managed memory from `sys::managed::alloc_managed`.
    pub(crate) fn new_managed(device_id: usize, generation: u64, len: usize, slice: CudaSlice<T>) -> Self {
        let mut r = GpuRef::new(device_id, generation, len, Storage::Cuda(slice), None);
        Arc::get_mut(&mut r.buf).expect("just created").managed = true;
        r
    }

    /// True for managed (unified) memory from `Device::alloc_managed`.
    pub fn is_managed(&self) -> bool {
        self.buf.managed
    }

    /// Runs `f` on the elements in place, from the host: a CPU-device buffer, or managed
    /// memory once the GPU work on it has finished (no copy). Other GPU buffers are an
    /// `InvalidArgument` (download them instead); any buffer of an isolated device is
    /// `Unsupported` (its memory is in the worker process). The buffer is locked meanwhile: GPU
    /// work on it waits for `f`.
    pub fn with_host<R>(&self, f: impl FnOnce(&[T]) -> R) -> Result<R, GpuError> {
        self.with_host_mut(|v| f(v))
    }

    /// As [`GpuRef::with_host`], with write access; later GPU work sees the writes.
    pub fn with_host_mut<R>(&self, f: impl FnOnce(&mut [T]) -> R) -> Result<R, GpuError> {
        if self.buf.remote.is_some() {
            // Managed memory too: it is mapped in the worker, not here.
            return Err(GpuError::Unsupported(format!(
                "host access to buffer #{} of an isolated device (its memory, managed or not, lives in the worker \
                 process): download it",
                self.buf.id
            )));
        }
        let mut guard = self.lock();
        let managed = self.buf.managed;
        match &mut guard.held.storage {
            Storage::Cpu(v) => Ok(f(&mut v[self.window()])),
            Storage::Cuda(s) if managed => {
                use cudarc::driver::DevicePtrMut;
                let stream = s.stream().clone();
                // Orders `stream` after every reader and writer of the buffer, then
                // waits for it: nothing on the GPU touches the memory after this.
                let base = {
                    let (ptr, _recorded) = s.device_ptr_mut(&stream);
                    ptr
                };
                stream.synchronize()?;
                let ptr = base + (self.start * std::mem::size_of::<T>()) as u64;
                // SAFETY: the window (within the allocation: `view` checks) of a live
                // managed allocation, quiescent (the stream ordered after all its users
                // was synchronized), and exclusive: the storage lock is held, and every
                // GPU use takes it to enqueue.
                Ok(f(unsafe { crate::sys::managed::host_view(ptr, self.len) }))
            }
            Storage::Cuda(_) => Err(GpuError::invalid(format!(
                "buffer #{} is device memory, not host-accessible: download it, or allocate with alloc_managed",
                self.buf.id
            ))),
        }
    }

    /// Number of elements (of the window, for a view).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length buffer (which the device never hands out).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device the buffer lives on.
    pub fn device_id(&self) -> usize {
        self.buf.device_id
    }

    /// The context generation the buffer was allocated in.
    pub fn generation(&self) -> u64 {
        self.buf.generation
    }

    /// A process-unique id (for traces and errors).
    pub fn id(&self) -> u64 {
        self.buf.id
    }

    /// Size in bytes (of the window, for a view).
    pub fn num_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// True if both handles name the same buffer (whatever their windows).
    pub fn same_buffer(&self, other: &GpuRef<T>) -> bool {
        Arc::ptr_eq(&self.buf, &other.buf)
    }

    /// Checks the buffer against the device it is about to be used on.
    pub(crate) fn validate(&self, device_id: usize, generation: u64) -> Result<(), GpuError> {
        if self.buf.remote.is_some() {
            return Err(GpuError::invalid(format!(
                "buffer #{} belongs to an isolated device (its memory is in a worker process), not to in-process device {device_id}",
                self.buf.id
            )));
        }
        if self.buf.device_id != device_id {
            return Err(GpuError::InvalidArgument(
                crate::error::Invalid::new(format!(
                    "buffer #{} lives on device {}, not on device {device_id}: copy it across first",
                    self.buf.id, self.buf.device_id
                ))
                .mismatch(
                    format_args!("a buffer of device {device_id}"),
                    format_args!("a buffer of device {}", self.buf.device_id),
                ),
            ));
        }
        if self.buf.generation != generation {
            return Err(GpuError::Stale {
                buffer_generation: self.buf.generation,
                device_generation: generation,
            });
        }
        Ok(())
    }

    /// Locks the storage (held only while enqueueing, or for a CPU op), its cudarc
    /// events current: uses by launches not yet recorded are recorded first
    /// (`gpu_ref::locked`).
    pub(crate) fn lock(&self) -> Locked<'_, T> {
        let mut l = self.lock_for_launch();
        l.record();
        l
    }

    /// Locks the storage for a launch, which orders the buffer itself
    /// ([`Locked::launch_address`]).
    pub(crate) fn lock_for_launch(&self) -> Locked<'_, T> {
        Locked {
            held: self.buf.storage.lock().unwrap_or_else(|p| p.into_inner()),
            window: self.window(),
        }
    }
}
