//! Prefix sums' kernels and launch plans: what `Device::inclusive_scan` and
//! `Device::exclusive_scan` (`device/scan_api.rs`) run, and the integer scan other
//! compositions reuse (dense → CSR's offsets).
//!
//!
//! Written as `#[kernel]`s, like the reductions (no CUDA library cudarc reaches scans).
//!
//! Floats scan in one pass with decoupled look-back (Merrill & Garland, 2016): each block
//! takes the next tile (16 384 elements; 8192 of f64) in the order blocks start (a
//! ticket), reads it once into registers (each warp 32 neighbouring 4-element vectors at a time), totals
//! it in f64, publishes the total, and its first warp looks back over the tiles before
//! it, 32 at a time — a tile's state and value in one 64-bit word, one read each, the
//! windows of totals only kept in shared memory for the fold — until one has published
//! its inclusive prefix; the block then scans the tile from
//! that offset out of its registers, rounding once per element straight into the
//! output: one launch, each element read once and written once.
//!
//! The same bits on every run: a tile's offset is the *left fold* of the tile totals
//! before it — the inclusive prefix found first, then the totals after it, added in tile
//! order, each step rounded as a published value is (to 48 bits of mantissa) — and a
//! left fold continued from one of its own intermediate results gives the same bits
//! however far back the look-back went. Sums inside a tile are added in an order fixed
//! by the block shape. Every sum is carried in f64 (the tiles' offsets in f64 rounded
//! to 48 bits), so f16/bf16/f32 scans keep their small terms.
//!
//! Integers (i8, i16, i32, i64 and their unsigned twins) scan into 64-bit outputs
//! (`i64`, `u64` for the unsigned types: what the device tier's `Reduce::Sum`
//! names), exact while they fit and wrapping beyond, the same way (in wrapping 64-bit
//! integers, exactly).

use crate::dtype::DTypeBase;
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

/// Elements each thread of a float scan holds in registers: eight 4-element vectors.
const SCAN_ITEMS: usize = 32;

/// Threads of a float scan's block: 512 for types of up to four bytes (a tile of 16 384
/// elements; their 32 elements a thread fit in the 128 registers that many threads
/// allow), 256 for f64 (8192).
fn scan_threads<T>() -> usize {
    if std::mem::size_of::<T>() <= 4 {
        512
    } else {
        256
    }
}

/// A tile descriptor's low bits: two of the launch's epoch, then two of its state.
/// The value beside them is an f64 rounded to 48 bits of mantissa (to nearest; its four
/// lowest bits given up to the tags): the state and the value are one 64-bit word, read
/// and written whole, so a look-back reads both in one round trip. (A 16-byte pair of
/// words would keep the whole f64, but the PTX memory model does not make a vector
/// access indivisible.)
#[atomr_accel_cuda_macros::device(crate = crate)]
fn scan_word(value: f64, epoch: u64, state: u64) -> u64 {
    let mut bits = value.to_bits();
    if (bits >> 52) & 0x7FF != 0x7FF {
        // Half of the dropped bits' weight: a carry out of the mantissa raises the
        // exponent, as rounding does.
        bits += 8;
    }
    (bits & 0xFFFF_FFFF_FFFF_FFF0u64) | ((epoch & 3) << 2) | state
}

/// A descriptor's value (see [`scan_word`]); also how every fold step rounds, so that
/// a fold continued from a published prefix gives the same bits as one from further
/// back.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn scan_value(word: u64) -> f64 {
    f64::from_bits(word & 0xFFFF_FFFF_FFFF_FFF0u64)
}

/// `x` rounded as a published tile value is (see [`scan_word`]): how every step of a
/// tile offset's fold rounds.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn scan_rounded(x: f64) -> f64 {
    scan_value(scan_word(x, 0, 0))
}

