//! Reductions' kernels and launch plans: what `Device::sum`, `min`, `max`, `argmin` and
//! `argmax` (`device/reduce_api.rs`) run, and how their partials combine on the host.
//!
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

use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;
use crate::kernel::dsl::{Float, Int, KernelCall};
use crate::launch::LaunchConfig;

/// Threads per block (the shared tiles' length).
pub(crate) const BLOCK: usize = 256;
/// The most blocks of a pass (their partials are read back and combined on the host).
pub(crate) const MAX_BLOCKS: usize = 1024;

/// Which reduction a pass computes (a kernel scalar).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Op {
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

/// The least and greatest values of an integer type (the identities of max and min).
pub(crate) trait Bounds: Int + DTypeBase {
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
pub(crate) fn blocks(n: usize) -> usize {
    n.div_ceil(BLOCK).clamp(1, MAX_BLOCKS)
}

/// One pass of `blocks` blocks of [`BLOCK`] threads.
pub(crate) fn shape(blocks: usize) -> LaunchConfig {
    LaunchConfig {
        grid: (blocks as u32, 1, 1),
        block: (BLOCK as u32, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Positions fit the kernels' `u32` indices (and one more value, "none").
pub(crate) fn check_len<T: DTypeBase>(x: &GpuRef<T>, what: &str) -> Result<u32, GpuError> {
    u32::try_from(x.len()).ok().filter(|&n| n < u32::MAX).ok_or_else(|| {
        GpuError::Unsupported(format!(
            "{what} of {} elements: reductions take fewer than 2^32 - 1 (reduce views of it and combine)",
            x.len()
        ))
    })
}

impl Op {
    /// The identity of the reduction (as the kernel's `identity`).
    pub(crate) fn identity(self) -> f64 {
        match self {
            Op::Sum => 0.0,
            Op::Min => f64::INFINITY,
            Op::Max => f64::NEG_INFINITY,
        }
    }

    /// Two values combined (as the kernel's `combine`: IEEE min/max skip a NaN).
    pub(crate) fn combine(self, a: f64, b: f64) -> f64 {
        match self {
            Op::Sum => a + b,
            Op::Min => a.min(b),
            Op::Max => a.max(b),
        }
    }
}

/// The float pass of reduction `op` over `x` (starting at a multiple of four elements)
/// in `b` blocks, each writing its partial to `partial` (`b` of them).
pub(crate) fn float_pass<T: Float + DTypeBase>(
    x: &GpuRef<T>,
    partial: &mut GpuRef<f64>,
    op: Op,
    b: usize,
) -> KernelCall {
    reduce_pass::call::<T>(shape(b), x, partial, op as u32)
}

/// The float partials combined in block order, then one rounding to `T`.
pub(crate) fn float_combined<T: Float>(parts: Vec<f64>, op: Op) -> T {
    T::from_f64(parts.into_iter().fold(op.identity(), |a, p| op.combine(a, p)))
}

/// The integer pass over `x` in `b` blocks: each block's wrapping sum, minimum and
/// maximum into `parts` (`3·b`: the sums, then the minima, then the maxima).
pub(crate) fn int_pass<T: Bounds>(x: &GpuRef<T>, parts: &mut GpuRef<i64>, b: usize) -> KernelCall {
    reduce_int_pass::call::<T>(shape(b), x, T::LO, T::HI, parts)
}

/// The integer partials of [`int_pass`] combined in block order: (sum, min, max).
pub(crate) fn int_combined<T: Bounds>(parts: &[i64], b: usize) -> (i64, T, T) {
    let sum = parts[..b].iter().fold(0i64, |a, &v| a.wrapping_add(v));
    let lo = parts[b..2 * b].iter().fold(T::HI, |a, &v| a.min(T::from_bits64(v)));
    let hi = parts[2 * b..].iter().fold(T::LO, |a, &v| a.max(T::from_bits64(v)));
    (sum, lo, hi)
}

/// The pass finding, per block of `b`, the first index of `x` holding `target` (`none`
/// where it has none) into `at`.
pub(crate) fn first_index<T: Bounds>(
    x: &GpuRef<T>,
    target: T,
    none: u32,
    at: &mut GpuRef<u32>,
    b: usize,
) -> KernelCall {
    first_index_pass::call::<T>(shape(b), x, target, none, at)
}

/// The buffers of a float argmin/argmax: each block's best value and index (`b` each),
/// then the winner's value and index (one each).
pub(crate) struct ArgBuffers<T: DTypeBase> {
    pub(crate) values: GpuRef<T>,
    pub(crate) at: GpuRef<u32>,
    pub(crate) best_value: GpuRef<T>,
    pub(crate) best: GpuRef<u32>,
}

/// A float argmin (`max` false) or argmax of `x` (starting at a multiple of four
/// elements; `none` its length) in `b` blocks: the pass, then one block reducing the
/// blocks' bests by the same rule into `best` (`none` where every element is NaN).
pub(crate) fn arg_calls<T: Float + DTypeBase>(
    x: &GpuRef<T>,
    bufs: &mut ArgBuffers<T>,
    none: u32,
    max: bool,
    b: usize,
) -> [KernelCall; 2] {
    let m = max as u32;
    let ArgBuffers {
        values,
        at,
        best_value,
        best,
    } = bufs;
    // The first pass reads no index buffer (`combine` 0): `best` stands in for one.
    let first = arg_pass::call::<T>(shape(b), x, &best.clone(), 0, none, m, values, at);
    [
        first,
        arg_pass::call::<T>(shape(1), values, at, 1, none, m, best_value, best),
    ]
}
