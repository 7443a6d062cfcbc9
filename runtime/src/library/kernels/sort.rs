//! The radix sort's kernels and launch plans: what `Device::sort_by_key`, `sort` and
//! `argsort` (`device/sort_api.rs`) run — a buffer of keys sorted in place, ascending
//! and stable (equal keys keep their order; NaNs last), a buffer of values permuted
//! alike.
//!
//! Written as `#[kernel]`s (no CUDA library cudarc reaches sorts): a least-significant-
//! digit radix sort in the manner of CUB's onesweep (Adinets & Merrill, 2022). Each key
//! becomes an unsigned integer whose order is the keys' — 32 bits for keys of up to four
//! bytes, 64 for the others: a float's bits (f16/bf16 widened to f32, -0 as +0) with the
//! sign folded, every NaN the largest value; a signed integer's with its top bit
//! flipped. One pass over those counts every 8-bit digit of every key (four or eight
//! histograms of 256 bins); then one launch per digit moves each key, and its payload if
//! any, to their places. In that launch each block takes the next tile of 3072 keys (a
//! ticket, so tiles start in order) and reads it into shared memory — twelve loads per
//! thread with nothing between them, so that they are in flight together: latency, not
//! bandwidth, bounds a pass that waits for each load in turn —, ranks the keys by digit
//! — each warp its 384 keys in order, a key's peers of the same digit found with eight
//! `ballot`s, so equal digits keep their order and every pass is stable — publishes its
//! count of each digit and looks back over the tiles before it for theirs (decoupled
//! look-back: one thread per digit, until a tile with its inclusive count out, sleeping
//! briefly while the tile before has no count out yet), and
//! writes the tile out of shared memory, grouped by digit, to where its digits start:
//! keys are read once and written once per digit. A digit that every key shares (the
//! histogram says so) moves the tile as it is. The histogram pass reads its keys in
//! tiles of 2048 the same way.
//!
//! What rides along: keys come back from their sorted forms, and integer values are the
//! passes' payload — `sort` moves keys alone, `sort_by_key` by integer values the two
//! together. A float's form is its bits reordered — a bijection, so the float comes back
//! exact, a -0 and a NaN's payload included — and the passes read their digits of it
//! with -0 taken as +0 and every NaN as the largest ([`radix_key`], CUB's treatment of
//! -0): equal floats keep their order and NaNs go last. f32 keys become their forms as
//! the histogram and the first pass read them, and the last pass writes the floats back
//! ([`FROM_FLOATS`], [`TO_FLOATS`]): no launch of their own before the passes or after;
//! f16, bf16 and f64 keys have one each way (a pass reads and writes keys of one width).
//! Float values ride through the sorted order: the payload each key's original index
//! (what `argsort` returns), the values gathered by it from a copy. The same result on
//! every run and backend.

use std::any::Any;

use crate::dtype::DTypeBase;
use crate::gpu_ref::GpuRef;
use crate::kernel::dsl::{Float, Int};
use crate::kernel::dsl::{KernelCall, KernelSequence};
use crate::launch::LaunchConfig;

/// The top bit of a 32-bit key.
const TOP32: u32 = 0x8000_0000;

/// The top bit of a 64-bit key.
const TOP64: u64 = 0x8000_0000_0000_0000;

/// Keys a block ranks and moves in one radix pass: 8 warps × 12 × 32 (what
/// [`radix_onesweep`] calls its `TILE`). Larger tiles mean fewer of them to look back
/// over and longer runs of each digit to write: 3072 rather than 2048 made 64M-key sorts
/// 8–18 % faster on an H100 (BENCHMARKS.md).
const TILE: usize = 3072;

/// [`radix_onesweep`]'s `carry`: keys only.
pub(crate) const CARRY_NONE: u32 = 0;

/// [`radix_onesweep`]'s `carry`: each key's position in the input, as the payload.
const CARRY_POSITION: u32 = 1;

/// [`radix_onesweep`]'s `carry`: the payload buffer's elements.
const CARRY_PAYLOAD: u32 = 2;

/// A radix pass's `forms`: its input keys are the f32s of `floats`, made radix forms as
/// they are read — no pass of their own before the sort (f32 keys, the common case).
const FROM_FLOATS: u32 = 1;

/// A radix pass's `forms`: its output keys go to `floats_out` as the f32s they stand for
/// — no pass of their own after the sort.
const TO_FLOATS: u32 = 2;

/// The histogram pass's most blocks: each folds its counts into the global histogram
/// with one atomic per bin, so the grid stays a few blocks per multiprocessor.
const HISTOGRAM_BLOCKS: usize = 512;

/// The radix form of a float's `bits` (of a width with `top` its sign bit and `all` every
/// bit set): unsigned-ordered — a negative number's bits all flipped, a positive one's
/// sign bit set. A bijection: [`float_unbits32`] undoes it.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn ordered<B: Int>(bits: B, top: B, all: B) -> B {
    let mut key = bits | top;
    if (bits & top) == top {
        key = bits ^ all;
    }
    key
}

