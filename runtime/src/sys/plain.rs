//! `PlainMem<T>`: the CPU device's stand-in for page-locked memory — ordinary memory,
//! allocated so that the pinned pool can hand one buffer to another element type. In
//! `sys/` beside `PinnedMem`, its page-locked twin, because viewing memory as another
//! type is `unsafe`, and `unsafe` lives here.
//!
//! The pool keeps free buffers by size in bytes for the element types whose every bit
//! pattern is a value (`DTypeBase::EVERY_BIT_PATTERN`): a staging buffer freed by an
//! `f32` copy serves the next `f64` one, as page-locked memory does on a GPU
//! (`sys::pinned::PinnedMem::recast`). A `Vec<T>` cannot change its element type (it
//! must be freed with the layout it was allocated with), so the memory is a vector of
//! 64-byte-aligned lines, viewed as `len` elements of whatever type holds it now.

use std::marker::PhantomData;

use cudarc::driver::ValidAsZeroBits;

/// The alignment every element type of the pool fits in (a cache line).
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

/// `len` elements of `T` in ordinary, 64-byte-aligned memory.
pub(crate) struct PlainMem<T> {
    lines: Vec<Line>,
    len: usize,
    _elements: PhantomData<T>,
}

impl<T: ValidAsZeroBits> PlainMem<T> {
    /// `len` elements, zeroed.
    pub(crate) fn zeroed(len: usize) -> Self {
        assert!(
            std::mem::align_of::<T>() <= std::mem::align_of::<Line>(),
            "an element type aligned beyond 64 bytes"
        );
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .expect("a host buffer's size overflows");
        PlainMem {
            lines: vec![Line([0; 64]); bytes.div_ceil(64)],
            len,
            _elements: PhantomData,
        }
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The same memory as elements of `U`, if its bytes are a whole number of them; the
    /// memory unchanged (the pool calls this only for types of which every bit pattern
    /// is a value, so whatever the last user left reads as valid `U`s).
    pub(crate) fn recast<U: ValidAsZeroBits>(self) -> Result<PlainMem<U>, Self> {
        let bytes = self.len * std::mem::size_of::<T>();
        let size = std::mem::size_of::<U>();
        if size == 0 || bytes % size != 0 || std::mem::align_of::<U>() > std::mem::align_of::<Line>() {
            return Err(self);
        }
        Ok(PlainMem {
            lines: self.lines,
            len: bytes / size,
            _elements: PhantomData,
        })
    }
}

impl<T> std::ops::Deref for PlainMem<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `lines` holds at least len·size_of::<T>() bytes, aligned to 64 (at
        // least T's alignment, asserted), initialised: zeroed at allocation (a valid `T`:
        // `ValidAsZeroBits`) and since written only as whole values of this type or, in
        // an earlier life, of a type every bit pattern of which this one reads as a
        // value (`recast`'s contract).
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr() as *const T, self.len) }
    }
}

impl<T> std::ops::DerefMut for PlainMem<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr() as *mut T, self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::PlainMem;

    #[test]
    fn recast_keeps_the_bytes_and_refuses_a_partial_element() {
        let mut m = PlainMem::<f32>::zeroed(6);
        m.copy_from_slice(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let d = m.recast::<f64>().ok().expect("24 bytes are three f64s");
        assert_eq!(d.len(), 3);
        let back = d.recast::<f32>().ok().expect("and six f32s");
        assert_eq!(&back[..], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let odd = PlainMem::<u8>::zeroed(7);
        assert!(odd.recast::<u32>().is_err(), "7 bytes are no whole u32s");
    }
}
