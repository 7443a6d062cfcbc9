//! Reductions as library calls: `Device::sum`, `min`, `max`, `argmin`, `argmax` over a
//! buffer (or a view) of f16, bf16, f32 or f64 (sums, minima and maxima carried in f64,
//! rounded once to the element type).
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

use crate::device::DType;
use crate::device::Device;
use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;
use crate::kernel::dsl::Float;
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

/// The identity of reduction `op`: 0, +∞, −∞.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn identity(op: u32) -> f64 {
    if op == 0 {
        0.0
    } else if op == 1 {
        f64::INFINITY
    } else {
        f64::NEG_INFINITY
    }
}

/// The pass of a sum, min or max: block `b` writes the reduction of its grid-stride
/// share of `x` to `out[b]`, in f64 — every element type widens exactly, so f16 and
/// bf16 sums do not lose their small terms and an f32 sum rounds once, at the end —
/// reading four elements per load (16 bytes for f32: what reaches the memory
/// bandwidth); `x` starts at a multiple of four elements.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn reduce_pass<T: Float>(x: &[T], out: &mut [f64], op: u32) {
    let mut tile = shared_array::<f64, 256>();
    let t = thread_idx_x();
    let mut acc = identity(op);
    let quads = x.len() / 4;
    let mut q = global_index();
    while q < quads {
        let v: Vec4<T> = x.load4(q);
        let pair = combine(op, v.x.to_f64(), v.y.to_f64());
        acc = combine(op, acc, combine(op, pair, combine(op, v.z.to_f64(), v.w.to_f64())));
        q += grid_stride();
    }
    let tail = quads * 4 + global_index();
    if tail < x.len() {
        acc = combine(op, acc, x[tail].to_f64());
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

/// Whether candidate `(c, j)` beats the best so far `(v, k)` of an argmax (`max` 1) or
/// argmin: a larger (smaller) value, or an equal one at a smaller index. NaNs (`c != c`)
/// and empty slots (`none`) never win; anything beats an empty best.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn beats<T: Float>(max: u32, none: u32, c: T, j: u32, v: T, k: u32) -> bool {
    let better = (max == 1 && c > v) || (max == 0 && c < v) || (c == v && j < k);
    j != none && c == c && (k == none || better)
}

/// The pass of an argmin (`max` 0) or argmax: block `b` writes the best value of
/// its grid-stride share of `x` and that value's index to `out[b]`, `out_at[b]` — the
/// first index among equals; `none` where the share holds only NaNs.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn arg_pass<T: Float>(x: &[T], none: u32, max: u32, out: &mut [T], out_at: &mut [u32]) {
    let mut best_v = shared_array::<T, 256>();
    let mut best_i = shared_array::<u32, 256>();
    let t = thread_idx_x();
    let mut v = T::zero();
    let mut k: u32 = none;
    let mut i = global_index();
    while i < x.len() {
        if beats(max, none, x[i], i as u32, v, k) {
            v = x[i];
            k = i as u32;
        }
        i += grid_stride();
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
    /// shape: the same bits on every run.
    pub async fn sum<T: Float + DType>(&self, x: &GpuRef<T>) -> Result<T, GpuError> {
        self.reduce(x, Op::Sum).await
    }

    /// The smallest element of `x`, NaNs skipped (+∞ if all are NaN).
    pub async fn min<T: Float + DType>(&self, x: &GpuRef<T>) -> Result<T, GpuError> {
        self.reduce(x, Op::Min).await
    }

    /// The largest element of `x`, NaNs skipped (−∞ if all are NaN).
    pub async fn max<T: Float + DType>(&self, x: &GpuRef<T>) -> Result<T, GpuError> {
        self.reduce(x, Op::Max).await
    }

    /// The index (in `x`) of the first smallest element, NaNs skipped; `None` if every
    /// element is NaN.
    pub async fn argmin<T: Float + DType>(&self, x: &GpuRef<T>) -> Result<Option<usize>, GpuError> {
        self.arg(x, false).await
    }

    /// The index (in `x`) of the first largest element, NaNs skipped; `None` if every
    /// element is NaN.
    pub async fn argmax<T: Float + DType>(&self, x: &GpuRef<T>) -> Result<Option<usize>, GpuError> {
        self.arg(x, true).await
    }

    async fn reduce<T: Float + DType>(&self, x: &GpuRef<T>, op: Op) -> Result<T, GpuError> {
        check_len(x, "a reduction")?;
        // The pass reads four elements at a time from a multiple of four: a view
        // starting elsewhere is copied to a buffer of its own first.
        let copied;
        let x = if x.offset() % 4 == 0 {
            x
        } else {
            copied = self.alloc::<T>(x.len()).await?;
            self.copy(x, &copied).await?;
            &copied
        };
        let b = blocks(x.len());
        let mut partial = self.alloc::<f64>(b).await?;
        reduce_pass::launch::<T>(self, shape(b), x, &mut partial, op as u32).await?;
        // The partials (at most `MAX_BLOCKS`) combined here, in block order: one read
        // back instead of a second launch and a read back; then one rounding to T.
        let parts = self.download(&partial).await?;
        Ok(T::from_f64(
            parts.into_iter().fold(op.identity(), |a, p| op.combine(a, p)),
        ))
    }

    async fn arg<T: Float + DType>(&self, x: &GpuRef<T>, max: bool) -> Result<Option<usize>, GpuError> {
        let none = check_len(x, "an argmin/argmax")?;
        let b = blocks(x.len());
        let (mut v, mut at) = (self.alloc::<T>(b).await?, self.alloc::<u32>(b).await?);
        arg_pass::launch::<T>(self, shape(b), x, none, max as u32, &mut v, &mut at).await?;
        let (v, at) = (self.download(&v).await?, self.download(&at).await?);
        // The blocks' bests combined here as the kernel combines threads' (`beats`).
        let mut best: Option<(T, u32)> = None;
        for (c, j) in v.into_iter().zip(at) {
            if j == none {
                continue;
            }
            let wins = match best {
                None => true,
                Some((bv, bj)) => (max && c > bv) || (!max && c < bv) || (c == bv && j < bj),
            };
            if wins {
                best = Some((c, j));
            }
        }
        Ok(best.map(|(_, j)| j as usize))
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
