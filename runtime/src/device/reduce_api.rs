//! Reductions as library calls: `Device::sum`, `min`, `max`, `argmin`, `argmax` over a
//! buffer (or a view) of f16, bf16, f32 or f64 (sums, minima and maxima carried in f64,
//! rounded once to the element type) or of the integers of 8 to 64 bits (minima and
//! maxima in the type itself, sums carried in 64 bits: see [`Reduce`]).
//!
//! Why `#[kernel]`s: no CUDA library cudarc reaches (cuBLAS has no plain sum, min or max)
//! reduces a vector, so the runtime writes them in its own kernel language — compiled per
//! dtype through NVRTC and the disk cache on a GPU, run on the emulated grid on the CPU
//! device, sent by name to an isolated device's worker, journalled by a `Recorder` —
//! like any user kernel. No atomics: each block of [`BLOCK`] threads reduces a
//! grid-stride share of the input to one partial (four elements per load), and the
//! partials — at most [`MAX_BLOCKS`], read back in one copy — are combined on the host in
//! block order.
//! The order of the additions is fixed by the launch shape, so a sum is the same bits on
//! every run (a replay compares answers bit for bit). NaNs are skipped by min/max and
//! argmin/argmax (IEEE `fmin`/`fmax`, as `f32::min`), and propagate through a sum.

use std::future::Future;

use crate::device::DType;
use crate::device::Device;
use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;
use crate::kernel::dsl::{Float, Int};
use crate::launch::LaunchConfig;

/// Threads per block (the shared tiles' length).
const BLOCK: usize = 256;
/// The most blocks of a pass (their partials are read back and combined on the host).
const MAX_BLOCKS: usize = 1024;

/// Which reduction a pass computes (a kernel scalar).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Op {
    Sum = 0,
    Min = 1,
    Max = 2,
}

/// `a` and `b` combined by reduction `op` (0 sum, 1 min, 2 max).
#[atomr_accel_cuda_macros::device(crate = crate)]
fn combine(op: u32, a: f64, b: f64) -> f64 {
    if op == 0 {
        a + b
    } else if op == 1 {
        a.min(b)
    } else {
        a.max(b)
    }
}

/// The pass of a sum, min or max: block `b` writes the reduction of its grid-stride
/// share of `x` to `out[b]`, in f64, reading four elements per load (16 bytes for f32:
/// what reaches the memory bandwidth; `x` starts at a multiple of four elements). A sum
/// is carried in f64 — every element type widens exactly, so f16 and bf16 sums do not
/// lose their small terms and an f32 sum rounds once, at the end; a minimum or maximum
/// in the element type itself (exact, and no conversion per element), NaNs skipped.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn reduce_pass<T: Float>(x: &[T], out: &mut [f64], op: u32) {
    let mut tile = shared_array::<f64, 256>();
    let t = thread_idx_x();
    let quads = x.len() / 4;
    let tail = quads * 4 + global_index();
    let mut q = global_index();
    let stride = grid_stride();
    let mut acc: f64 = 0.0;
    // Two loads per step, both issued before either is used, so that each thread keeps
    // 32 bytes in flight; the elements still meet `acc` in the same order as one load
    // per step (the same bits).
    if op == 0 {
        while q + stride < quads {
            let v: Vec4<T> = x.load4(q);
            let u: Vec4<T> = x.load4(q + stride);
            acc += (v.x.to_f64() + v.y.to_f64()) + (v.z.to_f64() + v.w.to_f64());
            acc += (u.x.to_f64() + u.y.to_f64()) + (u.z.to_f64() + u.w.to_f64());
            q += 2 * stride;
        }
        if q < quads {
            let v: Vec4<T> = x.load4(q);
            acc += (v.x.to_f64() + v.y.to_f64()) + (v.z.to_f64() + v.w.to_f64());
        }
        if tail < x.len() {
            acc += x[tail].to_f64();
        }
    } else {
        // The running extreme first in every step, so that a NaN lane is skipped by
        // either spelling of `min`/`max` (IEEE `fmin` or the first operand kept).
        let mut m = T::infinity();
        if op == 2 {
            m = -T::infinity();
        }
        while q + stride < quads {
            let v: Vec4<T> = x.load4(q);
            let u: Vec4<T> = x.load4(q + stride);
            m = extreme(op, m, v.x, v.y, v.z, v.w);
            m = extreme(op, m, u.x, u.y, u.z, u.w);
            q += 2 * stride;
        }
        if q < quads {
            let v: Vec4<T> = x.load4(q);
            m = extreme(op, m, v.x, v.y, v.z, v.w);
        }
        if tail < x.len() {
            if op == 1 {
                m = m.min(x[tail]);
            } else {
                m = m.max(x[tail]);
            }
        }
        acc = m.to_f64();
    }
    tile[t] = acc;
    sync_threads();
    let mut s: usize = 128;
    while s > 0 {
        if t < s {
            tile[t] = combine(op, tile[t], tile[t + s]);
        }
        sync_threads();
        s /= 2;
    }
    if t == 0 {
        out[block_idx_x()] = tile[0];
    }
}

