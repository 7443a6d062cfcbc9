//! The integer types a kernel buffer or shared array is indexed with.
//!
//! CUDA code indexes with `unsigned int` (what `threadIdx.x` is), `int` or `size_t`;
//! Rust with `usize`. A `#[kernel]` body may use any of them — the index intrinsics take
//! the integer type their use decides — so the CPU emulation's handles accept each, and a
//! negative signed index is out of bounds like one past the end.

/// An integer a kernel indexes with.
pub trait KernelIndex: Copy {
    /// The element offset, or `None` for a negative one.
    fn offset(self) -> Option<usize>;
    /// The value's bits, as `as u64` gives them.
    fn bits(self) -> u64;
}

/// The integer an index value becomes where a kernel passes it to a `#[device] fn`: the
/// parameter's type decides, as it would for a literal (the kernel cannot see the
/// helper's signature, so the generated CPU body calls this and rustc picks `Self`). The
/// conversion is `as`'s, as C++'s implicit conversion is on the GPU.
pub trait FromIndex {
    /// `i as Self`.
    fn from_index(i: impl KernelIndex) -> Self;
}

/// Implements [`KernelIndex`] and [`FromIndex`] for each type: `try_from` widens an
/// unsigned offset and refuses a negative signed one.
macro_rules! kernel_index {
    ($($t:ty),*) => {$(
        impl KernelIndex for $t {
            #[inline]
            fn offset(self) -> Option<usize> {
                usize::try_from(self).ok()
            }
            #[inline]
            fn bits(self) -> u64 {
                self as u64
            }
        }
        impl FromIndex for $t {
            #[inline]
            fn from_index(i: impl KernelIndex) -> Self {
                i.bits() as $t
            }
        }
    )*};
}

kernel_index!(usize, u32, u64, u16, u8, isize, i32, i64);
