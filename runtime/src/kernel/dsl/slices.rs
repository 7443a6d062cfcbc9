//! What a kernel's buffer parameters and shared arrays are in the CPU emulation.
//!
//! On the GPU a `&[T]` parameter is a `const T*` and many threads read and write the same
//! buffer at once, each at its own index. The emulation runs a body per thread, often on
//! many OS threads at once, so it cannot hand every thread a `&mut [T]` to one buffer
//! (that would be aliasing `&mut`). Instead the body sees these handles: a pointer and a
//! length, copied into every thread like the GPU's pointer is, with bounds-checked
//! indexing. As on the GPU, two threads that touch one element without an atomic race;
//! the kernel, not the handle, must keep its threads apart (which `global_index()`
//! indexing does).
//!
//! A kernel that races anyway gets a wrong value, never undefined behaviour: the CPU body
//! `#[kernel]` generates reads and writes elements of its buffers (`x[i]`, `y[i] = v`,
//! `y[i] += v`, `m[(r, c)]` of a 2-D view, the vector loads and stores) through
//! [`GlobalSlice::__load`] and [`GlobalSliceMut::__store`], which are relaxed atomic
//! accesses in units of the element's alignment — plain moves on x86 and ARM. Blocks run
//! on several OS threads at once, so a plain `&mut` write there would be a data race in
//! Rust's sense. (A body's own `&mut y[i]`, or a field of an element assigned in place,
//! still goes through `IndexMut`.)

use std::marker::PhantomData;
use std::ops::{Index, IndexMut};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};

use super::atomics::{AtomicAdd, AtomicOrd, AtomicSwap};
use super::index::KernelIndex;
use super::vectors::{Vec2, Vec4};

/// A buffer a kernel reads (`&[T]` in the kernel's signature).
#[derive(Debug)]
pub struct GlobalSlice<T> {
    ptr: *const T,
    len: usize,
}

/// A buffer a kernel writes (`&mut [T]` in the kernel's signature).
#[derive(Debug)]
pub struct GlobalSliceMut<T> {
    ptr: *mut T,
    len: usize,
}

/// A block-shared array (`shared_array::<T, N>()`): one per block, seen by all its threads.
#[derive(Debug)]
pub struct SharedArray<T, const N: usize> {
    ptr: *mut T,
    _t: PhantomData<T>,
}

// Manual impls: a derive would demand `T: Clone`.
impl<T> Clone for GlobalSlice<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for GlobalSlice<T> {}
impl<T> Clone for GlobalSliceMut<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for GlobalSliceMut<T> {}
impl<T, const N: usize> Clone for SharedArray<T, N> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const N: usize> Copy for SharedArray<T, N> {}

// SAFETY: the handles are pointers into a buffer that outlives the emulated launch (the
// launch holds the buffer's lock until every thread has joined); sending them to the
// emulation's threads is what the GPU does with its pointers. Data races between threads
// are the kernel's to avoid, exactly as on the GPU (see the module docs).
unsafe impl<T: Send> Send for GlobalSlice<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for GlobalSlice<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for GlobalSliceMut<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for GlobalSliceMut<T> {}
// SAFETY: as above; the block's shared storage lives until the block's threads joined.
unsafe impl<T: Send, const N: usize> Send for SharedArray<T, N> {}
// SAFETY: as above.
unsafe impl<T: Sync, const N: usize> Sync for SharedArray<T, N> {}

