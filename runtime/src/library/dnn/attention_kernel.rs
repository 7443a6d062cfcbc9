//! Scaled-dot-product attention as one tiled `#[kernel]` in the manner of
//! FlashAttention: a block takes a tile of query rows of one head and walks the keys a
//! tile at a time, keeping a running maximum and sum per row (the online softmax) and
//! rescaling its output tile as the maximum grows — the score matrix never reaches
//! memory, and each K and V element is read once per query tile.
//!
//! Arithmetic in `A` (f32 for the 16-bit types and f32, f64 for f64) on CUDA cores: the
//! kernel language has no tensor-core instructions yet, so this is a correct, memory-lean
//! attention for every dtype and shape rather than a match for cuDNN's or PyTorch's fused
//! f16 kernels (BENCHMARKS.md has the figures).

use super::kernels::{warp_max, warp_sum};
use crate::kernel::dsl::prelude::*;

/// Threads of a block: four warps.
pub(crate) const ATTENTION_THREADS: u32 = 128;

/// Element `c` of row `i` of head `head` (batch item × `heads` + head) of a sequence of
/// `len` rows of `d`: `[batch, heads, len, d]` (`bshd` 0) or `[batch, len, heads, d]`.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn element(bshd: u32, heads: usize, len: usize, d: usize, head: usize, i: usize, c: usize) -> usize {
    if bshd == 1 {
        ((head / heads * len + i) * heads + head % heads) * d + c
    } else {
        (head * len + i) * d + c
    }
}

/// A score as the softmax sees it: −∞ for a query row or key past the end, or (causal)
/// a key after the query.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn masked<A: Float>(s: A, row: usize, key: usize, lq: usize, lk: usize, causal: u32) -> A {
    if row < lq && key < lk && (causal == 0 || key <= row) {
        s
    } else {
        -A::infinity()
    }
}

