//! Prefix sums as library calls: `Device::inclusive_scan` and `Device::exclusive_scan` of a
//! buffer (or view) of f16, bf16, f32 or f64 into another (or into itself).
//!
//! Written as `#[kernel]`s, like the reductions (no CUDA library cudarc reaches scans).
//!
//! Floats scan in one pass with decoupled look-back (Merrill & Garland, 2016): each block
//! takes the next tile (8192 elements, or 16 384 for large inputs) in the order blocks
//! start (a ticket), totals it in f64 (four elements per 16-byte load), publishes the total, and
//! its first warp looks back over the tiles before it, 32 at a time, until one has
//! published its inclusive prefix; the block then reads its tile again (from cache, as
//! long as tiles stay within it) and scans it from that offset, rounding once per element
//! straight into the output: one launch, each element written once, where
//! reduce-then-scan took three launches and read every element twice from memory.
//!
//! The same bits on every run: a tile's offset is the *left fold* of the tile totals
//! before it — the inclusive prefix found first, then the totals after it, added in tile
//! order — and a left fold continued from one of its own intermediate results gives the
//! same bits however far back the look-back went. Totals inside a tile are added in an
//! order fixed by the block shape. Every sum is carried in f64, so f16/bf16 scans keep
//! their small terms.
//!
//! Integers (i8, i16, i32, i64 and their unsigned twins) scan into 64-bit outputs
//! (`i64`, `u64` for the unsigned types: what [`Reduce::Sum`](crate::device::Reduce)
//! names), exact while they fit and wrapping beyond, the same way (in wrapping 64-bit
//! integers, exactly).

use std::future::Future;

use crate::device::Device;
use crate::device::{DType, Reduce};
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;
use crate::kernel::dsl::{Float, Int, KernelCall};
use crate::launch::LaunchConfig;

/// Elements a block of an integer scan takes: 256 threads × 4.
const TILE: usize = 1024;

/// The one block that turns tile totals into offsets.
const ONE_BLOCK: LaunchConfig = LaunchConfig {
    grid: (1, 1, 1),
    block: (1024, 1, 1),
    shared_mem_bytes: 0,
};

/// A float scan's 16-byte loads per thread: each block's tile is 256 threads × this × 4
/// elements. The look-back reads 32 tiles per memory round trip, so small tiles make it
/// the bound, while the tile is read twice — totalled, then scanned — and past 16 384
/// elements the second read misses the cache (the measured sizes: BENCHMARKS.md,
/// "Single-pass float scans").
fn float_quads_per_thread(n: usize) -> usize {
    if n >= 1 << 22 {
        16
    } else {
        8
    }
}

