//! The memory of an isolated device's pinned buffer: a range of the device's pinned
//! arena (`wire/pinned.rs`), typed. The user process fills and reads it in place; the
//! worker copies straight from and into it.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::dtype::DTypeBase;
use crate::wire::SharedRange;

/// `len` elements of `T` in a range of a device's pinned arena.
pub(crate) struct SharedHost<T> {
    range: Arc<SharedRange>,
    len: usize,
    _elements: PhantomData<fn() -> T>,
}

impl<T: DTypeBase> SharedHost<T> {
    /// The first `len` elements of `range` (which holds at least that many bytes).
    pub(crate) fn new(range: Arc<SharedRange>, len: usize) -> Self {
        debug_assert!(len * std::mem::size_of::<T>() <= range.place().1);
        SharedHost {
            range,
            len,
            _elements: PhantomData,
        }
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The range it lies in.
    pub(crate) fn range(&self) -> &Arc<SharedRange> {
        &self.range
    }

    /// Whether this is the user process's side of the range (a worker's is a view).
    pub(crate) fn in_user_process(&self) -> bool {
        self.range.in_user_process()
    }

    /// The elements as this process maps them.
    pub(crate) fn as_slice(&self) -> &[T] {
        // SAFETY: the range starts at a page of the mapping and holds `len` elements
        // (`new`); every bit pattern is a valid dtype value. Only one side touches it at
        // a time: the user's `PinnedBuf` while it holds the range, the worker while a
        // request carrying it is in flight (the user's buffer was moved into it).
        unsafe { std::slice::from_raw_parts(self.range.ptr() as *const T, self.len) }
    }

    /// The elements for writing.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`; `&mut self` makes this the only reference in this
        // process, and the other side keeps off the range meanwhile.
        unsafe { std::slice::from_raw_parts_mut(self.range.ptr_mut() as *mut T, self.len) }
    }
}
