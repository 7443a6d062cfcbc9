//! The thread, block and grid intrinsics a `#[kernel]` body calls, as CPU functions.
//!
//! In generated CUDA C++ each maps to its CUDA counterpart (`thread_idx_x()` →
//! `threadIdx.x`, `sync_threads()` → `__syncthreads()`, …); here each reads the emulated
//! thread's position from the grid executor. Indices are `usize` so they index buffers
//! without casts.

use half::{bf16, f16};

use super::grid::{ThreadCtx, Wait, CTX, DYNAMIC_SHARED_LIMIT, SHARED_LIMIT};
use super::slices::{GlobalSliceMut, SharedArray};
use crate::dtype::DTypeBase;

#[track_caller]
fn with<R>(what: &str, f: impl FnOnce(&ThreadCtx) -> R) -> R {
    if !CTX.is_set() {
        panic!("{what} called outside a #[kernel] launch");
    }
    CTX.with(f)
}

/// Defines one intrinsic per axis.
macro_rules! axis_intrinsics {
    ($($field:ident: $x:ident $y:ident $z:ident, $doc:literal;)*) => {$(
        #[doc = concat!($doc, ", x.")]
        pub fn $x() -> usize { with(stringify!($x), |c| c.$field[0] as usize) }
        #[doc = concat!($doc, ", y.")]
        pub fn $y() -> usize { with(stringify!($y), |c| c.$field[1] as usize) }
        #[doc = concat!($doc, ", z.")]
        pub fn $z() -> usize { with(stringify!($z), |c| c.$field[2] as usize) }
    )*};
}

axis_intrinsics! {
    thread: thread_idx_x thread_idx_y thread_idx_z, "The thread's index in its block (`threadIdx`)";
    block: block_idx_x block_idx_y block_idx_z, "The block's index in the grid (`blockIdx`)";
    block_dim: block_dim_x block_dim_y block_dim_z, "Threads per block (`blockDim`)";
    grid_dim: grid_dim_x grid_dim_y grid_dim_z, "Blocks per grid (`gridDim`)";
}

/// `blockIdx.x * blockDim.x + threadIdx.x`: the thread's index along x in the grid.
pub fn global_index() -> usize {
    with("global_index", |c| {
        (c.block[0] as usize) * (c.block_dim[0] as usize) + c.thread[0] as usize
    })
}

/// The thread's index along y in the grid.
pub fn global_index_y() -> usize {
    with("global_index_y", |c| {
        (c.block[1] as usize) * (c.block_dim[1] as usize) + c.thread[1] as usize
    })
}

/// The thread's index along z in the grid.
pub fn global_index_z() -> usize {
    with("global_index_z", |c| {
        (c.block[2] as usize) * (c.block_dim[2] as usize) + c.thread[2] as usize
    })
}

/// `blockDim.x * gridDim.x`: the step of a grid-stride loop.
pub fn grid_stride() -> usize {
    with("grid_stride", |c| (c.block_dim[0] as usize) * (c.grid_dim[0] as usize))
}

/// The thread's lane in its warp (0..32).
pub fn lane_id() -> usize {
    with("lane_id", |c| c.linear_thread() % 32)
}

/// Threads per warp: 32.
pub fn warp_size() -> usize {
    32
}

fn coop<R>(what: &str, f: impl FnOnce(&ThreadCtx, &super::grid::BlockState) -> R) -> R {
    with(what, |c| match &c.coop {
        Some(state) => f(c, state),
        None => panic!(
            "{what} needs the cooperative emulation mode, which #[kernel] turns on when the \
             body names sync_threads, shared_array or a shuffle"
        ),
    })
}

/// In the Rust body of a `#[kernel(cuda = "…")]` kernel that has no CPU emulation: the
/// CPU device answers the launch with `Unsupported`.
pub fn cpu_unsupported() -> ! {
    // A typed payload, not a message: the grid executor turns it into `Unsupported`.
    std::panic::resume_unwind(Box::new(super::grid::NoCpuEmulation))
}

/// `__syncthreads()`: waits until every (live) thread of the block gets here.
pub fn sync_threads() {
    coop("sync_threads()", |c, _| c.suspend(Wait::Block))
}