/// The single pass of a float scan (see the module docs). `status[0]` hands out tiles
/// (a ticket: tile = ticket mod tiles, epoch = ticket / tiles, so a reused status buffer
/// needs no clearing: every launch on it takes exactly `tiles` tickets); `status[1 + t]`
/// is tile `t`'s state beside the launch's epoch (`epoch << 2 | state`: nothing yet, its
/// total, its inclusive prefix); `sums[t]` its total and `sums[tiles + t]` its inclusive
/// prefix.
/// Each thread takes `per_thread` quads of four elements (the tile: 1024 · `per_thread`);
/// `vec4` = 1: both `x` and `out` start at a multiple of four elements (16-byte loads).
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn scan_single<T: Float>(
    x: &[T],
    status: &mut [u64],
    sums: &mut [f64],
    per_thread: u32,
    exclusive: u32,
    vec4: u32,
    out: &mut [T],
) {
    const TOTAL: u64 = 1;
    const PREFIX: u64 = 2;
    let mut warps = shared_array::<f64, 8>();
    let mut shared = shared_array::<f64, 2>();
    let mut window = shared_array::<f64, 32>();
    let mut ticket = shared_array::<u64, 1>();
    let t = thread_idx_x();
    let tiles = (status.len() - 1) as u64;
    if t == 0 {
        ticket[0] = status.atomic_add(0, 1u64);
    }
    sync_threads();
    let tile = ticket[0] % tiles;
    let epoch = ticket[0] / tiles;
    let n = x.len();
    let q = per_thread as usize;
    let size = 1024 * q;
    let first = tile as usize * size + t * 4 * q;
    let quads = vec4 == 1 && (tile as usize + 1) * size <= n;
    // This thread's 4·q elements, in order.
    let mut s: f64 = 0.0;
    if quads {
        let mut k: usize = 0;
        while k < q {
            let v: Vec4<T> = x.load4(first / 4 + k);
            s += v.x.to_f64();
            s += v.y.to_f64();
            s += v.z.to_f64();
            s += v.w.to_f64();
            k += 1;
        }
    } else {
        let mut k: usize = 0;
        while k < 4 * q {
            if first + k < n {
                s += x[first + k].to_f64();
            }
            k += 1;
        }
    }
    // The threads' sums scanned across each warp, then the warps' in order.
    let lane = lane_id();
    let mut v = s;
    let mut d: u32 = 1;
    while d < 32 {
        let up = shfl_up(v, d);
        if lane >= d {
            v += up;
        }
        d *= 2;
    }
    let mut before = shfl_up(v, 1);
    if lane == 0 {
        before = 0.0;
    }
    if lane == 31 {
        warps[t / 32] = v;
    }
    sync_threads();
    // Warp 0 finds the tile's offset: the left fold of the totals before it.
    if t < 32 {
        let me = tile as usize;
        if t == 0 {
            // The warps' exclusive offsets and the tile's total, in warp order, published.
            let mut run: f64 = warps[0];
            warps[0] = 0.0;
            let mut w: usize = 1;
            while w < 8 {
                let total = warps[w];
                warps[w] = run;
                run += total;
                w += 1;
            }
            shared[1] = run;
            if me == 0 {
                sums[tiles as usize] = run;
                thread_fence();
                status.atomic_exch(1, (epoch << 2) | PREFIX);
            } else {
                sums[me] = run;
                thread_fence();
                status.atomic_exch(1 + me, (epoch << 2) | TOTAL);
            }
            shared[0] = 0.0;
        }
        sync_warp();
        if me > 0 {
            // Decoupled look-back, 32 tiles at a time: the nearest tile with its prefix
            // out, every tile after it at least with its total (else the window is read
            // again). States and sums are read with `atomic_load` (coherent with the
            // writers' fences; many blocks read one tile's state without queueing).
            let lane = lane_id() as i64;
            let mut end = me as i64;
            let mut found: i64 = -1;
            while found < 0 {
                let k = end - 32 + lane;
                let mut state: u64 = 0;
                if k >= 0 {
                    let seen = status.atomic_load(1 + k as usize);
                    if seen >> 2 == epoch {
                        state = seen & 3;
                    }
                }
                let mut nearest: i64 = -1;
                if k >= 0 && state == PREFIX {
                    nearest = lane;
                }
                let mut m: u32 = 16;
                while m > 0 {
                    let other = shfl_xor(nearest, m);
                    if other > nearest {
                        nearest = other;
                    }
                    m /= 2;
                }
                let settled = warp_all(k < 0 || state != 0 || lane <= nearest);
                if settled {
                    if nearest >= 0 {
                        found = end - 32 + nearest;
                    } else {
                        end -= 32;
                    }
                }
            }
            thread_fence();
            // The fold, in tile order: the prefix found, then each total after it —
            // read 32 at a time, added one by one by lane 0.
            let mut offset: f64 = 0.0;
            if lane == 0 {
                offset = sums.atomic_load(tiles as usize + found as usize);
            }
            let mut from = found + 1;
            while from < me as i64 {
                let k = from + lane;
                let mut total: f64 = 0.0;
                if k < me as i64 {
                    total = sums.atomic_load(k as usize);
                }
                window[lane as usize] = total;
                sync_warp();
                if lane == 0 {
                    let mut q: i64 = 0;
                    while q < 32 && from + q < me as i64 {
                        offset += window[q as usize];
                        q += 1;
                    }
                }
                sync_warp();
                from += 32;
            }
            if lane == 0 {
                sums[tiles as usize + me] = offset + shared[1];
                thread_fence();
                status.atomic_exch(1 + me, (epoch << 2) | PREFIX);
                shared[0] = offset;
            }
        }
    }
    sync_threads();
    // This thread's elements again (from cache), each written once from its offset.
    let mut run = shared[0] + warps[t / 32] + before;
    if quads {
        let mut k: usize = 0;
        while k < q {
            let v: Vec4<T> = x.load4(first / 4 + k);
            let mut w: Vec4<T> = v;
            if exclusive == 1 {
                w.x = T::from_f64(run);
                run += v.x.to_f64();
                w.y = T::from_f64(run);
                run += v.y.to_f64();
                w.z = T::from_f64(run);
                run += v.z.to_f64();
                w.w = T::from_f64(run);
                run += v.w.to_f64();
            } else {
                run += v.x.to_f64();
                w.x = T::from_f64(run);
                run += v.y.to_f64();
                w.y = T::from_f64(run);
                run += v.z.to_f64();
                w.z = T::from_f64(run);
                run += v.w.to_f64();
                w.w = T::from_f64(run);
            }
            out.store4(first / 4 + k, w);
            k += 1;
        }
    } else {
        let mut k: usize = 0;
        while k < 4 * q {
            if first + k < n {
                let e = x[first + k].to_f64();
                if exclusive == 1 {
                    out[first + k] = T::from_f64(run);
                    run += e;
                } else {
                    run += e;
                    out[first + k] = T::from_f64(run);
                }
            }
            k += 1;
        }
    }
}