/// A float's bits back from their radix form (the inverse of [`ordered`]).
#[atomr_accel_cuda_macros::device(crate = crate)]
fn unordered<B: Int>(key: B, top: B, all: B) -> B {
    let mut bits = key ^ all;
    if key >= top {
        bits = key ^ top;
    }
    bits
}

/// The 32-bit radix form of an f32 (see [`ordered`]).
#[atomr_accel_cuda_macros::device(crate = crate)]
fn form32(x: f32) -> u32 {
    ordered(x.to_bits(), 0x8000_0000u32, 0xFFFF_FFFFu32)
}

/// The f32 a 32-bit radix form stands for (the inverse of [`form32`]).
#[atomr_accel_cuda_macros::device(crate = crate)]
fn float32(form: u32) -> f32 {
    f32::from_bits(unordered(form, 0x8000_0000u32, 0xFFFF_FFFFu32))
}

/// Key `g` of a radix pass's input: its radix form in `keys`, or — `forms` having
/// [`FROM_FLOATS`] — made from the f32 in `floats` as it is read (see [`ordered`]).
#[atomr_accel_cuda_macros::device(crate = crate)]
fn key_at<K: Int>(keys: &[K], floats: &[f32], forms: u32, g: usize) -> K {
    if (forms & 1) == 1 {
        K::from_i64(form32(floats[g]) as i64)
    } else {
        keys[g]
    }
}

/// Writes a radix pass's output `key` at `at`: its radix form into `keys_out`, or —
/// `forms` having [`TO_FLOATS`] — the f32 it stands for into `floats_out`.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn put_key<K: Int>(keys_out: &mut [K], floats_out: &mut [f32], forms: u32, at: usize, key: K) {
    if (forms & 2) == 2 {
        floats_out[at] = float32(key.to_i64() as u32);
    } else {
        keys_out[at] = key;
    }
}

/// The 32-bit radix form of a float of up to 32 bits (widened to f32, exact): see
/// [`ordered`].
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn float_bits32<T: Float>(x: &[T], keys: &mut [u32]) {
    let i = global_index();
    if i < keys.len() {
        keys[i] = form32(x[i].to_f32());
    }
}

/// As [`float_bits32`], for f64 keys: 64-bit radix forms.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn float_bits64<T: Float>(x: &[T], keys: &mut [u64]) {
    let i = global_index();
    if i < keys.len() {
        keys[i] = ordered(
            x[i].to_f64().to_bits(),
            0x8000_0000_0000_0000u64,
            0xFFFF_FFFF_FFFF_FFFFu64,
        );
    }
}

/// A float of up to 32 bits back from its radix form (the inverse of [`float_bits32`]).
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn float_unbits32<T: Float>(keys: &[u32], x: &mut [T]) {
    let i = global_index();
    if i < x.len() {
        x[i] = T::from_f32(float32(keys[i]));
    }
}

/// As [`float_unbits32`], for f64 keys.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn float_unbits64<T: Float>(keys: &[u64], x: &mut [T]) {
    let i = global_index();
    if i < x.len() {
        x[i] = T::from_f64(f64::from_bits(unordered(
            keys[i],
            0x8000_0000_0000_0000u64,
            0xFFFF_FFFF_FFFF_FFFFu64,
        )));
    }
}

/// The sort key of an integer: its bits (sign-extended to the key's width for signed
/// types) XORed with `flip` (the key's top bit for signed types, else nothing).
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn int_bits<T: Int, B: Int>(x: &[T], flip: B, keys: &mut [B]) {
    let i = global_index();
    if i < keys.len() {
        keys[i] = B::from_i64(x[i].to_i64()) ^ flip;
    }
}

/// An integer back from its sort key (the inverse of [`int_bits`]: the key's low bits).
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn int_unbits<B: Int, T: Int>(keys: &[B], flip: B, x: &mut [T]) {
    let i = global_index();
    if i < x.len() {
        x[i] = T::from_i64((keys[i] ^ flip).to_i64());
    }
}

/// The 8-bit digit of `key` at `shift`, as a `u32`: the ranking's bit tests and votes on
/// it stay 32-bit instructions (a `usize` digit made each of them two).
#[atomr_accel_cuda_macros::device(crate = crate)]
fn radix_digit<K: Int>(key: K, shift: u32) -> u32 {
    ((key.to_i64() >> shift) & 255) as u32
}

/// The key whose digits a pass sorts `form` by: an integer's radix form as it is (`top`
/// zero); a float's (`top` its sign bit, `inf` +inf's bits) with -0 as +0 and every NaN
/// of either sign as the largest key — so equal floats keep their order and NaNs go
/// last, while the form itself, and with it the float, moves unchanged.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn radix_key<K: Int>(form: K, top: K, inf: K) -> K {
    let mut key = form;
    if top != K::from_i64(0) {
        let all = K::from_i64(-1);
        // +inf's form; -inf's is its complement, and every NaN's lies beyond the two.
        let high = inf | top;
        if form == (top ^ all) {
            key = top;
        } else if form > high || form < (high ^ all) {
            key = all;
        }
    }
    key
}