/// `o = softmax(q·kᵀ·scale [+ mask])·v` for the query tile `block_idx_x` (of `br` rows)
/// of head `block_idx_y` (batch item × `heads` + head); keys in tiles of `bc` (≤ 32)
/// rows; `br` and `bc` multiples of 4. Q and O hold `lq` rows of `d` per head, K and V `lk`, laid out per `bshd`;
/// `causal` 1 masks keys after the query.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
pub(crate) fn attention_forward<T: Float, A: Float>(
    q: &[T],
    k: &[T],
    v: &[T],
    heads: usize,
    bshd: u32,
    lq: usize,
    lk: usize,
    d: usize,
    scale: f64,
    causal: u32,
    br: usize,
    bc: usize,
    o: &mut [T],
) {
    let mut sh = dyn_shared::<A>();
    // The tiles, one after another: Q, O (br × d), K (bc × (d + 1)), V (bc × d), the
    // scores (br × bc), and per row the running max, sum and this tile's rescale.
    let qt = 0;
    let ot = br * d;
    let kt = 2 * br * d;
    let vt = kt + bc * (d + 1);
    let st = vt + bc * d;
    let mt = st + br * bc;
    let lt = mt + br;
    let at = lt + br;
    let t = thread_idx_x();
    let threads = block_dim_x();
    let (lane, warp, warps) = (t % 32, t / 32, threads / 32);
    let head = block_idx_y();
    let row0 = block_idx_x() * br;
    let sc = A::from_f64(scale);
    let ninf = -A::infinity();
    // Load Q's tile, clear O's, start every row's max and sum.
    let mut e = t;
    while e < br * d {
        let (i, c) = (e / d, e % d);
        let row = row0 + i;
        if row < lq {
            sh[qt + e] = A::from_f64(q[element(bshd, heads, lq, d, head, row, c)].to_f64());
        } else {
            sh[qt + e] = A::zero();
        }
        sh[ot + e] = A::zero();
        e += threads;
    }
    e = t;
    while e < br {
        sh[mt + e] = ninf;
        sh[lt + e] = A::zero();
        e += threads;
    }
    // Causal: keys past the tile's last query are masked for every row of it.
    let mut kend = lk;
    if causal == 1 && row0 + br < lk {
        kend = row0 + br;
    }
    let mut j0 = 0;
    while j0 < kend {
        sync_threads();
        // K and V tiles.
        e = t;
        while e < bc * d {
            let (j, c) = (e / d, e % d);
            let key = j0 + j;
            if key < lk {
                let at_key = element(bshd, heads, lk, d, head, key, c);
                sh[kt + j * (d + 1) + c] = A::from_f64(k[at_key].to_f64());
                sh[vt + e] = A::from_f64(v[at_key].to_f64());
            } else {
                sh[kt + j * (d + 1) + c] = A::zero();
                sh[vt + e] = A::zero();
            }
            e += threads;
        }
        sync_threads();
        // Scores of the tile, masked ones −∞: each thread four rows (a quarter of the
        // tile apart) by two keys (half apart), eight dot products sharing their loads.
        let (rq, kh) = (br / 4, bc / 2);
        e = t;
        while e < rq * kh {
            let (i, j) = (e / kh, e % kh);
            let (mut s00, mut s01, mut s10, mut s11) = (A::zero(), A::zero(), A::zero(), A::zero());
            let (mut s20, mut s21, mut s30, mut s31) = (A::zero(), A::zero(), A::zero(), A::zero());
            let mut c = 0;
            while c < d {
                let k0 = sh[kt + j * (d + 1) + c];
                let k1 = sh[kt + (j + kh) * (d + 1) + c];
                let q0 = sh[qt + i * d + c];
                let q1 = sh[qt + (i + rq) * d + c];
                let q2 = sh[qt + (i + 2 * rq) * d + c];
                let q3 = sh[qt + (i + 3 * rq) * d + c];
                s00 += q0 * k0;
                s01 += q0 * k1;
                s10 += q1 * k0;
                s11 += q1 * k1;
                s20 += q2 * k0;
                s21 += q2 * k1;
                s30 += q3 * k0;
                s31 += q3 * k1;
                c += 1;
            }
            let (r, key) = (row0 + i, j0 + j);
            sh[st + i * bc + j] = masked(s00 * sc, r, key, lq, lk, causal);
            sh[st + i * bc + j + kh] = masked(s01 * sc, r, key + kh, lq, lk, causal);
            sh[st + (i + rq) * bc + j] = masked(s10 * sc, r + rq, key, lq, lk, causal);
            sh[st + (i + rq) * bc + j + kh] = masked(s11 * sc, r + rq, key + kh, lq, lk, causal);
            sh[st + (i + 2 * rq) * bc + j] = masked(s20 * sc, r + 2 * rq, key, lq, lk, causal);
            sh[st + (i + 2 * rq) * bc + j + kh] = masked(s21 * sc, r + 2 * rq, key + kh, lq, lk, causal);
            sh[st + (i + 3 * rq) * bc + j] = masked(s30 * sc, r + 3 * rq, key, lq, lk, causal);
            sh[st + (i + 3 * rq) * bc + j + kh] = masked(s31 * sc, r + 3 * rq, key + kh, lq, lk, causal);
            e += threads;
        }
        sync_threads();
        // The online softmax: a warp per row, a lane per key of the tile.
        let mut i = warp;
        while i < br {
            let mut s = ninf;
            if lane < bc {
                s = sh[st + i * bc + lane];
            }
            let old = sh[mt + i];
            let m = old.max(warp_max(s));
            let mut p = A::zero();
            if s > ninf {
                p = (s - m).exp();
            }
            if lane < bc {
                sh[st + i * bc + lane] = p;
            }
            let sum = warp_sum(p);
            if lane == 0 {
                // A row with no key seen yet keeps max −∞ and rescales nothing.
                let mut alpha = A::one();
                if old > ninf {
                    alpha = (old - m).exp();
                }
                sh[at + i] = alpha;
                sh[lt + i] = sh[lt + i] * alpha + sum;
                sh[mt + i] = m;
            }
            i += warps;
        }
        sync_threads();
        // O = O·alpha + P·V: each thread one column of four rows (a quarter apart),
        // each V element loaded once for the four.
        e = t;
        while e < rq * d {
            let (i, c) = (e / d, e % d);
            let (i1, i2, i3) = (i + rq, i + 2 * rq, i + 3 * rq);
            let mut o0 = sh[ot + i * d + c] * sh[at + i];
            let mut o1 = sh[ot + i1 * d + c] * sh[at + i1];
            let mut o2 = sh[ot + i2 * d + c] * sh[at + i2];
            let mut o3 = sh[ot + i3 * d + c] * sh[at + i3];
            let mut j = 0;
            while j < bc {
                let vv = sh[vt + j * d + c];
                o0 += sh[st + i * bc + j] * vv;
                o1 += sh[st + i1 * bc + j] * vv;
                o2 += sh[st + i2 * bc + j] * vv;
                o3 += sh[st + i3 * bc + j] * vv;
                j += 1;
            }
            sh[ot + i * d + c] = o0;
            sh[ot + i1 * d + c] = o1;
            sh[ot + i2 * d + c] = o2;
            sh[ot + i3 * d + c] = o3;
            e += threads;
        }
        j0 += bc;
    }
    sync_threads();
    e = t;
    while e < br * d {
        let (i, c) = (e / d, e % d);
        let row = row0 + i;
        if row < lq {
            o[element(bshd, heads, lq, d, head, row, c)] = T::from_f64((sh[ot + e] / sh[lt + i]).to_f64());
        }
        e += threads;
    }
}