/// The minimum (`op` 1) or maximum of `m` and four lanes: the running extreme first in
/// every step, so that a NaN lane is skipped.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn extreme<T: Float>(op: u32, m: T, a: T, b: T, c: T, d: T) -> T {
    let mut e = m;
    if op == 1 {
        e = e.min(a).min(b).min(c).min(d);
    } else {
        e = e.max(a).max(b).max(c).max(d);
    }
    e
}

/// Whether candidate `(c, j)` beats the best so far `(v, k)` of an argmax (`max` 1) or
/// argmin: a larger (smaller) value, or an equal one at a smaller index. NaNs (`c != c`)
/// and empty slots (`none`) never win; anything beats an empty best.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn beats<T: Float>(max: u32, none: u32, c: T, j: u32, v: T, k: u32) -> bool {
    let better = strictly(max, c, v) || (c == v && j < k);
    j != none && c == c && (k == none || better)
}

/// Whether `c` is larger (`max` 1) or smaller than `v`: false for a NaN either side.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn strictly<T: Float>(max: u32, c: T, v: T) -> bool {
    (max == 1 && c > v) || (max == 0 && c < v)
}

/// [`beats`] for the first pass, whose thread meets its elements in index order: a later
/// equal value never wins, so `c` leads if it is strictly better than the best `v` so
/// far, or the first value that is not NaN (`k` still `none`).
#[atomr_accel_cuda_macros::device(crate = crate)]
fn leads<T: Float>(max: u32, none: u32, c: T, v: T, k: u32) -> bool {
    strictly(max, c, v) || (k == none && c == c)
}

/// The index an argmin/argmax candidate at position `p` of its input stands for: `p`
/// itself in the first pass; in the pass that combines blocks' bests, the index the
/// best at `p` was found at (`at[p]`).
#[atomr_accel_cuda_macros::device(crate = crate)]
fn index_at(at: &[u32], combine: u32, p: usize) -> u32 {
    let mut i = p as u32;
    if combine == 1 {
        i = at[p];
    }
    i
}

/// The pass of an argmin (`max` 0) or argmax: block `b` writes the best value of
/// its grid-stride share of `x` and that value's index to `out[b]`, `out_at[b]` — the
/// first index among equals; `none` where the share holds only NaNs. Reads four
/// elements per load, as the sums do (`x` starts at a multiple of four elements); the
/// order in which a thread meets its elements does not matter, ties going by index.
/// With `combine` 1 the input is the first pass's blocks' bests and `at` their indices
/// (one block then reduces them to the winner); with 0, `at` is not read.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn arg_pass<T: Float>(x: &[T], at: &[u32], combine: u32, none: u32, max: u32, out: &mut [T], out_at: &mut [u32]) {
    let mut best_v = shared_array::<T, 256>();
    let mut best_i = shared_array::<u32, 256>();
    let t = thread_idx_x();
    let mut v = T::zero();
    let mut k: u32 = none;
    let quads = x.len() / 4;
    let mut q = global_index();
    if combine == 0 {
        // The first pass: a thread meets its elements in index order, so a later equal
        // value never wins and the test is one comparison — which is what bounds the
        // pass for 2-byte types (twice the elements per byte read).
        while q < quads {
            let w: Vec4<T> = x.load4(q);
            let i = (q * 4) as u32;
            if leads(max, none, w.x, v, k) {
                v = w.x;
                k = i;
            }
            if leads(max, none, w.y, v, k) {
                v = w.y;
                k = i + 1;
            }
            if leads(max, none, w.z, v, k) {
                v = w.z;
                k = i + 2;
            }
            if leads(max, none, w.w, v, k) {
                v = w.w;
                k = i + 3;
            }
            q += grid_stride();
        }
    }
    while q < quads {
        let w: Vec4<T> = x.load4(q);
        let (i0, i1) = (index_at(at, combine, q * 4), index_at(at, combine, q * 4 + 1));
        let (i2, i3) = (index_at(at, combine, q * 4 + 2), index_at(at, combine, q * 4 + 3));
        if beats(max, none, w.x, i0, v, k) {
            v = w.x;
            k = i0;
        }
        if beats(max, none, w.y, i1, v, k) {
            v = w.y;
            k = i1;
        }
        if beats(max, none, w.z, i2, v, k) {
            v = w.z;
            k = i2;
        }
        if beats(max, none, w.w, i3, v, k) {
            v = w.w;
            k = i3;
        }
        q += grid_stride();
    }
    let tail = quads * 4 + global_index();
    if tail < x.len() {
        let i = index_at(at, combine, tail);
        if beats(max, none, x[tail], i, v, k) {
            v = x[tail];
            k = i;
        }
    }
    best_v[t] = v;
    best_i[t] = k;
    sync_threads();
    let mut s: usize = 128;
    while s > 0 {
        if t < s && beats(max, none, best_v[t + s], best_i[t + s], best_v[t], best_i[t]) {
            best_v[t] = best_v[t + s];
            best_i[t] = best_i[t + s];
        }
        sync_threads();
        s /= 2;
    }
    if t == 0 {
        out[block_idx_x()] = best_v[0];
        out_at[block_idx_x()] = best_i[0];
    }
}