/// Every digit's count: `hist[p · 256 + d]` = how many keys have digit `d` in pass `p`
/// (bits 8p .. 8p + 8 of [`radix_key`]), for `passes` passes, of the keys [`key_at`]
/// reads from `keys` or `floats`. Counted per block in shared memory, 2048 keys at a
/// time (a grid-stride loop over tiles), then added to `hist` — which the sequence
/// zeroed first.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn radix_histogram<K: Int>(
    keys: &[K],
    floats: &[f32],
    forms: u32,
    n: usize,
    top: K,
    inf: K,
    passes: u32,
    hist: &mut [u32],
) {
    let mut part = shared_array::<u32, 2048>();
    // Each thread's eight keys of the tile (only its own: no barrier), read with no
    // test between the loads so that all eight are in flight at once.
    let mut mine = shared_array::<K, 2048>();
    let t = thread_idx_x();
    let bins = passes as usize * 256;
    let mut b = t;
    while b < bins {
        part[b] = 0;
        b += 256;
    }
    sync_threads();
    let mut base = block_idx_x() as usize * 2048;
    while base < n {
        let mut k: usize = 0;
        while k < 8 {
            mine[k * 256 + t] = key_at(keys, floats, forms, (base + k * 256 + t).min(n - 1));
            k += 1;
        }
        k = 0;
        while k < 8 {
            if base + k * 256 + t < n {
                let key = radix_key(mine[k * 256 + t], top, inf);
                let mut p: u32 = 0;
                while p < passes {
                    part.atomic_add(p as usize * 256 + radix_digit(key, 8 * p) as usize, 1u32);
                    p += 1;
                }
            }
            k += 1;
        }
        base += grid_dim_x() as usize * 2048;
    }
    sync_threads();
    b = t;
    while b < bins {
        if part[b] != 0 {
            hist.atomic_add(b, part[b]);
        }
        b += 256;
    }
}

/// `hist[i] = 0`.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn radix_zero(hist: &mut [u32]) {
    let i = global_index();
    if i < hist.len() {
        hist[i] = 0;
    }
}

