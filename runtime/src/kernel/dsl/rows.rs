//! `Rows<B>`: a buffer seen as a row-major matrix with a row stride, indexed `m[(r, c)]`.
//!
//! Kernels over matrices (transposes, stencils, tiled GEMMs) compute `r * ld + c` by hand
//! in CUDA; `let m = x.rows(ld)` says it once, and `m[(r, c)]` reads or writes element
//! `c` of row `r` — a panel of a larger matrix is a view with the parent's stride. In
//! generated CUDA it is the buffer's pointer and the stride; the CPU emulation also
//! checks `c < ld`, so a column past the row's end is a fault, not the next row's element.

use std::ops::{Index, IndexMut};

use super::index::KernelIndex;
use super::slices::{GlobalSlice, GlobalSliceMut};

/// A buffer as rows of `ld` elements (`x.rows(ld)` on a kernel buffer).
#[derive(Debug, Clone, Copy)]
pub struct Rows<B> {
    buf: B,
    ld: usize,
}

impl<B> Rows<B> {
    /// The row stride, in elements.
    pub fn stride(&self) -> usize {
        self.ld
    }

    #[track_caller]
    fn offset(&self, r: impl KernelIndex, c: impl KernelIndex) -> usize {
        match (r.offset(), c.offset()) {
            (Some(r), Some(c)) if c < self.ld => r.saturating_mul(self.ld).saturating_add(c),
            (r, c) => panic!(
                "element ({r:?}, {c:?}) is outside a 2-D view with row stride {} (negative, or a column past the row's end)",
                self.ld
            ),
        }
    }
}

/// `rows` on each buffer handle.
macro_rules! rows {
    ($($ty:ident),*) => {$(
        impl<T> $ty<T> {
            /// This buffer as rows of `ld` elements: `m[(r, c)]` is element `r * ld + c`.
            #[track_caller]
            pub fn rows(self, ld: impl KernelIndex) -> Rows<$ty<T>> {
                match ld.offset() {
                    Some(ld) if ld > 0 => Rows { buf: self, ld },
                    _ => panic!("a 2-D view needs a positive row stride"),
                }
            }
        }
        impl<T> Rows<$ty<T>> {
            /// The number of elements of the underlying buffer.
            pub fn len(&self) -> usize {
                self.buf.len()
            }
            /// True if the underlying buffer has no elements.
            pub fn is_empty(&self) -> bool {
                self.buf.is_empty()
            }
        }
        impl<T: Copy> Rows<$ty<T>> {
            /// Element `(r, c)`, read as a relaxed atomic access: what `m[(r, c)]` in a
            /// kernel's CPU body becomes.
            #[doc(hidden)]
            #[track_caller]
            pub fn __load(&self, (r, c): (impl KernelIndex, impl KernelIndex)) -> T {
                self.buf.__load(self.offset(r, c))
            }
        }
        impl<T, I: KernelIndex, J: KernelIndex> Index<(I, J)> for Rows<$ty<T>> {
            type Output = T;
            #[track_caller]
            fn index(&self, (r, c): (I, J)) -> &T {
                &self.buf[self.offset(r, c)]
            }
        }
    )*};
}

rows!(GlobalSlice, GlobalSliceMut);

impl<T, I: KernelIndex, J: KernelIndex> IndexMut<(I, J)> for Rows<GlobalSliceMut<T>> {
    #[track_caller]
    fn index_mut(&mut self, (r, c): (I, J)) -> &mut T {
        let k = self.offset(r, c);
        &mut self.buf[k]
    }
}

impl<T: Copy> Rows<GlobalSliceMut<T>> {
    /// Writes element `(r, c)` as a relaxed atomic access: what `m[(r, c)] = v` in a
    /// kernel's CPU body becomes.
    #[doc(hidden)]
    #[track_caller]
    pub fn __store(&self, (r, c): (impl KernelIndex, impl KernelIndex), v: T) {
        self.buf.__store(self.offset(r, c), v)
    }
}