/// The pass of an integer reduction: block `b` of `n` writes its grid-stride share's
/// sum (in `i64`, two's-complement: the bits of a `u64` sum too), minimum and maximum
/// (their bits widened to `i64`) to `parts[b]`, `parts[n + b]`, `parts[2n + b]` — one
/// buffer, read back with the pass in one request; `lo` and `hi` are the type's least
/// and greatest values (the identities of max and min).
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn reduce_int_pass<T: Int>(x: &[T], lo: T, hi: T, parts: &mut [i64]) {
    let mut ts = shared_array::<i64, 256>();
    let mut tmin = shared_array::<T, 256>();
    let mut tmax = shared_array::<T, 256>();
    let t = thread_idx_x();
    let mut s: i64 = 0;
    let mut mn = hi;
    let mut mx = lo;
    let mut i = global_index();
    while i < x.len() {
        let v = x[i];
        s = s.wrapping_add(v.to_i64());
        mn = mn.min(v);
        mx = mx.max(v);
        i += grid_stride();
    }
    ts[t] = s;
    tmin[t] = mn;
    tmax[t] = mx;
    sync_threads();
    let mut k: usize = 128;
    while k > 0 {
        if t < k {
            ts[t] = ts[t].wrapping_add(ts[t + k]);
            tmin[t] = tmin[t].min(tmin[t + k]);
            tmax[t] = tmax[t].max(tmax[t + k]);
        }
        sync_threads();
        k /= 2;
    }
    if t == 0 {
        let n = parts.len() / 3;
        let b = block_idx_x();
        parts[b] = ts[0];
        parts[n + b] = tmin[0].to_i64();
        parts[2 * n + b] = tmax[0].to_i64();
    }
}

/// The second pass of an integer argmin/argmax, once the minimum (maximum) `target` is
/// known: block `b` writes the smallest index of its grid-stride share holding
/// `target` to `out[b]` (`none` where it holds none) — each thread's first hit is its
/// smallest, its indices rising.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn first_index_pass<T: Int>(x: &[T], target: T, none: u32, out: &mut [u32]) {
    let mut best = shared_array::<u32, 256>();
    let t = thread_idx_x();
    let mut k: u32 = none;
    let mut i = global_index();
    while i < x.len() {
        if k == none && x[i] == target {
            k = i as u32;
        }
        i += grid_stride();
    }
    best[t] = k;
    sync_threads();
    let mut s: usize = 128;
    while s > 0 {
        if t < s {
            best[t] = best[t].min(best[t + s]);
        }
        sync_threads();
        s /= 2;
    }
    if t == 0 {
        out[block_idx_x()] = best[0];
    }
}