/// One radix pass (see the module docs): the `n` keys' digit `pass` (bits 8·pass ..
/// 8·pass + 8 of [`radix_key`] with `top` and `inf`), keys moved from `keys` (or
/// `floats`) to `keys_out` (or `floats_out`) as `forms` says ([`key_at`], [`put_key`]),
/// with a payload from `payload` to `payload_out` as `carry` says: [`CARRY_NONE`],
/// [`CARRY_POSITION`] (each key's own position, `payload` unread: the first pass of an
/// index) or [`CARRY_PAYLOAD`].
/// `hist` is the histogram pass's counts; `status[0]` hands out tiles (a ticket: tile =
/// ticket mod tiles, epoch = ticket / tiles, so a reused status buffer needs no
/// clearing: every launch on it takes exactly `tiles` tickets) and `status[1 + 256·t +
/// d]` is tile t's count of digit d beside the epoch and its state (`epoch << 34 | state
/// << 32 | count`: nothing yet, the tile's own count, the count of the tiles up to and
/// with it).
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn radix_onesweep<K: Int, P: Int>(
    keys: &[K],
    floats: &[f32],
    forms: u32,
    n: usize,
    top: K,
    inf: K,
    payload: &[P],
    carry: u32,
    pass: u32,
    hist: &[u32],
    status: &mut [u64],
    keys_out: &mut [K],
    floats_out: &mut [f32],
    payload_out: &mut [P],
) {
    const OWN: u64 = 1;
    const UP_TO: u64 = 2;
    // Keys per tile ([`TILE`]: a body cannot name the module's constants) and per
    // thread: each warp ranks ROWS rows of 32.
    const TILE: usize = 3072;
    const ROWS: usize = 12;
    // The tile as read, each warp's 384 keys in their own run: read once from global
    // memory (twelve independent loads per thread, before anything waits on them), then
    // ranked and moved from here.
    let mut staged = shared_array::<K, TILE>();
    // Per warp and digit: the count, then the warp's start among the tile's keys of
    // that digit (below 3072: 16 bits).
    let mut counts = shared_array::<u16, 2048>();
    // Each key's rank among the keys of its digit in its warp (below 384).
    let mut ranks = shared_array::<u16, TILE>();
    // The tile grouped by digit: the slot in `staged` of the key at each place, and —
    // in the launch's dynamic shared memory, which only a pass that carries a payload
    // has ([`CARRY_PAYLOAD`]: `TILE` of them) — its payload. Static, the payloads would
    // hold a 64-bit sort's block above 48 KiB, and every keys-only block to fewer per
    // multiprocessor.
    let mut grouped = shared_array::<u16, TILE>();
    let mut grouped_payload = dyn_shared::<P>();
    // Per digit: where its keys start in `grouped`, and in the output.
    let mut starts = shared_array::<u32, 256>();
    let mut dest = shared_array::<u32, 256>();
    let mut warps = shared_array::<u64, 8>();
    let mut ticket = shared_array::<u64, 1>();
    let t = thread_idx_x();
    let lane = lane_id();
    let w = t / 32;
    let shift = 8 * pass;
    let tiles = grid_dim_x() as u64;
    if t == 0 {
        ticket[0] = status.atomic_add(0, 1u64);
    }
    let mut k: usize = 0;
    while k < 8 {
        counts[k * 256 + t] = 0;
        k += 1;
    }
    sync_threads();
    let tile = (ticket[0] % tiles) as usize;
    let epoch = (ticket[0] / tiles) & 0x3FFF_FFFFu64;
    let base = tile * TILE;
    // Every key has one digit here: the order stands, the tile moves as it is.
    let first = radix_key(key_at(keys, floats, forms, 0), top, inf);
    if hist[pass as usize * 256 + radix_digit(first, shift) as usize] as usize == n {
        k = 0;
        while k < ROWS {
            let g = base + k * 256 + t;
            if g < n {
                put_key(keys_out, floats_out, forms, g, key_at(keys, floats, forms, g));
                if carry == 1 {
                    payload_out[g] = P::from_i64(g as i64);
                } else if carry == 2 {
                    payload_out[g] = payload[g];
                }
            }
            k += 1;
        }
        return;
    }
    // Each warp reads its 384 keys, 32 consecutive ones per load. No test between the
    // loads, so that all twelve are in flight at once: past the last key a lane reads
    // the last key again, into a slot nothing reads.
    let mut i: usize = 0;
    while i < ROWS {
        let slot = w * ROWS * 32 + i * 32 + lane as usize;
        staged[slot] = key_at(keys, floats, forms, (base + slot).min(n - 1));
        i += 1;
    }
    sync_warp();
    // Rank: each warp its 384 keys in order, 32 at a time; a key's peers (the lanes of
    // its digit) from one ballot per digit bit; the highest peer counts them.
    i = 0;
    while i < ROWS {
        let slot = w * ROWS * 32 + i * 32 + lane as usize;
        let valid = base + slot < n;
        let mut d: u32 = 0;
        if valid {
            d = radix_digit(radix_key(staged[slot], top, inf), shift);
        }
        let mut peers: u32 = ballot(valid);
        let mut b: u32 = 0;
        while b < 8 {
            let set = ((d >> b) & 1u32) == 1u32;
            let vote = ballot(set);
            if set {
                peers = peers & vote;
            } else {
                peers = peers & (vote ^ 0xFFFF_FFFFu32);
            }
            b += 1;
        }
        let below = (peers & ((1u32 << lane) - 1)).count_ones();
        let many = peers.count_ones();
        let at = w * 256 + d as usize;
        if valid {
            ranks[slot] = (counts[at] as u32 + below) as u16;
        }
        sync_warp();
        if valid && below + 1 == many {
            counts[at] = (counts[at] as u32 + many) as u16;
        }
        sync_warp();
        i += 1;
    }
    sync_threads();
    // Thread t takes digit t: each warp's start among the tile's keys of it, the tile's
    // count of it ...
    let mut run: u32 = 0;
    k = 0;
    while k < 8 {
        let c = counts[k * 256 + t] as u32;
        counts[k * 256 + t] = run as u16;
        run += c;
        k += 1;
    }
    let own = run;
    // ... then where each digit starts in the tile (the low half) and among all keys
    // (the high half): one exclusive scan over the digits of both, packed.
    let packed: u64 = ((hist[pass as usize * 256 + t] as u64) << 32) | own as u64;
    let mut v = packed;
    let mut off: u32 = 1;
    while off < 32 {
        let up = shfl_up(v, off);
        if lane >= off {
            v += up;
        }
        off *= 2;
    }
    if lane == 31 {
        warps[w] = v;
    }
    sync_threads();
    let mut before: u64 = v - packed;
    k = 0;
    while k < w {
        before += warps[k];
        k += 1;
    }
    starts[t] = (before & 0xFFFF_FFFFu64) as u32;
    // The keys of digit t in the tiles before this one: decoupled look-back.
    let mut prior: u64 = 0;
    let at = 1 + tile * 256 + t;
    let stamp = epoch << 34;
    if tile == 0 {
        status.atomic_exch(at, stamp | (UP_TO << 32) | own as u64);
    } else {
        status.atomic_exch(at, stamp | (OWN << 32) | own as u64);
        // (32-bit index arithmetic: a spin is a few instructions; a tile not yet
        // counted makes the thread sleep briefly, off the issue slots of the warps
        // doing work.)
        let mut p = (tile - 1) as u32;
        let mut done = false;
        while !done {
            let seen = status.atomic_load((1 + p * 256 + t as u32) as usize);
            let state = (seen >> 32) & 3;
            if (seen >> 34) == epoch && state != 0 {
                prior += seen & 0xFFFF_FFFFu64;
                if state == UP_TO {
                    done = true;
                } else {
                    p -= 1;
                }
            } else {
                nanosleep(32);
            }
        }
        status.atomic_exch(at, stamp | (UP_TO << 32) | (prior + own as u64));
    }
    dest[t] = ((before >> 32) + prior) as u32;
    sync_threads();
    // The tile grouped by digit, in shared memory: each key's slot at its place ...
    i = 0;
    while i < ROWS {
        let slot = w * ROWS * 32 + i * 32 + lane as usize;
        let g = base + slot;
        // (Read first and by every lane, as the keys were, so that the loads overlap;
        // element 0 where nothing is carried from `payload`.)
        let from = if carry == 2 { g.min(n - 1) } else { 0 };
        let carried = payload[from];
        if g < n {
            let d = radix_digit(radix_key(staged[slot], top, inf), shift) as usize;
            let pos = (starts[d] + counts[w * 256 + d] as u32 + ranks[slot] as u32) as usize;
            grouped[pos] = slot as u16;
            if carry == 2 {
                grouped_payload[pos] = carried;
            }
        }
        i += 1;
    }
    sync_threads();
    // ... and out, each digit's run to where its keys go (neighbouring threads,
    // neighbouring places).
    k = 0;
    while k < ROWS {
        let pos = k * 256 + t;
        if base + pos < n {
            let slot = grouped[pos] as usize;
            let key = staged[slot];
            let d = radix_digit(radix_key(key, top, inf), shift) as usize;
            let to = (dest[d] + (pos as u32 - starts[d])) as usize;
            put_key(keys_out, floats_out, forms, to, key);
            if carry == 1 {
                payload_out[to] = P::from_i64((base + slot) as i64);
            } else if carry == 2 {
                payload_out[to] = grouped_payload[pos];
            }
        }
        k += 1;
    }
}