/// Pass 1 of an integer scan: block `b` totals its tile of `x` (wrapping 64-bit) into
/// `totals[b]` — four elements per thread, then the threads' sums across the block.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn int_tile_totals<T: Int>(x: &[T], totals: &mut [i64]) {
    let mut part = shared_array::<i64, 256>();
    let t = thread_idx_x();
    let base = block_idx_x() * 1024 + t * 4;
    let mut s: i64 = 0;
    let mut k: usize = 0;
    while k < 4 {
        if base + k < x.len() {
            s = s.wrapping_add(x[base + k].to_i64());
        }
        k += 1;
    }
    part[t] = s;
    sync_threads();
    let mut half: usize = 128;
    while half > 0 {
        if t < half {
            part[t] = part[t].wrapping_add(part[t + half]);
        }
        sync_threads();
        half /= 2;
    }
    if t == 0 {
        totals[block_idx_x()] = part[0];
    }
}

/// Pass 2: block `b` scans its tile of `x` (wrapping 64-bit; exclusive when `exclusive`
/// is 1) from the tile's offset `offsets[b]` into `out`, each sum's bits as `O`.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn int_tile_scan<T: Int, O: Int>(x: &[T], offsets: &[i64], exclusive: u32, out: &mut [O]) {
    let mut part = shared_array::<i64, 256>();
    let t = thread_idx_x();
    let base = block_idx_x() * 1024 + t * 4;
    let mut a0: i64 = 0;
    let mut a1: i64 = 0;
    let mut a2: i64 = 0;
    let mut a3: i64 = 0;
    if base < x.len() {
        a0 = x[base].to_i64();
    }
    if base + 1 < x.len() {
        a1 = x[base + 1].to_i64();
    }
    if base + 2 < x.len() {
        a2 = x[base + 2].to_i64();
    }
    if base + 3 < x.len() {
        a3 = x[base + 3].to_i64();
    }
    let s1 = a0.wrapping_add(a1);
    let s2 = s1.wrapping_add(a2);
    let s3 = s2.wrapping_add(a3);
    part[t] = s3;
    sync_threads();
    // The threads' sums, scanned across the block (Hillis–Steele, inclusive).
    let mut off: usize = 1;
    while off < 256 {
        let mut add: i64 = 0;
        if t >= off {
            add = part[t - off];
        }
        sync_threads();
        part[t] = part[t].wrapping_add(add);
        sync_threads();
        off *= 2;
    }
    let mut before = offsets[block_idx_x()];
    if t > 0 {
        before = before.wrapping_add(part[t - 1]);
    }
    let mut e0 = before.wrapping_add(a0);
    let mut e1 = before.wrapping_add(s1);
    let mut e2 = before.wrapping_add(s2);
    let mut e3 = before.wrapping_add(s3);
    if exclusive == 1 {
        e0 = before;
        e1 = before.wrapping_add(a0);
        e2 = before.wrapping_add(s1);
        e3 = before.wrapping_add(s2);
    }
    if base < out.len() {
        out[base] = O::from_i64(e0);
    }
    if base + 1 < out.len() {
        out[base + 1] = O::from_i64(e1);
    }
    if base + 2 < out.len() {
        out[base + 2] = O::from_i64(e2);
    }
    if base + 3 < out.len() {
        out[base + 3] = O::from_i64(e3);
    }
}