/// The element types the reductions take, and how each reduces: the floats f16, bf16,
/// f32, f64 (sums, minima and maxima carried in f64 — every one widens exactly — and
/// rounded once to the type; NaNs skipped by min, max and the arg*, propagated by a
/// sum) and the integers i8, i16, i32, i64, u8, u16, u32, u64 (minima, maxima and arg*
/// exact in the type; sums carried in 64 bits, exact while they fit — an `i64` for the
/// signed types, a `u64` for the unsigned — and wrapping beyond, as an int64
/// accumulator does).
pub trait Reduce: DType {
    /// What a sum gives: the type itself for a float, `i64` or `u64` for an integer.
    type Sum;

    /// The sum of `x` on `dev`.
    #[doc(hidden)]
    fn sum_on(dev: &Device, x: &GpuRef<Self>) -> impl Future<Output = Result<Self::Sum, GpuError>> + Send;

    /// The smallest (`max` false) or largest element of `x` on `dev`.
    #[doc(hidden)]
    fn extreme_on(dev: &Device, x: &GpuRef<Self>, max: bool) -> impl Future<Output = Result<Self, GpuError>> + Send;

    /// The index of the first smallest (largest) element of `x` on `dev`.
    #[doc(hidden)]
    fn arg_on(
        dev: &Device,
        x: &GpuRef<Self>,
        max: bool,
    ) -> impl Future<Output = Result<Option<usize>, GpuError>> + Send;
}

/// The floats reduce through `reduce_pass` and `arg_pass`.
macro_rules! reduce_float {
    ($($t:ty),*) => {$(
        impl Reduce for $t {
            type Sum = $t;
            fn sum_on(dev: &Device, x: &GpuRef<Self>) -> impl Future<Output = Result<Self, GpuError>> + Send {
                dev.reduce(x, Op::Sum)
            }
            fn extreme_on(dev: &Device, x: &GpuRef<Self>, max: bool) -> impl Future<Output = Result<Self, GpuError>> + Send {
                dev.reduce(x, if max { Op::Max } else { Op::Min })
            }
            fn arg_on(dev: &Device, x: &GpuRef<Self>, max: bool) -> impl Future<Output = Result<Option<usize>, GpuError>> + Send {
                dev.arg(x, max)
            }
        }
    )*};
}

reduce_float!(half::f16, half::bf16, f32, f64);

/// The integers reduce through `reduce_int_pass` (and `first_index_pass`); `$sum` is
/// the sum's type, its bits the `i64` carry's.
macro_rules! reduce_int {
    ($($t:ty => $sum:ty),*) => {$(
        impl Reduce for $t {
            type Sum = $sum;
            fn sum_on(dev: &Device, x: &GpuRef<Self>) -> impl Future<Output = Result<$sum, GpuError>> + Send {
                async move { Ok(dev.reduce_int(x).await?.0 as $sum) }
            }
            fn extreme_on(dev: &Device, x: &GpuRef<Self>, max: bool) -> impl Future<Output = Result<Self, GpuError>> + Send {
                async move {
                    let (_, lo, hi) = dev.reduce_int(x).await?;
                    Ok(if max { hi } else { lo })
                }
            }
            fn arg_on(dev: &Device, x: &GpuRef<Self>, max: bool) -> impl Future<Output = Result<Option<usize>, GpuError>> + Send {
                dev.arg_int(x, max)
            }
        }
    )*};
}

reduce_int!(i8 => i64, i16 => i64, i32 => i64, i64 => i64, u8 => u64, u16 => u64, u32 => u64, u64 => u64);

/// The least and greatest values of an integer type (the identities of max and min).
trait Bounds: Int + DType {
    const LO: Self;
    const HI: Self;
    /// The value whose bits, widened to 64 (as the kernels' `to_i64` widens), are `v`.
    fn from_bits64(v: i64) -> Self;
}

macro_rules! bounds {
    ($($t:ty),*) => {$(impl Bounds for $t {
        const LO: Self = <$t>::MIN;
        const HI: Self = <$t>::MAX;
        fn from_bits64(v: i64) -> Self {
            v as $t
        }
    })*};
}

bounds!(i8, i16, i32, i64, u8, u16, u32, u64);

/// Blocks of a pass over `n` elements: one per block's worth, at most
/// [`MAX_BLOCKS`].
fn blocks(n: usize) -> usize {
    n.div_ceil(BLOCK).clamp(1, MAX_BLOCKS)
}

