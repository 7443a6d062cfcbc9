//! The elements of a CPU-device buffer: a `Vec` the device allocated, or host memory
//! another library owns (a NumPy array, a DLPack producer's tensor) that the buffer
//! borrows without a copy.
//!
//! Why one type: every CPU routine works on `&[T]` / `&mut [T]` windows of a buffer and
//! should not care who allocated the elements; the owner of borrowed memory is kept
//! alive by the buffer itself (`gpu_ref::Foreign`), so the slice outlives no allocation.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// A CPU-device buffer's elements.
pub(crate) enum HostElems<T> {
    /// Allocated by the CPU device (counted against its memory limit).
    Owned(Vec<T>),
    /// `len` elements at `ptr`, owned elsewhere and kept alive by the buffer's foreign
    /// owner for as long as the buffer lives.
    Borrowed { ptr: NonNull<T>, len: usize },
}

// SAFETY: `Borrowed` is a plain pointer to memory no one frees before the buffer goes (its
// owner lives in the buffer), accessed only under the buffer's lock like the `Owned` case;
// `T: Send`/`Sync` carry over exactly as for `Vec<T>`.
unsafe impl<T: Send> Send for HostElems<T> {}
// SAFETY: as above; shared access hands out `&[T]` only.
unsafe impl<T: Sync> Sync for HostElems<T> {}

impl<T> HostElems<T> {
    /// No elements (what a buffer whose memory lives elsewhere holds).
    pub(crate) fn empty() -> Self {
        HostElems::Owned(Vec::new())
    }

    /// Borrows `len` elements at `ptr`.
    ///
    /// # Safety
    /// `ptr` must be non-null, aligned for `T`, and valid for reads and writes of `len`
    /// initialised elements for as long as the returned value lives; nothing else may
    /// touch the memory meanwhile except through this value.
    pub(crate) unsafe fn borrowed(ptr: NonNull<T>, len: usize) -> Self {
        HostElems::Borrowed { ptr, len }
    }
}

impl<T> From<Vec<T>> for HostElems<T> {
    fn from(v: Vec<T>) -> Self {
        HostElems::Owned(v)
    }
}

impl<T> Deref for HostElems<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            HostElems::Owned(v) => v,
            // SAFETY: `borrowed`'s contract: valid, initialised, aligned, alive as long
            // as `self`.
            HostElems::Borrowed { ptr, len } => unsafe { std::slice::from_raw_parts(ptr.as_ptr(), *len) },
        }
    }
}

impl<T> DerefMut for HostElems<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            HostElems::Owned(v) => v,
            // SAFETY: as in `deref`; `&mut self` makes the access exclusive.
            HostElems::Borrowed { ptr, len } => unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), *len) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrowed_memory_reads_and_writes_in_place() {
        let mut backing = vec![1.0f32, 2.0, 3.0];
        let ptr = NonNull::new(backing.as_mut_ptr()).unwrap();
        {
            // SAFETY: `backing` outlives `e` and is not touched meanwhile.
            let mut e = unsafe { HostElems::borrowed(ptr, 3) };
            assert_eq!(&e[..], &[1.0, 2.0, 3.0]);
            e[1] = 20.0;
        }
        assert_eq!(backing, vec![1.0, 20.0, 3.0]);
        let owned: HostElems<u8> = vec![7u8; 2].into();
        assert_eq!(owned.len(), 2);
    }
}