/// An integer scan's tile totals (one per [`TILE`] elements) turned in place into the
/// tiles' offsets — their exclusive prefix sums, wrapping 64-bit — by one block of 1024
/// threads: each sums a contiguous chunk in order, the chunk sums are scanned across the
/// block, each chunk is rewritten from its offset. No trip to the host between the
/// passes.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn int_tile_offsets(totals: &mut [i64]) {
    let mut part = shared_array::<i64, 1024>();
    let t = thread_idx_x();
    let chunk = (totals.len() + 1023) / 1024;
    let first = t * chunk;
    let mut sum: i64 = 0;
    let mut i = first;
    while i < first + chunk && i < totals.len() {
        sum = sum.wrapping_add(totals[i]);
        i += 1;
    }
    part[t] = sum;
    sync_threads();
    let mut off: usize = 1;
    while off < 1024 {
        let mut add: i64 = 0;
        if t >= off {
            add = part[t - off];
        }
        sync_threads();
        part[t] = part[t].wrapping_add(add);
        sync_threads();
        off *= 2;
    }
    let mut run: i64 = 0;
    if t > 0 {
        run = part[t - 1];
    }
    i = first;
    while i < first + chunk && i < totals.len() {
        let total = totals[i];
        totals[i] = run;
        run = run.wrapping_add(total);
        i += 1;
    }
}

/// The element types of the prefix sums, and how each scans (its output: [`Reduce::Sum`]).
pub trait Scan: Reduce<Sum: DType> {
    /// `out` = the scan of `x` on `dev`.
    #[doc(hidden)]
    fn scan_on<'a>(
        dev: &'a Device,
        x: &'a GpuRef<Self>,
        out: &'a GpuRef<Self::Sum>,
        exclusive: bool,
    ) -> impl Future<Output = Result<(), GpuError>> + Send + 'a;
}

macro_rules! scan_float {
    ($($t:ty),*) => {$(impl Scan for $t {
        fn scan_on<'a>(dev: &'a Device, x: &'a GpuRef<Self>, out: &'a GpuRef<Self>, exclusive: bool)
            -> impl Future<Output = Result<(), GpuError>> + Send + 'a {
            dev.scan(x, out, exclusive)
        }
    })*};
}

scan_float!(half::f16, half::bf16, f32, f64);

macro_rules! scan_int {
    ($($t:ty => $o:ty),*) => {$(impl Scan for $t {
        fn scan_on<'a>(dev: &'a Device, x: &'a GpuRef<Self>, out: &'a GpuRef<$o>, exclusive: bool)
            -> impl Future<Output = Result<(), GpuError>> + Send + 'a {
            dev.scan_int::<$t, $o>(x, out, exclusive)
        }
    })*};
}

scan_int!(i8 => i64, i16 => i64, i32 => i64, i64 => i64, u8 => u64, u16 => u64, u32 => u64, u64 => u64);

/// Refuses an output of another length than the input.
fn same_len(n: usize, out: usize) -> Result<(), GpuError> {
    if n == out {
        return Ok(());
    }
    Err(GpuError::InvalidArgument(Invalid::length(
        format!("a scan of {n} elements into {out}"),
        "out",
        n,
        out,
    )))
}

/// The tiles (and so the `totals`) of a scan of `n` elements.
pub(crate) fn scan_tiles(n: usize) -> usize {
    n.div_ceil(TILE)
}

