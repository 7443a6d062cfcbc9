//! A locked buffer, and the uses on one stream not yet recorded in its cudarc events.
//!
//! Why: cudarc orders every use of a slice with events — the stream waits for the last
//! writer (and, to write, the last reader) and records an event per use: ~1.9 µs of a
//! small launch's host time on the H200 (`benches/actors.rs`, "raw launch, untracked").
//! A launch on the stream that last used the buffer needs none of it: stream order
//! already covers that. So such a launch takes the buffer's address directly and notes
//! the use; the first use from anywhere else — another stream, a copy, a library call,
//! the host, the buffer's drop — first records the noted uses on that stream, so the
//! events then cover everything enqueued there so far (a little more than the buffer's
//! uses, never less).

use std::ops::Range;
use std::sync::{Arc, MutexGuard};

use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, SyncOnDrop};

use super::{GpuRef, Storage};
use crate::dtype::DTypeBase;
use crate::error::GpuError;

/// A buffer's storage and its unrecorded uses (behind the buffer's lock).
pub(crate) struct Held<T> {
    pub(super) storage: Storage<T>,
    unrecorded: Option<Unrecorded>,
}

/// The stream whose launch last took the buffer through cudarc's tracking, and whether
/// launches there have used it since without (a write among them?).
struct Unrecorded {
    stream: Arc<CudaStream>,
    address: u64,
    used: bool,
    wrote: bool,
}

impl<T> Held<T> {
    pub(super) fn new(storage: Storage<T>) -> Self {
        Held {
            storage,
            unrecorded: None,
        }
    }

    /// Records the unrecorded uses in the slice's events, on their stream.
    pub(super) fn record(&mut self) {
        let (Some(u), Storage::Cuda(s)) = (self.unrecorded.take(), &mut self.storage) else {
            return;
        };
        record_on(s, &u);
    }
}

/// Records `u`'s uses of `s` on `u.stream` (a write, or a read): taking the pointer for
/// the stream queues waits on the slice's own events — recorded on that stream or
/// earlier, so they cost a driver call and hold nothing — and the guard records the use.
fn record_on<T>(s: &mut CudaSlice<T>, u: &Unrecorded) {
    if !u.used {
        return;
    }
    if u.wrote {
        drop(s.device_ptr_mut(&u.stream));
    } else {
        drop(s.device_ptr(&u.stream));
    }
}

/// A locked buffer, as one handle sees it: its window of the storage.
///
/// Why no `Deref` to the storage: a handle may be a view, and every access must see
/// only its window — `region`/`region_mut` give it, so no operation can touch the
/// whole buffer by accident.
pub(crate) struct Locked<'a, T> {
    pub(super) held: MutexGuard<'a, Held<T>>,
    /// The handle's elements in the buffer.
    pub(super) window: Range<usize>,
}

/// A handle's elements, to read: host memory of the CPU device, or a cudarc view of
/// device memory (ordered by the buffer's events, like the whole slice).
pub(crate) enum Region<'a, T> {
    Cpu(&'a [T]),
    Cuda(CudaView<'a, T>),
}

/// A handle's elements, to write.
pub(crate) enum RegionMut<'a, T> {
    Cpu(&'a mut [T]),
    Cuda(CudaViewMut<'a, T>),
}

impl<'a, T> Region<'a, T> {
    /// The elements in host memory, to read (as [`RegionMut::into_host`]).
    pub(crate) fn into_host(self) -> Result<&'a [T], GpuError> {
        match self {
            Region::Cpu(v) => Ok(v),
            Region::Cuda(_) => Err(GpuError::invalid("a GPU buffer in a CPU device's routine")),
        }
    }
}

impl<'a, T> RegionMut<'a, T> {
    /// The region cut in two at `mid` (both halves writable, borrowing this one).
    pub(crate) fn split_at(&mut self, mid: usize) -> (RegionMut<'_, T>, RegionMut<'_, T>) {
        match self {
            RegionMut::Cpu(v) => {
                let (a, b) = v.split_at_mut(mid);
                (RegionMut::Cpu(a), RegionMut::Cpu(b))
            }
            RegionMut::Cuda(v) => {
                let (a, b) = v.split_at_mut(mid);
                (RegionMut::Cuda(a), RegionMut::Cuda(b))
            }
        }
    }

    /// The elements in host memory: what a CPU-device library routine works on; a GPU
    /// buffer is an `InvalidArgument`.
    pub(crate) fn into_host(self) -> Result<&'a mut [T], GpuError> {
        match self {
            RegionMut::Cpu(v) => Ok(v),
            RegionMut::Cuda(_) => Err(GpuError::invalid("a GPU buffer in a CPU device's routine")),
        }
    }

    /// The elements in device memory: what a CUDA library routine works on; a CPU-device
    /// buffer is an `InvalidArgument`.
    pub(crate) fn into_cuda(self) -> Result<CudaViewMut<'a, T>, GpuError> {
        match self {
            RegionMut::Cuda(v) => Ok(v),
            RegionMut::Cpu(_) => Err(GpuError::invalid("a buffer of another backend")),
        }
    }
}