/// `out[i] = src[index[i]]`, floats.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn gather_float<T: Float>(src: &[T], index: &[u32], out: &mut [T]) {
    let i = global_index();
    if i < out.len() {
        out[i] = src[index[i] as usize];
    }
}

/// `out[i] = src[index[i]]`, integers.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn gather_int<T: Int>(src: &[T], index: &[u32], out: &mut [T]) {
    let i = global_index();
    if i < out.len() {
        out[i] = src[index[i] as usize];
    }
}

/// `out[i] = src[i]`, floats.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn copy_float<T: Float>(src: &[T], out: &mut [T]) {
    let i = global_index();
    if i < out.len() {
        out[i] = src[i];
    }
}

/// `out[i] = src[i]`, integers.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn copy_int<T: Int>(src: &[T], out: &mut [T]) {
    let i = global_index();
    if i < out.len() {
        out[i] = src[i];
    }
}

/// The unsigned key types radix passes sort: `u32` (keys of up to four bytes) and `u64`.
#[doc(hidden)]
pub trait RadixBits: Int + DTypeBase {
    /// Radix passes of 8 bits each.
    const PASSES: u32;
    /// The sign bit of a float of this width.
    const TOP: Self;
    /// The bits of +inf of a float of this width (f32's for `u32`: narrower floats are
    /// widened to it).
    const INF: Self;
    /// Zero, for [`radix_key`]'s integer forms.
    const ZERO: Self;
}

impl RadixBits for u32 {
    const PASSES: u32 = 4;
    const TOP: u32 = TOP32;
    const INF: u32 = 0x7F80_0000;
    const ZERO: u32 = 0;
}

impl RadixBits for u64 {
    const PASSES: u32 = 8;
    const TOP: u64 = TOP64;
    const INF: u64 = 0x7FF0_0000_0000_0000;
    const ZERO: u64 = 0;
}

/// How a key type sorts: its radix form and the launches that make it and undo it
/// (`SortKey`, the public bound, adds the device's element type).
#[doc(hidden)]
pub trait RadixKey: DTypeBase {
    /// The unsigned integers the keys sort as.
    #[doc(hidden)]
    type Bits: RadixBits;
    /// Whether the keys are floats (their radix forms sort with -0 as +0 and NaNs last:
    /// see [`radix_key`]).
    #[doc(hidden)]
    const FLOAT: bool;
    /// The launch that writes the radix forms of `x`.
    #[doc(hidden)]
    fn bits_call(x: &GpuRef<Self>, bits: &mut GpuRef<Self::Bits>) -> KernelCall;
    /// The launch that writes the keys back from their sorted radix forms.
    #[doc(hidden)]
    fn unbits_call(bits: &GpuRef<Self::Bits>, x: &GpuRef<Self>) -> KernelCall;
    /// `x` itself where its keys are their own radix forms (u32, u64): the passes then
    /// read the first digit from it and leave the last in it, with no transform before
    /// and none after.
    #[doc(hidden)]
    fn as_bits(x: &GpuRef<Self>) -> Option<GpuRef<Self::Bits>>;
    /// `x` itself where its keys are f32s: the passes then make their radix forms as
    /// they read them ([`FROM_FLOATS`]) and write the sorted floats back
    /// ([`TO_FLOATS`]), with no transform before and none after.
    #[doc(hidden)]
    fn as_f32(x: &GpuRef<Self>) -> Option<GpuRef<f32>>;
    /// The key's place in the sort order as a 64-bit integer, on the host (the same
    /// order as its radix form read by [`radix_key`]): for the CPU device's host sort.
    #[doc(hidden)]
    fn radix_form(self) -> u64;
}

