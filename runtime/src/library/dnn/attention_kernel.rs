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

/// `o = softmax(q·kᵀ·scale [+ mask])·v` for the query tile `block_idx_x` (of `br` rows)
/// of head `block_idx_y` (batch item × `heads` + head); keys in tiles of `bc` (≤ 32)
/// rows. Q and O hold `lq` rows of `d` per head, K and V `lk`, laid out per `bshd`;
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
        // Scores of the tile, masked ones −∞.
        e = t;
        while e < br * bc {
            let (i, j) = (e / bc, e % bc);
            let (row, key) = (row0 + i, j0 + j);
            let mut s = ninf;
            if row < lq && key < lk && (causal == 0 || key <= row) {
                let mut acc = A::zero();
                let mut c = 0;
                while c < d {
                    acc += sh[qt + i * d + c] * sh[kt + j * (d + 1) + c];
                    c += 1;
                }
                s = acc * sc;
            }
            sh[st + e] = s;
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
        // O = O·alpha + P·V.
        e = t;
        while e < br * d {
            let (i, c) = (e / d, e % d);
            let mut acc = sh[ot + e] * sh[at + i];
            let mut j = 0;
            while j < bc {
                acc += sh[st + i * bc + j] * sh[vt + j * d + c];
                j += 1;
            }
            sh[ot + e] = acc;
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