fn shape(blocks: usize) -> LaunchConfig {
    LaunchConfig {
        grid: (blocks as u32, 1, 1),
        block: (BLOCK as u32, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Positions fit the kernels' `u32` indices (and one more value, "none").
fn check_len<T: DTypeBase>(x: &GpuRef<T>, what: &str) -> Result<u32, GpuError> {
    u32::try_from(x.len()).ok().filter(|&n| n < u32::MAX).ok_or_else(|| {
        GpuError::Unsupported(format!(
            "{what} of {} elements: reductions take fewer than 2^32 - 1 (reduce views of it and combine)",
            x.len()
        ))
    })
}

impl Device {
    /// The sum of `x`'s elements (a buffer or a view), in an order fixed by the launch
    /// shape: the same bits on every run. A float's sum is its own type, an integer's an
    /// `i64` (`u64` for an unsigned type): see [`Reduce`].
    pub async fn sum<T: Reduce>(&self, x: &GpuRef<T>) -> Result<T::Sum, GpuError> {
        T::sum_on(self, x).await
    }

    /// The smallest element of `x`, NaNs skipped (+∞ if all are NaN).
    pub async fn min<T: Reduce>(&self, x: &GpuRef<T>) -> Result<T, GpuError> {
        T::extreme_on(self, x, false).await
    }

    /// The largest element of `x`, NaNs skipped (−∞ if all are NaN).
    pub async fn max<T: Reduce>(&self, x: &GpuRef<T>) -> Result<T, GpuError> {
        T::extreme_on(self, x, true).await
    }

    /// The index (in `x`) of the first smallest element, NaNs skipped; `None` if every
    /// element is NaN.
    pub async fn argmin<T: Reduce>(&self, x: &GpuRef<T>) -> Result<Option<usize>, GpuError> {
        T::arg_on(self, x, false).await
    }

    /// The index (in `x`) of the first largest element, NaNs skipped; `None` if every
    /// element is NaN.
    pub async fn argmax<T: Reduce>(&self, x: &GpuRef<T>) -> Result<Option<usize>, GpuError> {
        T::arg_on(self, x, true).await
    }

    /// An integer buffer's (wrapping 64-bit) sum, minimum and maximum, in one pass.
    async fn reduce_int<T: Bounds>(&self, x: &GpuRef<T>) -> Result<(i64, T, T), GpuError> {
        check_len(x, "a reduction")?;
        let b = blocks(x.len());
        let mut parts = self.scratch::<i64>(3 * b).await?;
        // The pass and the read back of its partials: one request.
        let pass = reduce_int_pass::call::<T>(shape(b), x, T::LO, T::HI, &mut parts);
        let parts = self.launch_then_read([pass], &parts).await?;
        // The blocks' partials combined here, in block order.
        let sum = parts[..b].iter().fold(0i64, |a, &v| a.wrapping_add(v));
        let lo = parts[b..2 * b].iter().fold(T::HI, |a, &v| a.min(T::from_bits64(v)));
        let hi = parts[2 * b..].iter().fold(T::LO, |a, &v| a.max(T::from_bits64(v)));
        Ok((sum, lo, hi))
    }

    /// An integer buffer's first minimum (maximum): the extreme first, then the first
    /// index holding it.
    async fn arg_int<T: Bounds>(&self, x: &GpuRef<T>, max: bool) -> Result<Option<usize>, GpuError> {
        let none = check_len(x, "an argmin/argmax")?;
        let (_, lo, hi) = self.reduce_int(x).await?;
        let b = blocks(x.len());
        let mut at = self.scratch::<u32>(b).await?;
        let target = if max { hi } else { lo };
        let pass = first_index_pass::call::<T>(shape(b), x, target, none, &mut at);
        let first = self
            .launch_then_read([pass], &at)
            .await?
            .into_iter()
            .min()
            .filter(|&i| i != none);
        Ok(first.map(|i| i as usize))
    }

    /// `x`, or — a view not starting at a multiple of four elements, which the float
    /// passes read four at a time — a copy of it in a buffer of its own.
    async fn quad_aligned<T: DType>(&self, x: &GpuRef<T>) -> Result<GpuRef<T>, GpuError> {
        if x.offset() % 4 == 0 {
            return Ok(x.clone());
        }
        let copied = self.alloc::<T>(x.len()).await?;
        self.copy(x, &copied).await?;
        Ok(copied)
    }

    async fn reduce<T: Float + DType>(&self, x: &GpuRef<T>, op: Op) -> Result<T, GpuError> {
        self.reduce_in(x, op, blocks(x.len())).await
    }

    /// [`Device::reduce`] in `b` blocks (a test gives few, so that each thread meets
    /// many vectors).
    async fn reduce_in<T: Float + DType>(&self, x: &GpuRef<T>, op: Op, b: usize) -> Result<T, GpuError> {
        check_len(x, "a reduction")?;
        let x = &self.quad_aligned(x).await?;
        let mut partial = self.scratch::<f64>(b).await?;
        // The pass and the read back of its partials (at most `MAX_BLOCKS`) in one
        // request; the partials combined here, in block order, then one rounding to T.
        let pass = reduce_pass::call::<T>(shape(b), x, &mut partial, op as u32);
        let parts = self.launch_then_read([pass], &partial).await?;
        Ok(T::from_f64(
            parts.into_iter().fold(op.identity(), |a, p| op.combine(a, p)),
        ))
    }

    async fn arg<T: Float + DType>(&self, x: &GpuRef<T>, max: bool) -> Result<Option<usize>, GpuError> {
        self.arg_in(x, max, blocks(x.len())).await
    }

    /// [`Device::arg`] in `b` blocks (as [`Device::reduce_in`]).
    async fn arg_in<T: Float + DType>(&self, x: &GpuRef<T>, max: bool, b: usize) -> Result<Option<usize>, GpuError> {
        let none = check_len(x, "an argmin/argmax")?;
        let x = &self.quad_aligned(x).await?;
        let (mut v, mut at, mut best_v, mut best) = futures::try_join!(
            self.scratch::<T>(b),
            self.scratch::<u32>(b),
            self.scratch::<T>(1),
            self.scratch::<u32>(1)
        )?;
        // The pass, then one block reducing the blocks' bests by the same rule, and the
        // winner read back: one request.
        let m = max as u32;
        let calls = [
            arg_pass::call::<T>(shape(b), x, &best, 0, none, m, &mut v, &mut at),
            arg_pass::call::<T>(shape(1), &v, &at, 1, none, m, &mut best_v, &mut best),
        ];
        let found = self.launch_then_read(calls, &best).await?[0];
        Ok((found != none).then_some(found as usize))
    }
}

impl Op {
    /// The identity of the reduction (as the kernel's `identity`).
    fn identity(self) -> f64 {
        match self {
            Op::Sum => 0.0,
            Op::Min => f64::INFINITY,
            Op::Max => f64::NEG_INFINITY,
        }
    }

    /// Two values combined (as the kernel's `combine`: IEEE min/max skip a NaN).
    fn combine(self, a: f64, b: f64) -> f64 {
        match self {
            Op::Sum => a + b,
            Op::Min => a.min(b),
            Op::Max => a.max(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Op;
    use crate::actor::ActorSystem;
    use crate::device::{Device, DeviceConfig};

    /// A few blocks over many vectors: each thread meets several vectors on its
    /// grid-stride loop, then the tail — both passes against float64 references on
    /// random data (the extremes planted twice, ties for the arg passes).
    #[tokio::test]
    async fn few_blocks_each_meet_many_vectors_and_the_tail() {
        let sys = ActorSystem::new("reduce-blocks");
        let d = Device::open(&sys, DeviceConfig::cpu()).await.unwrap();
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        };
        // 2 blocks × 256 threads over 10 007 elements: 2501 vectors (each thread four or
        // five) and a tail of 3.
        let mut v: Vec<f32> = (0..10_007).map(|_| next() as f32).collect();
        // Ties: the first wins, whether the second is met by another thread (9000)
        // or in the tail (10 005).
        let (hi, lo) = (1200, 4000);
        v[hi] = 2.0;
        v[9000] = 2.0;
        v[lo] = -2.0;
        v[10_005] = -2.0;
        let wide: Vec<f64> = v.iter().map(|&x| x as f64).collect();
        let x = d.upload(v).await.unwrap();
        let sum = d.reduce_in(&x, Op::Sum, 2).await.unwrap() as f64;
        let want: f64 = wide.iter().sum();
        assert!(
            (sum - want).abs() < 1e-5 * wide.iter().map(|x| x.abs()).sum::<f64>(),
            "{sum} vs {want}"
        );
        assert_eq!(d.reduce_in(&x, Op::Max, 2).await.unwrap(), 2.0);
        assert_eq!(d.reduce_in(&x, Op::Min, 2).await.unwrap(), -2.0);
        assert_eq!(d.arg_in(&x, true, 2).await.unwrap(), Some(hi));
        assert_eq!(d.arg_in(&x, false, 2).await.unwrap(), Some(lo));
        sys.shutdown().await;
    }
}