/// The single pass of a float scan (see the module docs). `status[0]` hands out tiles
/// (a ticket: tile = ticket mod tiles, epoch = ticket / tiles, so a reused status buffer
/// needs no clearing — every launch on it takes exactly `tiles` tickets); `status[1 + t]`
/// is tile `t`'s descriptor ([`scan_word`]: nothing yet, its total, or its inclusive
/// prefix, with the launch's epoch).
///
/// A block of `THREADS` threads takes a tile of `THREADS × 32` elements. Each warp takes
/// 256 consecutive 4-element vectors of the tile, 32 at a time (each step one coalesced
/// read), and each thread holds its eight vectors in registers from the load to the
/// store (`vec4` = 1: both `x` and `out` start at a multiple of four elements; else
/// element by element): the input is read once.
#[atomr_accel_cuda_macros::kernel(crate = crate, consts(THREADS = [256, 512]), launch_bounds = THREADS)]
fn scan_tile<T: Float, const THREADS: u32>(x: &[T], status: &mut [u64], exclusive: u32, vec4: u32, out: &mut [T]) {
    const TOTAL: u64 = 1;
    const PREFIX: u64 = 2;
    // One total per warp: up to 16 (512 threads).
    let mut warps = shared_array::<f64, 16>();
    let mut shared = shared_array::<f64, 2>();
    let mut window = shared_array::<u64, 32>();
    // The last 16 windows a look-back stepped back over (512 words), for its fold.
    let mut walked_over = shared_array::<u64, 512>();
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
    let lane = lane_id();
    // This warp's first vector; step k reads vectors base + 32k + lane.
    let vectors = THREADS as usize * 8;
    let base = tile as usize * vectors + (t / 32) * 256;
    let quads = vec4 == 1 && (tile as usize + 1) * vectors * 4 <= n;
    let mut v0: Vec4<T> = Vec4::splat(T::zero());
    let mut v1: Vec4<T> = Vec4::splat(T::zero());
    let mut v2: Vec4<T> = Vec4::splat(T::zero());
    let mut v3: Vec4<T> = Vec4::splat(T::zero());
    let mut v4: Vec4<T> = Vec4::splat(T::zero());
    let mut v5: Vec4<T> = Vec4::splat(T::zero());
    let mut v6: Vec4<T> = Vec4::splat(T::zero());
    let mut v7: Vec4<T> = Vec4::splat(T::zero());
    let at = base + lane as usize;
    if quads {
        // Eight independent loads, all in flight at once.
        v0 = x.load4(at);
        v1 = x.load4(at + 32);
        v2 = x.load4(at + 64);
        v3 = x.load4(at + 96);
        v4 = x.load4(at + 128);
        v5 = x.load4(at + 160);
        v6 = x.load4(at + 192);
        v7 = x.load4(at + 224);
    } else {
        // The last tile, or an input not on a 4-element boundary: element by element.
        let mut k: usize = 0;
        while k < 8 {
            let i = 4 * (at + 32 * k);
            let mut q: Vec4<T> = Vec4::splat(T::zero());
            if i < n {
                q.x = x[i];
            }
            if i + 1 < n {
                q.y = x[i + 1];
            }
            if i + 2 < n {
                q.z = x[i + 2];
            }
            if i + 3 < n {
                q.w = x[i + 3];
            }
            if k == 0 {
                v0 = q;
            } else if k == 1 {
                v1 = q;
            } else if k == 2 {
                v2 = q;
            } else if k == 3 {
                v3 = q;
            } else if k == 4 {
                v4 = q;
            } else if k == 5 {
                v5 = q;
            } else if k == 6 {
                v6 = q;
            } else {
                v7 = q;
            }
            k += 1;
        }
    }
    let mut s: f64 = 0.0;
    s += v0.x.to_f64() + v0.y.to_f64() + v0.z.to_f64() + v0.w.to_f64();
    s += v1.x.to_f64() + v1.y.to_f64() + v1.z.to_f64() + v1.w.to_f64();
    s += v2.x.to_f64() + v2.y.to_f64() + v2.z.to_f64() + v2.w.to_f64();
    s += v3.x.to_f64() + v3.y.to_f64() + v3.z.to_f64() + v3.w.to_f64();
    s += v4.x.to_f64() + v4.y.to_f64() + v4.z.to_f64() + v4.w.to_f64();
    s += v5.x.to_f64() + v5.y.to_f64() + v5.z.to_f64() + v5.w.to_f64();
    s += v6.x.to_f64() + v6.y.to_f64() + v6.z.to_f64() + v6.w.to_f64();
    s += v7.x.to_f64() + v7.y.to_f64() + v7.z.to_f64() + v7.w.to_f64();
    // The warp's total (in lane 0: a fixed order), then the warps' in order.
    let mut m: u32 = 16;
    while m > 0 {
        s += shfl_down(s, m);
        m /= 2;
    }
    if lane == 0 {
        warps[t / 32] = s;
    }
    sync_threads();
    // Warp 0 finds the tile's offset: the fold of the totals before it.
    if t < 32 {
        let me = tile as usize;
        if t == 0 {
            // The warps' exclusive offsets and the tile's total, in warp order, published.
            let mut run: f64 = warps[0];
            warps[0] = 0.0;
            let mut w: usize = 1;
            while w < THREADS as usize / 32 {
                let total = warps[w];
                warps[w] = run;
                run += total;
                w += 1;
            }
            let total = scan_rounded(run);
            shared[1] = total;
            shared[0] = 0.0;
            let mut state = TOTAL;
            if me == 0 {
                state = PREFIX;
            }
            status.atomic_exch(1 + me, scan_word(total, epoch, state));
        }
        sync_warp();
        if me > 0 {
            // Decoupled look-back, 32 tiles at a time, a tile's state and value in one
            // word: the nearest tile with its prefix out, every tile after it at least
            // with its total (else the window is read again). Windows with totals only
            // are kept (the nearest 16) for the fold.
            let lane = lane_id() as i64;
            let mut end = me as i64;
            let mut found: i64 = -1;
            let mut mine: u64 = 0;
            let mut walked: i64 = 0;
            while found < 0 {
                let k = end - 32 + lane;
                let mut state: u64 = 0;
                let mut seen: u64 = 0;
                if k >= 0 {
                    seen = status.atomic_load(1 + k as usize);
                    if (seen >> 2) & 3 == epoch & 3 {
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
                        mine = seen;
                    } else {
                        if walked < 16 {
                            walked_over[(walked * 32 + lane) as usize] = seen;
                        }
                        walked += 1;
                        end -= 32;
                    }
                }
            }
            // The fold, in tile order, each step rounded as published: the prefix found,
            // the totals after it in its window, then those of the windows stepped back
            // over, oldest first (window j ends 32j tiles before this one: kept, or read
            // again past the 16 kept — a tile whose prefix has come out since gives it
            // instead) — by lane 0.
            window[lane as usize] = mine;
            sync_warp();
            let mut offset: f64 = 0.0;
            if lane == 0 {
                let mut q = found - (end - 32);
                offset = scan_value(window[q as usize]);
                q += 1;
                while q < 32 && end - 32 + q < me as i64 {
                    offset = scan_rounded(offset + scan_value(window[q as usize]));
                    q += 1;
                }
            }
            sync_warp();
            let mut j = walked - 1;
            while j >= 0 {
                let kept = j < 16;
                if !kept {
                    window[lane as usize] = status.atomic_load(1 + (me as i64 - 32 * (j + 1) + lane) as usize);
                }
                sync_warp();
                if lane == 0 {
                    let mut q: i64 = 0;
                    while q < 32 {
                        let mut word = window[q as usize];
                        if kept {
                            word = walked_over[(j * 32 + q) as usize];
                        }
                        if word & 3 == PREFIX {
                            // Read again, its prefix out since (over its total, in
                            // place): the fold up to it, as it would be.
                            offset = scan_value(word);
                        } else {
                            offset = scan_rounded(offset + scan_value(word));
                        }
                        q += 1;
                    }
                }
                sync_warp();
                j -= 1;
            }
            if lane == 0 {
                status.atomic_exch(1 + me, scan_word(offset + shared[1], epoch, PREFIX));
                shared[0] = offset;
            }
        }
    }
    sync_threads();
    // Each step: the vectors' sums scanned across the warp, each element written once
    // from its offset, rounded once.
    let mut carry = shared[0] + warps[t / 32];
    let mut k: usize = 0;
    while k < 8 {
        let mut q: Vec4<T> = v7;
        if k == 0 {
            q = v0;
        } else if k == 1 {
            q = v1;
        } else if k == 2 {
            q = v2;
        } else if k == 3 {
            q = v3;
        } else if k == 4 {
            q = v4;
        } else if k == 5 {
            q = v5;
        } else if k == 6 {
            q = v6;
        }
        let sum = q.x.to_f64() + q.y.to_f64() + q.z.to_f64() + q.w.to_f64();
        let mut inclusive = sum;
        let mut d: u32 = 1;
        while d < 32 {
            let up = shfl_up(inclusive, d);
            if lane >= d {
                inclusive += up;
            }
            d *= 2;
        }
        let mut run = shfl_up(inclusive, 1);
        if lane == 0 {
            run = 0.0;
        }
        run += carry;
        carry += shfl(inclusive, 31);
        let mut w: Vec4<T> = q;
        if exclusive == 1 {
            w.x = T::from_f64(run);
            run += q.x.to_f64();
            w.y = T::from_f64(run);
            run += q.y.to_f64();
            w.z = T::from_f64(run);
            run += q.z.to_f64();
            w.w = T::from_f64(run);
        } else {
            run += q.x.to_f64();
            w.x = T::from_f64(run);
            run += q.y.to_f64();
            w.y = T::from_f64(run);
            run += q.z.to_f64();
            w.z = T::from_f64(run);
            run += q.w.to_f64();
            w.w = T::from_f64(run);
        }
        if quads {
            out.store4(at + 32 * k, w);
        } else {
            let i = 4 * (at + 32 * k);
            if i < n {
                out[i] = w.x;
            }
            if i + 1 < n {
                out[i + 1] = w.y;
            }
            if i + 2 < n {
                out[i + 2] = w.z;
            }
            if i + 3 < n {
                out[i + 3] = w.w;
            }
        }
        k += 1;
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

/// Refuses an output of another length than the input.
pub(crate) fn same_len(n: usize, out: usize) -> Result<(), GpuError> {
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
pub(crate) fn int_scan_calls<T: Int + DTypeBase, O: Int + DTypeBase>(
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

/// Tiles of a float scan of `n` elements of `T` (and so its look-back states, plus
/// one for the ticket).
pub(crate) fn float_scan_tiles<T>(n: usize) -> usize {
    n.div_ceil(scan_threads::<T>() * SCAN_ITEMS)
}

/// The one launch of a float scan of `x` (non-empty) into `out` (another buffer, as
/// long), `status` its ticket and tile states (`float_scan_tiles + 1`, zeroed when new;
/// a reused one — only ever this kernel's — is told apart by the epoch).
pub(crate) fn float_scan_call<T: Float + DTypeBase>(
    x: &GpuRef<T>,
    out: &GpuRef<T>,
    status: &mut GpuRef<u64>,
    exclusive: bool,
) -> KernelCall {
    let threads = scan_threads::<T>();
    let shape = LaunchConfig {
        grid: (float_scan_tiles::<T>(x.len()) as u32, 1, 1),
        block: (threads as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let vec4 = (x.offset() % 4 == 0 && out.offset() % 4 == 0) as u32;
    let (mut out, exclusive) = (out.clone(), exclusive as u32);
    if threads == 512 {
        scan_tile::call::<T, 512>(shape, x, status, exclusive, vec4, &mut out)
    } else {
        scan_tile::call::<T, 256>(shape, x, status, exclusive, vec4, &mut out)
    }
}