/// How a value type rides through a sort: as the passes' payload or gathered by the
/// sorted order (`SortValue`, the public bound, adds the device's element type).
#[doc(hidden)]
pub trait RadixValue: DTypeBase {
    /// Whether [`RadixValue::carried`] carries the values (integers).
    #[doc(hidden)]
    const CARRIED: bool;
    /// The launch of `out[i] = src[index[i]]`.
    #[doc(hidden)]
    fn gather_call(src: &GpuRef<Self>, index: &GpuRef<u32>, out: &GpuRef<Self>) -> KernelCall;
    /// The launch of `out[i] = src[i]`.
    #[doc(hidden)]
    fn copy_call(src: &GpuRef<Self>, out: &mut GpuRef<Self>) -> KernelCall;
    /// The radix passes of `radix` carrying `values` along as their payload, ping-pong
    /// between `values` and `spare`, the last pass writing `values` (integers), or `None`
    /// (floats: through the sorted order).
    #[doc(hidden)]
    fn carried<B: RadixBits>(
        radix: &mut Radix<B>,
        values: &GpuRef<Self>,
        spare: GpuRef<Self>,
    ) -> Option<KernelSequence>;
}

macro_rules! float_keys {
    ($bits:ident, $unbits:ident -> $b:ty: $($k:ty = $f32:ident),*) => {
        $(impl RadixKey for $k {
            type Bits = $b;
            const FLOAT: bool = true;
            fn bits_call(x: &GpuRef<Self>, bits: &mut GpuRef<$b>) -> KernelCall {
                $bits::call::<$k>(LaunchConfig::for_elements(bits.len(), 256), x, bits)
            }
            fn unbits_call(bits: &GpuRef<$b>, x: &GpuRef<Self>) -> KernelCall {
                let mut x = x.clone();
                $unbits::call::<$k>(LaunchConfig::for_elements(x.len(), 256), bits, &mut x)
            }
            fn as_bits(_: &GpuRef<Self>) -> Option<GpuRef<$b>> {
                None
            }
            fn as_f32(x: &GpuRef<Self>) -> Option<GpuRef<f32>> {
                $f32!(x)
            }
            fn radix_form(self) -> u64 {
                // Widened to f64 (exact), as `radix_key` orders it.
                let v = crate::dtype::DTypeBase::to_f64(self);
                let v = if v == 0.0 { 0.0 } else { v };
                let bits = v.to_bits();
                match (v.is_nan(), bits & TOP64 != 0) {
                    (true, _) => u64::MAX,
                    (false, true) => !bits,
                    (false, false) => bits | TOP64,
                }
            }
        })*
    };
}

macro_rules! int_keys {
    ($b:ty, $top:expr; $($k:ty = $signed:expr, $own:ident),*) => {
        $(impl RadixKey for $k {
            type Bits = $b;
            const FLOAT: bool = false;
            fn bits_call(x: &GpuRef<Self>, bits: &mut GpuRef<$b>) -> KernelCall {
                let flip: $b = if $signed { $top } else { 0 };
                int_bits::call::<$k, $b>(LaunchConfig::for_elements(bits.len(), 256), x, flip, bits)
            }
            fn unbits_call(bits: &GpuRef<$b>, x: &GpuRef<Self>) -> KernelCall {
                let flip: $b = if $signed { $top } else { 0 };
                let mut x = x.clone();
                int_unbits::call::<$b, $k>(LaunchConfig::for_elements(x.len(), 256), bits, flip, &mut x)
            }
            fn as_bits(x: &GpuRef<Self>) -> Option<GpuRef<$b>> {
                $own!(x)
            }
            fn as_f32(_: &GpuRef<Self>) -> Option<GpuRef<f32>> {
                None
            }
            fn radix_form(self) -> u64 {
                // Signed: shifted by 2^63 (the top bit flipped), as `int_bits` orders it.
                if $signed {
                    (self as i64 as u64) ^ TOP64
                } else {
                    self as u64
                }
            }
        })*
    };
}