/// `__shared__ T name[N]`: the block's array for this declaration, zeroed at the start
/// of the block. Declare shared arrays at the top of the body (the macro checks).
pub fn shared_array<T: DTypeBase, const N: usize>() -> SharedArray<T, N> {
    coop("shared_array", |c, state| {
        let k = c.shared_next.get();
        c.shared_next.set(k + 1);
        let mut arrays = state.shared.borrow_mut();
        if arrays.len() <= k {
            let used: usize = arrays.iter().map(|a| a.len() * 8).sum();
            let bytes = N * std::mem::size_of::<T>();
            if used + bytes > SHARED_LIMIT {
                panic!(
                    "shared arrays of {} bytes exceed the {SHARED_LIMIT} bytes of static shared memory a block has",
                    used + bytes
                );
            }
            if used + bytes + state.dynamic_bytes > DYNAMIC_SHARED_LIMIT as usize {
                panic!(
                    "shared arrays of {} bytes and {} bytes of dynamic shared memory exceed the {DYNAMIC_SHARED_LIMIT} \
                     bytes a block has",
                    used + bytes,
                    state.dynamic_bytes
                );
            }
            arrays.push(vec![0u64; bytes.div_ceil(8)].into_boxed_slice());
        }
        let ptr = arrays[k].as_mut_ptr() as *mut T;
        // SAFETY: the storage holds N zeroed (valid for every DTypeBase, which is
        // ValidAsZeroBits) elements aligned to 8 bytes; it lives, unmoved, in the block
        // state until every thread of the block has finished the block.
        unsafe { SharedArray::from_raw(ptr) }
    })
}

/// `extern __shared__ T buf[]`: the block's dynamic shared memory, sized at launch by
/// `LaunchConfig::shared_mem_bytes`, as a buffer of `shared_mem_bytes / size_of::<T>()`
/// elements (zeroed at the start of the block on the CPU device; uninitialised on the
/// GPU, as in CUDA). Every call in a kernel views the same bytes, as every `extern
/// __shared__` array of a CUDA kernel does: partition it by offsets.
pub fn dyn_shared<T: DTypeBase>() -> GlobalSliceMut<T> {
    coop("dyn_shared", |_, state| {
        let ptr = std::cell::UnsafeCell::raw_get(state.dynamic.as_ptr()) as *mut T;
        // SAFETY: the cells live, unmoved, in the block state until every thread of the
        // block has finished; they are 8-byte aligned and zeroed (valid for every
        // DTypeBase, which is ValidAsZeroBits) and span `dynamic_bytes`; threads of the
        // block separate their accesses with `sync_threads()`, as on the GPU.
        unsafe { GlobalSliceMut::from_raw(ptr, state.dynamic_bytes / std::mem::size_of::<T>()) }
    })
}

/// Types a warp shuffle can move (those CUDA's `__shfl_*_sync` take).
pub trait ShuffleBits: Copy {
    /// The value's bits, widened.
    fn to_bits64(self) -> u64;
    /// Back from [`ShuffleBits::to_bits64`].
    fn from_bits64(b: u64) -> Self;
}

/// Implements [`ShuffleBits`] for each type.
macro_rules! shuffle_bits {
    ($($t:ty => $to:expr, $from:expr);* $(;)?) => {$(
        impl ShuffleBits for $t {
            fn to_bits64(self) -> u64 { $to(self) }
            fn from_bits64(b: u64) -> Self { $from(b) }
        }
    )*};
}

shuffle_bits! {
    i32 => |v: i32| v as u32 as u64, |b: u64| b as u32 as i32;
    u32 => |v: u32| v as u64, |b: u64| b as u32;
    i64 => |v: i64| v as u64, |b: u64| b as i64;
    u64 => |v: u64| v, |b: u64| b;
    f32 => |v: f32| v.to_bits() as u64, |b: u64| f32::from_bits(b as u32);
    f64 => f64::to_bits, f64::from_bits;
    f16 => |v: f16| v.to_bits() as u64, |b: u64| f16::from_bits(b as u16);
    bf16 => |v: bf16| v.to_bits() as u64, |b: u64| bf16::from_bits(b as u16);
}