/// Copies `n` units of `U` (an atomic integer the size of the element's alignment) from
/// `src` to `dst`, one side through relaxed atomic accesses.
macro_rules! relaxed_units {
    ($($atomic:ty, $int:ty);*) => {
        /// Reads the element at `p` with relaxed atomic loads of its alignment's width.
        ///
        /// # Safety
        /// `p` must be aligned for `T` and valid for reads of a `T` whose every bit
        /// pattern is valid (a kernel buffer's element type).
        #[inline]
        unsafe fn load_relaxed<T: Copy>(p: *const T) -> T {
            let mut out = std::mem::MaybeUninit::<T>::uninit();
            let bytes = std::mem::size_of::<T>();
            match std::mem::align_of::<T>().min(8) {
                $(a if a == std::mem::size_of::<$int>() => {
                    let (src, dst) = (p as *const $atomic, out.as_mut_ptr() as *mut $int);
                    for k in 0..bytes / a {
                        // SAFETY: `src + k` is inside the element and aligned for the
                        // atomic (its width is the element's alignment); `dst + k` inside
                        // `out`, which has the element's alignment.
                        unsafe { dst.add(k).write((*src.add(k)).load(Ordering::Relaxed)) };
                    }
                })*
                _ => unreachable!("element alignments are 1, 2, 4 or 8"),
            }
            // SAFETY: every byte was written above; every bit pattern is a valid element.
            unsafe { out.assume_init() }
        }

        /// Writes `v` to the element at `p` with relaxed atomic stores of its
        /// alignment's width.
        ///
        /// # Safety
        /// `p` must be aligned for `T` and valid for writes of a `T`.
        #[inline]
        unsafe fn store_relaxed<T: Copy>(p: *mut T, v: T) {
            let bytes = std::mem::size_of::<T>();
            match std::mem::align_of::<T>().min(8) {
                $(a if a == std::mem::size_of::<$int>() => {
                    let (src, dst) = (&v as *const T as *const $int, p as *const $atomic);
                    for k in 0..bytes / a {
                        // SAFETY: as in `load_relaxed`, the other way round.
                        unsafe { (*dst.add(k)).store(src.add(k).read(), Ordering::Relaxed) };
                    }
                })*
                _ => unreachable!("element alignments are 1, 2, 4 or 8"),
            }
        }
    };
}

relaxed_units!(AtomicU8, u8; AtomicU16, u16; AtomicU32, u32; AtomicU64, u64);

#[cold]
#[track_caller]
fn out_of_bounds(i: Option<usize>, len: usize) -> ! {
    match i {
        Some(i) => panic!("index {i} is out of bounds of a kernel buffer of length {len}"),
        None => panic!("a negative index is out of bounds of a kernel buffer of length {len}"),
    }
}

/// The offset of index `i` into `len` elements, checked.
#[inline]
#[track_caller]
fn checked(i: impl KernelIndex, len: usize) -> usize {
    match i.offset() {
        Some(k) if k < len => k,
        other => out_of_bounds(other, len),
    }
}