macro_rules! sort_values {
    ($gather:ident, $copy:ident, $carried:ident = $is:expr; $($v:ty),*) => {
        $(impl RadixValue for $v {
            const CARRIED: bool = $is;
            fn gather_call(src: &GpuRef<Self>, index: &GpuRef<u32>, out: &GpuRef<Self>) -> KernelCall {
                let mut out = out.clone();
                let cfg = LaunchConfig::for_elements(out.len(), 256);
                $gather::call::<$v>(cfg, src, index, &mut out)
            }
            fn copy_call(src: &GpuRef<Self>, out: &mut GpuRef<Self>) -> KernelCall {
                let cfg = LaunchConfig::for_elements(out.len(), 256);
                $copy::call::<$v>(cfg, src, out)
            }
            fn carried<B: RadixBits>(radix: &mut Radix<B>, values: &GpuRef<Self>, spare: GpuRef<Self>) -> Option<KernelSequence> {
                $carried!(radix, values, spare)
            }
        })*
    };
}

/// Floats ride through the sorted order.
macro_rules! through_order {
    ($radix:ident, $values:ident, $spare:ident) => {{
        let _ = ($radix, $values, $spare);
        None
    }};
}

/// Integers ride along as the passes' payload: ping-pong between the values and the
/// spare buffer, the last (even-numbered) pass writing the values.
macro_rules! as_payload {
    ($radix:ident, $values:ident, $spare:ident) => {{
        let (mut a, mut b) = ($values.clone(), $spare);
        Some($radix.passes($values, CARRY_PAYLOAD, &mut a, &mut b))
    }};
}

/// A key type that is its own radix form (or, for `as_f32`, an f32).
macro_rules! own_bits {
    ($x:ident) => {
        Some($x.clone())
    };
}

/// A key type that is not (not an f32).
macro_rules! other_bits {
    ($x:ident) => {{
        let _ = $x;
        None
    }};
}

float_keys!(float_bits32, float_unbits32 -> u32: half::f16 = other_bits, half::bf16 = other_bits, f32 = own_bits);
float_keys!(float_bits64, float_unbits64 -> u64: f64 = other_bits);
int_keys!(u32, TOP32; i8 = true, other_bits, i16 = true, other_bits, i32 = true, other_bits,
    u8 = false, other_bits, u16 = false, other_bits, u32 = false, own_bits);
int_keys!(u64, TOP64; i64 = true, other_bits, u64 = false, own_bits);
sort_values!(gather_float, copy_float, through_order = false; half::f16, half::bf16, f32, f64);
sort_values!(gather_int, copy_int, as_payload = true; i8, i16, i32, i64, u8, u16, u32, u64);

/// A radix sort's buffers and launches so far: the keys' radix forms counted, then as
/// many passes as [`Radix::passes`] adds, leaving the sorted forms in `bits`.
#[doc(hidden)]
pub struct Radix<B: RadixBits> {
    sequence: KernelSequence,
    tiles: usize,
    /// The passes leave the caller's keys sorted in their buffer — `bits` is that
    /// buffer (keys that are their own radix forms), or the last pass writes the f32s
    /// the forms stand for — with nothing to write back.
    in_place: bool,
    bits: GpuRef<B>,
    spare: GpuRef<B>,
    /// f32 keys: the first pass reads them, the last writes them if `in_place`.
    floats: Option<GpuRef<f32>>,
    /// One-element stand-ins for a pass's `floats` and `floats_out` where it has none.
    no_floats: [GpuRef<f32>; 2],
    /// [`radix_key`]'s `top` and `inf` for these keys (zeros for integers).
    top: B,
    inf: B,
    hist: GpuRef<u32>,
    status: GpuRef<u64>,
    /// What the buffers above are clones of, held for the sort's life (the device's
    /// scratch guards, back to its pool with the sort).
    _kept: Vec<Box<dyn Any + Send>>,
}

/// The buffers of a radix sort of `n` keys: the keys' radix forms (`bits`: the keys'
/// own buffer where they are their own forms) and a spare as long, the digit
/// histograms (`256·PASSES`), the look-back states (`1 + 256·tiles`, zeroed when new,
/// only ever this kernel's), two one-element f32 stand-ins, and whatever holds them.
pub(crate) struct RadixBuffers<B: RadixBits> {
    pub(crate) bits: GpuRef<B>,
    pub(crate) spare: GpuRef<B>,
    pub(crate) hist: GpuRef<u32>,
    pub(crate) status: GpuRef<u64>,
    pub(crate) no_floats: [GpuRef<f32>; 2],
    pub(crate) kept: Vec<Box<dyn Any + Send>>,
}

/// Tiles of a radix pass over `n` keys.
pub(crate) fn radix_tiles(n: usize) -> usize {
    n.div_ceil(TILE)
}

impl<B: RadixBits> Radix<B> {
    /// `launches`, then `unbits` — the keys written back from their sorted forms —
    /// unless the passes sorted the keys in place.
    pub(crate) fn written_back(&self, launches: KernelSequence, unbits: KernelCall) -> KernelSequence {
        match self.in_place {
            true => launches,
            false => launches.then(unbits),
        }
    }