/// Every lane of the warp publishes `v`; lane `l` gets the value of lane `src(l)`, or
/// its own where `src` is out of the warp. Two warp barriers: after publishing, and after
/// reading (so no lane overwrites its slot before the others have read it).
fn exchange<T: ShuffleBits>(what: &str, v: T, src: impl FnOnce(usize) -> Option<usize>) -> T {
    coop(what, |c, state| {
        let (t, base, lanes) = warp_of(c);
        let lane = t - base;
        state.slots.borrow_mut()[t] = v.to_bits64();
        c.suspend(Wait::Warp);
        let out = match src(lane) {
            Some(s) if s < lanes => T::from_bits64(state.slots.borrow()[base + s]),
            _ => v,
        };
        c.suspend(Wait::Warp);
        out
    })
}

/// The calling thread's index in its block, its warp's first thread, and how many lanes
/// the warp has (fewer than 32 in a partial last warp).
fn warp_of(c: &ThreadCtx) -> (usize, usize, usize) {
    let t = c.linear_thread();
    let base = (t / 32) * 32;
    let lanes = (c.block_dim.iter().map(|&d| d as usize).product::<usize>() - base).min(32);
    (t, base, lanes)
}

/// `__syncwarp()`: waits until every (live) lane of the warp gets here.
pub fn sync_warp() {
    coop("sync_warp()", |c, _| c.suspend(Wait::Warp))
}

/// `__threadfence()`: this thread's writes are seen by the whole device before its later
/// ones. The CPU device's emulated threads share one memory in order: a fence there is
/// the process's.
pub fn thread_fence() {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst)
}

/// `__threadfence_block()`: as [`thread_fence`], for the threads of the block.
pub fn thread_fence_block() {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst)
}

/// `__nanosleep(ns)`: the calling thread waits about `ns` nanoseconds, so that a loop
/// waiting for another block (a decoupled look-back's spin) leaves the issue slots to
/// the warps doing work. The CPU device's emulated threads yield to the others instead.
pub fn nanosleep(ns: u32) {
    let _ = ns;
    std::thread::yield_now()
}

/// `__ballot_sync(0xffffffff, predicate)`: bit `l` is set where lane `l`'s predicate
/// holds (lanes beyond a partial last warp count as false).
pub fn ballot(predicate: bool) -> u32 {
    coop("ballot", |c, state| {
        let (t, base, lanes) = warp_of(c);
        state.slots.borrow_mut()[t] = predicate as u64;
        c.suspend(Wait::Warp);
        let mask = {
            let slots = state.slots.borrow();
            (0..lanes)
                .filter(|&l| slots[base + l] != 0)
                .fold(0u32, |m, l| m | (1 << l))
        };
        c.suspend(Wait::Warp);
        mask
    })
}

/// `__any_sync(0xffffffff, predicate)`: whether the predicate holds in any lane.
pub fn warp_any(predicate: bool) -> bool {
    ballot(predicate) != 0
}

/// `__all_sync(0xffffffff, predicate)`: whether the predicate holds in every lane of
/// the warp (every lane present in a partial last warp).
pub fn warp_all(predicate: bool) -> bool {
    ballot(!predicate) == 0
}

/// `__shfl_down_sync(0xffffffff, v, delta)`: the value of the lane `delta` above.
pub fn shfl_down<T: ShuffleBits>(v: T, delta: u32) -> T {
    exchange("shfl_down", v, |l| Some(l + delta as usize))
}

/// `__shfl_up_sync(0xffffffff, v, delta)`: the value of the lane `delta` below.
pub fn shfl_up<T: ShuffleBits>(v: T, delta: u32) -> T {
    exchange("shfl_up", v, |l| l.checked_sub(delta as usize))
}

/// `__shfl_xor_sync(0xffffffff, v, mask)`: the value of lane `lane ^ mask`.
pub fn shfl_xor<T: ShuffleBits>(v: T, mask: u32) -> T {
    exchange("shfl_xor", v, |l| Some(l ^ mask as usize))
}

/// `__shfl_sync(0xffffffff, v, lane)`: the value of lane `lane`.
pub fn shfl<T: ShuffleBits>(v: T, lane: u32) -> T {
    exchange("shfl", v, |_| Some(lane as usize % 32))
}