/// The three launches of an integer scan of `x` into `out` (another buffer, as long) —
/// tiles totalled into `totals` (one per [`scan_tiles`]), turned into offsets by one
/// block, each tile scanned from its offset — for a caller running them in a sequence of
/// its own, before or after other launches.
pub(crate) fn int_scan_calls<T: Int + DType, O: Int + DType>(
    x: &GpuRef<T>,
    out: &GpuRef<O>,
    exclusive: bool,
    totals: &mut GpuRef<i64>,
) -> [KernelCall; 3] {
    let shape = LaunchConfig {
        grid: (scan_tiles(x.len()) as u32, 1, 1),
        block: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut out = out.clone();
    [
        int_tile_totals::call::<T>(shape, x, totals),
        int_tile_offsets::call(ONE_BLOCK, totals),
        int_tile_scan::call::<T, O>(shape, x, totals, exclusive as u32, &mut out),
    ]
}

impl Device {
    /// `out[i] = x[0] + … + x[i]` (a buffer or view of as many elements as `x`; `x`
    /// itself for an in-place scan where the types allow). Floats: carried in f64 and
    /// rounded once per element, into the same type; integers: into 64-bit outputs
    /// (`i64`, `u64` for unsigned), exact while they fit. The same bits on every run.
    pub async fn inclusive_scan<T: Scan>(&self, x: &GpuRef<T>, out: &GpuRef<T::Sum>) -> Result<(), GpuError> {
        T::scan_on(self, x, out, false).await
    }

    /// `out[i] = x[0] + … + x[i−1]` (`out[0] = 0`), as [`Device::inclusive_scan`].
    pub async fn exclusive_scan<T: Scan>(&self, x: &GpuRef<T>, out: &GpuRef<T::Sum>) -> Result<(), GpuError> {
        T::scan_on(self, x, out, true).await
    }

    async fn scan_int<T: Int + DType, O: Int + DType>(
        &self,
        x: &GpuRef<T>,
        out: &GpuRef<O>,
        exclusive: bool,
    ) -> Result<(), GpuError> {
        let n = x.len();
        same_len(n, out.len())?;
        let x = &self.scan_input(x, out.id()).await?;
        let mut totals = self.scratch::<i64>(scan_tiles(n)).await?;
        // Totals, their offsets, the tiles scanned: one sequence, waited for once.
        self.launch_all(int_scan_calls(x, out, exclusive, &mut totals)).await
    }

    /// `x` itself, or — an in-place scan, `x` in `out`'s buffer — a copy of it: the second
    /// pass reads the input while writing the output, and one launch takes a buffer once.
    async fn scan_input<T: DType>(&self, x: &GpuRef<T>, out: u64) -> Result<GpuRef<T>, GpuError> {
        if x.id() != out {
            return Ok(x.clone());
        }
        let copied = self.alloc::<T>(x.len()).await?;
        self.copy(x, &copied).await?;
        Ok(copied)
    }

    async fn scan<T: Float + DType>(&self, x: &GpuRef<T>, out: &GpuRef<T>, exclusive: bool) -> Result<(), GpuError> {
        let n = x.len();
        same_len(n, out.len())?;
        let x = &self.scan_input(x, out.id()).await?;
        if n == 0 {
            return Ok(());
        }
        let per_thread = float_quads_per_thread(n);
        let tiles = n.div_ceil(1024 * per_thread);
        let shape = LaunchConfig {
            grid: (tiles as u32, 1, 1),
            block: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // The ticket and each tile's state (zeroed when new; a reused one — only ever
        // this kernel's — is told apart by the epoch), and each tile's total and
        // inclusive prefix (written before read).
        let mut status = self.owned_scratch::<u64>("float scan", tiles + 1).await?;
        let mut sums = self.scratch::<f64>(2 * tiles).await?;
        let vec4 = x.offset() % 4 == 0 && out.offset() % 4 == 0;
        let mut out = out.clone();
        self.launch_all([scan_single::call::<T>(
            shape,
            x,
            &mut status,
            &mut sums,
            per_thread as u32,
            exclusive as u32,
            vec4 as u32,
            &mut out,
        )])
        .await
    }
}