    /// The launches so far, then the passes carrying each key's original position: the
    /// stable ascending order, left in `index[0]`.
    pub(crate) fn order(&mut self, index: &mut [GpuRef<u32>; 2]) -> KernelSequence {
        let [a, b] = index;
        // (The first pass writes positions: its payload input is never read.)
        let unread = a.clone();
        self.passes(&unread, CARRY_POSITION, a, b)
    }

    /// The launches so far, then the radix passes — keys from `bits` and back (each pass
    /// into the spare buffer, the two swapped), each carrying a payload from `payload`
    /// (read by the first pass only, as `first` says: see [`radix_onesweep`]) through
    /// `a` and `b`, left in `a` (the passes are even in number).
    pub(crate) fn passes<P: Int + DTypeBase>(
        &mut self,
        payload: &GpuRef<P>,
        first: u32,
        a: &mut GpuRef<P>,
        b: &mut GpuRef<P>,
    ) -> KernelSequence {
        let mut sequence = std::mem::take(&mut self.sequence);
        for pass in 0..B::PASSES {
            let (from, to) = if pass % 2 == 0 { (&*a, &mut *b) } else { (&*b, &mut *a) };
            let (input, carry) = match pass {
                0 => (payload, first),
                _ if first == CARRY_NONE => (from, CARRY_NONE),
                _ => (from, CARRY_PAYLOAD),
            };
            // A tile's payloads, grouped, in dynamic shared memory where carried.
            let grouped = match carry {
                CARRY_PAYLOAD => TILE * std::mem::size_of::<P>(),
                _ => 0,
            };
            let shape = LaunchConfig {
                grid: (self.tiles as u32, 1, 1),
                block: (256, 1, 1),
                shared_mem_bytes: grouped as u32,
            };
            let (floats, from_floats) = match (&self.floats, pass) {
                (Some(f), 0) => (f, FROM_FLOATS),
                _ => (&self.no_floats[0], 0),
            };
            let (mut floats_out, to_floats) = match &self.floats {
                Some(f) if self.in_place && pass == B::PASSES - 1 => (f.clone(), TO_FLOATS),
                _ => (self.no_floats[1].clone(), 0),
            };
            sequence = sequence.then(radix_onesweep::call::<B, P>(
                shape,
                &self.bits,
                floats,
                from_floats | to_floats,
                self.bits.len(),
                self.top,
                self.inf,
                input,
                carry,
                pass,
                &self.hist,
                &mut self.status,
                &mut self.spare,
                &mut floats_out,
                to,
            ));
            std::mem::swap(&mut self.bits, &mut self.spare);
        }
        sequence
    }
}

impl<B: RadixBits> Radix<B> {
    /// The start of a radix sort of `keys` (non-empty) into `bufs`: the histograms
    /// zeroed, the keys' radix forms written (unless the passes read them from the keys
    /// themselves: keys that are their own forms, or f32s) and every digit counted.
    /// `sorts_keys`: the keys are to be sorted in place (not so for `argsort`), so keys
    /// that are their own radix forms are the passes' first input and last output.
    pub(crate) fn new<K: RadixKey<Bits = B>>(keys: &GpuRef<K>, sorts_keys: bool, bufs: RadixBuffers<B>) -> Self {
        let n = keys.len();
        let tiles = radix_tiles(n);
        let own = K::as_bits(keys).is_some() && sorts_keys;
        let floats = K::as_f32(keys);
        let RadixBuffers {
            mut bits,
            spare,
            mut hist,
            status,
            no_floats,
            kept,
        } = bufs;
        let counting = LaunchConfig {
            grid: (tiles.min(HISTOGRAM_BLOCKS) as u32, 1, 1),
            block: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut sequence =
            KernelSequence::new().then(radix_zero::call(LaunchConfig::for_elements(hist.len(), 256), &mut hist));
        if !own && floats.is_none() {
            sequence = sequence.then(K::bits_call(keys, &mut bits));
        }
        let (top, inf) = match K::FLOAT {
            true => (B::TOP, B::INF),
            false => (B::ZERO, B::ZERO),
        };
        let (counted, forms) = match &floats {
            Some(f) => (f, FROM_FLOATS),
            None => (&no_floats[0], 0),
        };
        let sequence = sequence.then(radix_histogram::call::<B>(
            counting,
            &bits,
            counted,
            forms,
            n,
            top,
            inf,
            B::PASSES,
            &mut hist,
        ));
        Radix {
            sequence,
            tiles,
            in_place: own || (floats.is_some() && sorts_keys),
            bits,
            spare,
            floats,
            no_floats,
            top,
            inf,
            hist,
            status,
            _kept: kept,
        }
    }

    /// The keys' sorted radix forms after the passes (the buffer of a sort's launches).
    pub(crate) fn bits(&self) -> &GpuRef<B> {
        &self.bits
    }
}