impl<T> GlobalSlice<T> {
    /// Wraps `len` elements at `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay valid for reads for as long as any copy of the handle
    /// is used (the emulated launch).
    pub(crate) unsafe fn from_raw(ptr: *const T, len: usize) -> Self {
        GlobalSlice { ptr, len }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<T> GlobalSliceMut<T> {
    /// Wraps `len` elements at `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay valid for reads and writes for as long as any copy of
    /// the handle is used (the emulated launch), and no other reference to it may be
    /// used meanwhile.
    pub(crate) unsafe fn from_raw(ptr: *mut T, len: usize) -> Self {
        GlobalSliceMut { ptr, len }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[track_caller]
    fn slot(&self, i: impl KernelIndex) -> *mut T {
        let k = checked(i, self.len);
        // SAFETY: `k < len`, inside the buffer (see `from_raw`).
        unsafe { self.ptr.add(k) }
    }
}

impl<T, const N: usize> SharedArray<T, N> {
    /// Wraps the block's storage for this array.
    ///
    /// # Safety
    /// `ptr` must point at `N` initialised, aligned elements that stay valid while the
    /// block runs.
    pub(crate) unsafe fn from_raw(ptr: *mut T) -> Self {
        SharedArray { ptr, _t: PhantomData }
    }

    /// The number of elements, `N`.
    pub fn len(&self) -> usize {
        N
    }

    /// True if `N` is 0.
    pub fn is_empty(&self) -> bool {
        N == 0
    }

    #[track_caller]
    fn slot(&self, i: impl KernelIndex) -> *mut T {
        let k = checked(i, N);
        // SAFETY: `k < N`, inside the array (see `from_raw`).
        unsafe { self.ptr.add(k) }
    }
}

impl<T: Copy> GlobalSlice<T> {
    /// Element `i`, read as a relaxed atomic access: what `x[i]` in a kernel's CPU body
    /// becomes (see the module docs).
    #[doc(hidden)]
    #[inline]
    #[track_caller]
    pub fn __load(&self, i: impl KernelIndex) -> T {
        let k = checked(i, self.len);
        // SAFETY: `k < len`, inside the buffer, aligned and valid for reads (`from_raw`).
        unsafe { load_relaxed(self.ptr.add(k)) }
    }
}

impl<T: Copy> GlobalSliceMut<T> {
    /// Element `i`, read as a relaxed atomic access: what `y[i]` in a kernel's CPU body
    /// becomes (see the module docs).
    #[doc(hidden)]
    #[inline]
    #[track_caller]
    pub fn __load(&self, i: impl KernelIndex) -> T {
        // SAFETY: in bounds (checked by `slot`), aligned and valid for reads.
        unsafe { load_relaxed(self.slot(i)) }
    }

    /// Writes element `i` as a relaxed atomic access: what `y[i] = v` in a kernel's CPU
    /// body becomes (see the module docs).
    #[doc(hidden)]
    #[inline]
    #[track_caller]
    pub fn __store(&self, i: impl KernelIndex, v: T) {
        // SAFETY: in bounds (checked by `slot`), aligned and valid for writes.
        unsafe { store_relaxed(self.slot(i), v) }
    }
}

impl<T, I: KernelIndex> Index<I> for GlobalSlice<T> {
    type Output = T;
    #[track_caller]
    fn index(&self, i: I) -> &T {
        let k = checked(i, self.len);
        // SAFETY: `k < len`, inside the buffer, valid for reads (see `from_raw`).
        unsafe { &*self.ptr.add(k) }
    }
}

impl<T, I: KernelIndex> Index<I> for GlobalSliceMut<T> {
    type Output = T;
    #[track_caller]
    fn index(&self, i: I) -> &T {
        // SAFETY: in bounds (checked by `slot`) and valid for reads.
        unsafe { &*self.slot(i) }
    }
}

impl<T, I: KernelIndex> IndexMut<I> for GlobalSliceMut<T> {
    #[track_caller]
    fn index_mut(&mut self, i: I) -> &mut T {
        // SAFETY: in bounds (checked by `slot`) and valid for writes; other threads keep
        // to other elements (module docs).
        unsafe { &mut *self.slot(i) }
    }
}

impl<T, I: KernelIndex, const N: usize> Index<I> for SharedArray<T, N> {
    type Output = T;
    #[track_caller]
    fn index(&self, i: I) -> &T {
        // SAFETY: in bounds (checked by `slot`) and valid for reads.
        unsafe { &*self.slot(i) }
    }
}

impl<T, I: KernelIndex, const N: usize> IndexMut<I> for SharedArray<T, N> {
    #[track_caller]
    fn index_mut(&mut self, i: I) -> &mut T {
        // SAFETY: in bounds and valid for writes; threads of the block separate their
        // accesses with `sync_threads()` (module docs).
        unsafe { &mut *self.slot(i) }
    }
}

/// The atomic read-modify-write operations of a writable buffer or shared array; each
/// returns the element's old value, like CUDA's `atomicAdd` and friends.
macro_rules! atomic_methods {
    ($($ty:ident $(<$n:ident>)?),*) => {$(
        impl<T $(, const $n: usize)?> $ty<T $(, $n)?> {
            /// Adds `v` to element `i` atomically; returns the old value.
            #[track_caller]
            pub fn atomic_add(&self, i: impl KernelIndex, v: T) -> T where T: AtomicAdd {
                T::atomic_add(self.slot(i), v)
            }
            /// Stores the smaller of element `i` and `v` atomically; returns the old value.
            #[track_caller]
            pub fn atomic_min(&self, i: impl KernelIndex, v: T) -> T where T: AtomicOrd {
                T::atomic_min(self.slot(i), v)
            }
            /// Stores the larger of element `i` and `v` atomically; returns the old value.
            #[track_caller]
            pub fn atomic_max(&self, i: impl KernelIndex, v: T) -> T where T: AtomicOrd {
                T::atomic_max(self.slot(i), v)
            }
            /// Stores `v` in element `i` atomically; returns the old value.
            #[track_caller]
            pub fn atomic_exch(&self, i: impl KernelIndex, v: T) -> T where T: AtomicSwap {
                T::atomic_exch(self.slot(i), v)
            }
            /// Stores `new` in element `i` if it equals `current`, atomically; returns
            /// the old value (equal to `current` when the store happened).
            #[track_caller]
            pub fn atomic_cas(&self, i: impl KernelIndex, current: T, new: T) -> T where T: AtomicSwap {
                T::atomic_cas(self.slot(i), current, new)
            }
            /// Reads element `i` atomically — what another block stored through an
            /// atomic, or before a `thread_fence()` — without modifying it (CUDA: a
            /// relaxed load at GPU scope).
            #[track_caller]
            pub fn atomic_load(&self, i: impl KernelIndex) -> T where T: AtomicSwap {
                T::atomic_load(self.slot(i))
            }
        }
    )*};
}

atomic_methods!(GlobalSliceMut, SharedArray<N>);

/// The first element of vector `i` of `lanes` elements (elements `lanes·i ..
/// lanes·(i + 1)`) of `len`, checked.
#[inline]
#[track_caller]
fn vector(i: impl KernelIndex, lanes: usize, len: usize) -> usize {
    match i.offset().and_then(|k| k.checked_mul(lanes)) {
        Some(k) if k.checked_add(lanes).is_some_and(|end| end <= len) => k,
        _ => panic!(
            "vector {} of {lanes} elements is out of bounds of a kernel buffer of length {len}",
            i.offset()
                .map_or_else(|| "with a negative index".to_string(), |k| k.to_string())
        ),
    }
}

/// `loadN` on both buffer handles and `storeN` on the writable one, per vector type.
macro_rules! vector_access {
    ($($v:ident $lanes:literal $load:ident $store:ident [$($lane:ident $k:literal),*]);*) => {
        load_on!(GlobalSlice $(, $v $lanes $load [$($lane $k),*])*);
        load_on!(GlobalSliceMut $(, $v $lanes $load [$($lane $k),*])*);
        impl<T: Copy> GlobalSliceMut<T> {$(
            #[doc = concat!("Writes `v` to elements `", $lanes, "i ..` as one access (CUDA: one vector store).")]
            #[track_caller]
            pub fn $store(&mut self, i: impl KernelIndex, v: $v<T>) {
                let k = vector(i, $lanes, self.len);
                // SAFETY: the vector is inside the buffer (checked), valid for writes;
                // each lane a relaxed atomic store (module docs).
                unsafe { $(store_relaxed(self.ptr.add(k + $k), v.$lane);)* }
            }
        )*}
    };
}

/// The loads of one buffer handle.
macro_rules! load_on {
    ($ty:ident $(, $v:ident $lanes:literal $load:ident [$($lane:ident $k:literal),*])*) => {
        impl<T: Copy> $ty<T> {$(
            #[doc = concat!("Elements `", $lanes, "i ..` as one access (CUDA: one vector load).")]
            #[track_caller]
            pub fn $load(&self, i: impl KernelIndex) -> $v<T> {
                let k = vector(i, $lanes, self.len);
                // SAFETY: the vector is inside the buffer (checked), valid for reads;
                // each lane a relaxed atomic load (module docs).
                unsafe { $v { $($lane: load_relaxed(self.ptr.add(k + $k))),* } }
            }
        )*}
    };
}

vector_access!(
    Vec2 2 load2 store2 [x 0, y 1];
    Vec4 4 load4 store4 [x 0, y 1, z 2, w 3]
);
