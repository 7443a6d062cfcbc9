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
}

/// Implements [`KernelIndex`] for each type: `try_from` widens an unsigned one and
/// refuses a negative signed one.
macro_rules! kernel_index {
    ($($t:ty),*) => {$(
        impl KernelIndex for $t {
            #[inline]
            fn offset(self) -> Option<usize> {
                usize::try_from(self).ok()
            }
        }
    )*};
}

kernel_index!(usize, u32, u64, u16, u8, isize, i32, i64);
