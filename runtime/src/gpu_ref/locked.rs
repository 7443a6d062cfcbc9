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

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, MutexGuard};

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop};

use super::Storage;
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

/// A locked buffer: derefs to its storage.
pub(crate) struct Locked<'a, T>(pub(super) MutexGuard<'a, Held<T>>);

impl<T> Locked<'_, T> {
    /// Records the uses on one stream not yet in the slice's events: before any access
    /// other than a launch's (`GpuRef::lock` does it).
    pub(crate) fn record(&mut self) {
        self.0.record();
    }

    /// The buffer's address for a launch on `stream`, `writes` or reads it. On the stream
    /// of its last launch: the address, the use noted (no driver call). Elsewhere: the
    /// noted uses recorded first, then cudarc's ordering — `stream` waits for the last
    /// writer (and readers) — and the guard to drop after the launch, which records it.
    pub(crate) fn launch_address<'b>(
        &'b mut self,
        stream: &'b Arc<CudaStream>,
        writes: bool,
    ) -> Result<(u64, Option<SyncOnDrop<'b>>), GpuError> {
        let Held { storage, unrecorded } = &mut *self.0;
        let Storage::Cuda(s) = storage else {
            return Err(GpuError::invalid("a CPU-device buffer in a CUDA launch"));
        };
        if let Some(u) = unrecorded.as_mut().filter(|u| Arc::ptr_eq(&u.stream, stream)) {
            u.used = true;
            u.wrote |= writes;
            return Ok((u.address, None));
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
        Ok((address, Some(guard)))
    }
}

impl<T> Deref for Locked<'_, T> {
    type Target = Storage<T>;
    fn deref(&self) -> &Storage<T> {
        &self.0.storage
    }
}

impl<T> DerefMut for Locked<'_, T> {
    fn deref_mut(&mut self) -> &mut Storage<T> {
        &mut self.0.storage
    }
}