impl<T> Locked<'_, T> {
    /// Records the uses on one stream not yet in the slice's events: before any access
    /// other than a launch's (`GpuRef::lock` does it).
    pub(crate) fn record(&mut self) {
        self.held.record();
    }

    /// The handle's elements, to read.
    pub(crate) fn region(&self) -> Region<'_, T> {
        self.region_at(self.window.clone())
    }

    /// Another handle's elements, `other` a window of this same buffer (an operation
    /// that takes two views of one buffer locks it once).
    pub(crate) fn region_of(&self, other: &GpuRef<T>) -> Region<'_, T>
    where
        T: DTypeBase,
    {
        self.region_at(other.window())
    }

    fn region_at(&self, w: Range<usize>) -> Region<'_, T> {
        match &self.held.storage {
            Storage::Cpu(v) => Region::Cpu(&v[w]),
            Storage::Cuda(s) => Region::Cuda(s.slice(w)),
        }
    }

    /// The handle's elements in host memory, to read: what a CPU-device library routine
    /// works on; a GPU buffer is an `InvalidArgument`.
    pub(crate) fn host(&self) -> Result<&[T], GpuError> {
        match self.region() {
            Region::Cpu(v) => Ok(v),
            Region::Cuda(_) => Err(GpuError::invalid("a GPU buffer in a CPU device's routine")),
        }
    }

    /// The handle's elements in host memory, to write (as [`Locked::host`]).
    pub(crate) fn host_mut(&mut self) -> Result<&mut [T], GpuError> {
        match self.region_mut() {
            RegionMut::Cpu(v) => Ok(v),
            RegionMut::Cuda(_) => Err(GpuError::invalid("a GPU buffer in a CPU device's routine")),
        }
    }

    /// The handle's elements, to write.
    pub(crate) fn region_mut(&mut self) -> RegionMut<'_, T> {
        let w = self.window.clone();
        self.region_mut_at(w)
    }

    pub(super) fn region_mut_at(&mut self, w: Range<usize>) -> RegionMut<'_, T> {
        match &mut self.held.storage {
            Storage::Cpu(v) => RegionMut::Cpu(&mut v[w]),
            Storage::Cuda(s) => RegionMut::Cuda(s.slice_mut(w)),
        }
    }

    /// Another handle's elements, to write (`other` a window of this same buffer).
    pub(crate) fn region_mut_of(&mut self, other: &GpuRef<T>) -> RegionMut<'_, T>
    where
        T: DTypeBase,
    {
        self.region_mut_at(other.window())
    }

    /// Runs `f` on the handle's elements to write and on the `inputs` given — windows
    /// of this same buffer that do not overlap it — to read (`None` in, `None` out):
    /// what one operation needs when its output and some inputs are views of one
    /// buffer. An input overlapping the output is an `InvalidArgument`. (A callback, as
    /// the views borrow the split parts.)
    pub(crate) fn split<const N: usize, R>(
        &mut self,
        inputs: [Option<Range<usize>>; N],
        f: impl FnOnce(RegionMut<'_, T>, [Option<Region<'_, T>>; N]) -> R,
    ) -> Result<R, GpuError> {
        let w = self.window.clone();
        if let Some(bad) = inputs.iter().flatten().find(|r| r.start < w.end && w.start < r.end) {
            return Err(GpuError::InvalidArgument(
                crate::error::Invalid::new(format!(
                    "an input (elements {bad:?} of the buffer) overlaps the output (elements {w:?}): pass \
                     disjoint views, or copy the input first"
                ))
                .mismatch("an output disjoint from its inputs", "overlapping views of one buffer"),
            ));
        }
        // Disjoint from the window, each input lies wholly before or wholly after it.
        let (start, end) = (w.start, w.end);
        let place = move |r: Range<usize>| {
            if r.end <= start {
                (true, r)
            } else {
                (false, r.start - end..r.end - end)
            }
        };
        Ok(match &mut self.held.storage {
            Storage::Cpu(v) => {
                let (before, rest) = v.split_at_mut(start);
                let (out, after) = rest.split_at_mut(end - start);
                let (before, after): (&[T], &[T]) = (before, after);
                let parts = inputs.map(|r| {
                    r.map(|r| match place(r) {
                        (true, r) => Region::Cpu(&before[r]),
                        (false, r) => Region::Cpu(&after[r]),
                    })
                });
                f(RegionMut::Cpu(out), parts)
            }
            Storage::Cuda(s) => {
                let (before, mut rest) = s.split_at_mut(start);
                let (out, after) = rest.split_at_mut(end - start);
                let parts = inputs.map(|r| {
                    r.map(|r| match place(r) {
                        (true, r) => Region::Cuda(before.slice(r)),
                        (false, r) => Region::Cuda(after.slice(r)),
                    })
                });
                f(RegionMut::Cuda(out), parts)
            }
        })
    }

    /// The byte offset of the window in the buffer.
    pub(crate) fn byte_offset(&self) -> u64 {
        (self.window.start * std::mem::size_of::<T>()) as u64
    }

    /// The window's device address, ordered for a use on `stream` (it waits for the
    /// buffer's last writer, and for a write its readers too); the guard records the use
    /// when dropped, after the work is enqueued.
    pub(crate) fn address<'b>(
        &'b mut self,
        stream: &'b CudaStream,
        writes: bool,
    ) -> Result<(u64, SyncOnDrop<'b>), GpuError> {
        let offset = self.byte_offset();
        let (base, guard) = self.buffer_address(stream, writes)?;
        Ok((base + offset, guard))
    }

    /// As [`Locked::address`], the address of the whole buffer (what a graph resolves
    /// once per buffer, adding each view's offset itself).
    pub(crate) fn buffer_address<'b>(
        &'b mut self,
        stream: &'b CudaStream,
        writes: bool,
    ) -> Result<(u64, SyncOnDrop<'b>), GpuError> {
        self.held.record();
        let Storage::Cuda(s) = &mut self.held.storage else {
            return Err(GpuError::invalid("a CPU-device buffer on a CUDA stream"));
        };
        Ok(if writes {
            s.device_ptr_mut(stream)
        } else {
            s.device_ptr(stream)
        })
    }

    /// Elements `w` of a CPU-device buffer (the window of one of its handles) as a raw
    /// pointer and length: an emulated launch hands kernels raw buffers, several
    /// windows of one buffer when it takes several views of it.
    pub(crate) fn host_raw_at(&mut self, w: Range<usize>) -> Option<(*mut T, usize)> {
        match &mut self.held.storage {
            Storage::Cpu(v) => {
                assert!(w.start <= w.end && w.end <= v.len(), "a window within the buffer");
                // `Vec::as_mut_ptr` makes no reference to the elements, so the pointers of
                // several windows of one buffer stay valid side by side (within the
                // allocation, as checked: the offset never wraps).
                Some((v.as_mut_ptr().wrapping_add(w.start), w.len()))
            }
            Storage::Cuda(_) => None,
        }
    }

    /// The window's address for a launch on `stream`, `writes` or reads it. On the stream
    /// of its last launch: the address, the use noted (no driver call). Elsewhere: the
    /// noted uses recorded first, then cudarc's ordering — `stream` waits for the last
    /// writer (and readers) — and the guard to drop after the launch, which records it.
    pub(crate) fn launch_address<'b>(
        &'b mut self,
        stream: &'b Arc<CudaStream>,
        writes: bool,
    ) -> Result<(u64, Option<SyncOnDrop<'b>>), GpuError> {
        let offset = self.byte_offset();
        let Held { storage, unrecorded } = &mut *self.held;
        let Storage::Cuda(s) = storage else {
            return Err(GpuError::invalid("a CPU-device buffer in a CUDA launch"));
        };
        if let Some(u) = unrecorded.as_mut().filter(|u| Arc::ptr_eq(&u.stream, stream)) {
            u.used = true;
            u.wrote |= writes;
            return Ok((u.address + offset, None));
        }
        if let Some(u) = unrecorded.take() {
            record_on(s, &u);
        }
        let (address, guard) = if writes {
            s.device_ptr_mut(stream)
        } else {
            s.device_ptr(stream)
        };
        *unrecorded = Some(Unrecorded {
            stream: stream.clone(),
            address,
            used: false,
            wrote: false,
        });
        Ok((address + offset, Some(guard)))
    }
}
