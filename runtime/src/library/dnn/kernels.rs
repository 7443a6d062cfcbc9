//! The dnn library's `#[kernel]`s: row-wise softmax, layer norm and RMS norm (one block
//! of [`THREADS`] per row, its reductions through warp shuffles and one shared slot per
//! warp), and a bias added before a pointwise nonlinearity. Each is generic over the
//! element type `T` and the type `A` it computes in: f32 for f16, bf16 and f32 (as
//! PyTorch does), f64 for f64.
//!
//! In place, a kernel reads its input from `y` (`from_y` 1; `x` is then a stand-in that
//! is not read): two parameters may not alias, and each element is read and then
//! written by the same thread, so one buffer serves both.

use crate::kernel::dsl::prelude::*;

/// Threads of a row's block.
pub(crate) const THREADS: u32 = 256;

/// The longest row a warp takes alone ([`softmax_warp_rows`]).
pub(crate) const WARP_ROW_MAX: usize = 1024;

/// The largest of `v` over the warp's 32 lanes, in every lane (a butterfly of
/// shuffles: every lane must take part).
#[atomr_accel_cuda_macros::device(crate = crate)]
pub(crate) fn warp_max<A: Float>(v: A) -> A {
    let mut m = v;
    m = m.max(shfl_xor(m, 16));
    m = m.max(shfl_xor(m, 8));
    m = m.max(shfl_xor(m, 4));
    m = m.max(shfl_xor(m, 2));
    m.max(shfl_xor(m, 1))
}

/// The sum of `v` over the warp's 32 lanes, in every lane.
#[atomr_accel_cuda_macros::device(crate = crate)]
pub(crate) fn warp_sum<A: Float>(v: A) -> A {
    let mut s = v;
    s += shfl_xor(s, 16);
    s += shfl_xor(s, 8);
    s += shfl_xor(s, 4);
    s += shfl_xor(s, 2);
    s + shfl_xor(s, 1)
}

/// `y = softmax(x)` (`log` 0) or `log_softmax(x)` (`log` 1) of each row of `cols`
/// elements: `exp(x − max) / Σ exp(x − max)`, or `x − max − ln Σ exp(x − max)`.
/// The input element `i`: from `x`, or from `y` in place.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn input<T: Float>(x: &[T], y: &mut [T], from_y: u32, i: usize) -> f64 {
    if from_y == 1 {
        y[i].to_f64()
    } else {
        x[i].to_f64()
    }
}

#[atomr_accel_cuda_macros::kernel(crate = crate)]
pub(crate) fn softmax_rows<T: Float, A: Float>(x: &[T], cols: usize, log: u32, from_y: u32, y: &mut [T]) {
    let mut part = shared_array::<A, 8>();
    let t = thread_idx_x();
    let (lane, warp) = (t % 32, t / 32);
    let warps = block_dim_x() / 32;
    let base = block_idx_x() * cols;
    let mut m = -A::infinity();
    let mut j = t;
    while j < cols {
        m = m.max(A::from_f64(input(x, y, from_y, base + j)));
        j += block_dim_x();
    }
    m = warp_max(m);
    if lane == 0 {
        part[warp] = m;
    }
    sync_threads();
    m = part[0];
    let mut w = 1;
    while w < warps {
        m = m.max(part[w]);
        w += 1;
    }
    sync_threads();
    let mut s = A::zero();
    j = t;
    while j < cols {
        s += (A::from_f64(input(x, y, from_y, base + j)) - m).exp();
        j += block_dim_x();
    }
    s = warp_sum(s);
    if lane == 0 {
        part[warp] = s;
    }
    sync_threads();
    s = part[0];
    w = 1;
    while w < warps {
        s += part[w];
        w += 1;
    }
    let (inv, ln) = (s.recip(), s.ln());
    j = t;
    while j < cols {
        let v = A::from_f64(input(x, y, from_y, base + j)) - m;
        if log == 1 {
            y[base + j] = T::from_f64((v - ln).to_f64());
        } else {
            y[base + j] = T::from_f64((v.exp() * inv).to_f64());
        }
        j += block_dim_x();
    }
}

/// Rows of [`WARP_ROW_MAX`] elements or fewer: [`softmax_rows`] with one warp per row
/// (eight rows per block): no block-wide barriers, only shuffles, and a block's rows in
/// flight together.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
pub(crate) fn softmax_warp_rows<T: Float, A: Float>(x: &[T], rows: usize, cols: usize, log: u32, from_y: u32, y: &mut [T]) {
    let lane = thread_idx_x() % 32;
    let row = block_idx_x() * (block_dim_x() / 32) + thread_idx_x() / 32;
    // `row` is the same for the whole warp: the shuffles below see every lane.
    if row < rows {
        let base = row * cols;
        let mut m = -A::infinity();
        let mut j = lane;
        while j < cols {
            m = m.max(A::from_f64(input(x, y, from_y, base + j)));
            j += 32;
        }
        m = warp_max(m);
        let mut s = A::zero();
        j = lane;
        while j < cols {
            s += (A::from_f64(input(x, y, from_y, base + j)) - m).exp();
            j += 32;
        }
        s = warp_sum(s);
        let (inv, ln) = (s.recip(), s.ln());
        j = lane;
        while j < cols {
            let v = A::from_f64(input(x, y, from_y, base + j)) - m;
            if log == 1 {
                y[base + j] = T::from_f64((v - ln).to_f64());
            } else {
                y[base + j] = T::from_f64((v.exp() * inv).to_f64());
            }
            j += 32;
        }
    }
}

/// [`softmax_warp_rows`] over rows of a multiple of four elements, 16-byte aligned:
/// each lane reads and writes four elements at a time (one vector access instead of
/// four, which is what lets a warp keep enough loads in flight), and the maximum and
/// the sum come from one pass over the row (the online softmax), so the row is read
/// twice, not three times.
///
/// With `SCORES` 1 each element is taken times `scale` first, and with `causal` 1 row
/// `r` sees only its first `r % queries + 1` elements (the others count as −∞: 0 out of
/// a softmax, −∞ out of a log-softmax, and are not read): attention's scores, `Q·Kᵀ` of
/// `queries` rows per head, turned into weights in place. `SCORES` 0, a plain softmax,
/// compiles without the scaling and the bound (with them, f16 rows took 22 % longer).
#[atomr_accel_cuda_macros::kernel(crate = crate, consts(SCORES = [0, 1]))]
pub(crate) fn softmax_warp_rows4<T: Float, A: Float, const SCORES: u32>(
    x: &[T],
    rows: usize,
    cols: usize,
    log: u32,
    from_y: u32,
    scale: f64,
    queries: usize,
    causal: u32,
    y: &mut [T],
) {
    let lane = thread_idx_x() % 32;
    let row = block_idx_x() * (block_dim_x() / 32) + thread_idx_x() / 32;
    if row < rows {
        let quads = cols / 4;
        let qb = row * quads;
        let ninf = -A::infinity();
        let c = A::from_f64(scale);
        // The elements this row sees, and the quads holding them.
        let mut seen = cols;
        if SCORES == 1 && causal == 1 && row % queries + 1 < cols {
            seen = row % queries + 1;
        }
        let seen_quads = (seen + 3) / 4;
        // One pass for the maximum and the sum (the online softmax): each lane keeps
        // its running maximum and the sum of exponentials below it, rescaling the sum
        // when the maximum grows; then the lanes' pairs merge the same way.
        let mut m = ninf;
        let mut s = A::zero();
        let mut q = lane;
        while q < seen_quads {
            let v: Vec4<T> = if from_y == 1 { y.load4(qb + q) } else { x.load4(qb + q) };
            let a: A = score(SCORES, A::from_f64(v.x.to_f64()), c, 4 * q, seen);
            let b: A = score(SCORES, A::from_f64(v.y.to_f64()), c, 4 * q + 1, seen);
            let cc: A = score(SCORES, A::from_f64(v.z.to_f64()), c, 4 * q + 2, seen);
            let d: A = score(SCORES, A::from_f64(v.w.to_f64()), c, 4 * q + 3, seen);
            let mn = m.max(a.max(b).max(cc.max(d)));
            if mn > ninf {
                s = s * (m - mn).exp() + (a - mn).exp() + (b - mn).exp() + (cc - mn).exp() + (d - mn).exp();
            }
            m = mn;
            q += 32;
        }
        let mut off: u32 = 16;
        while off > 0 {
            let m2 = shfl_xor(m, off);
            let s2 = shfl_xor(s, off);
            let mn = m.max(m2);
            if mn > ninf {
                s = s * (m - mn).exp() + s2 * (m2 - mn).exp();
            }
            m = mn;
            off = off / 2;
        }
        let (inv, ln) = (s.recip(), s.ln());
        q = lane;
        while q < quads {
            // Past what the row sees, nothing is read: `score` makes every lane −∞.
            let mut v: Vec4<T> = Vec4::splat(T::zero());
            if SCORES == 0 || q < seen_quads {
                v = if from_y == 1 { y.load4(qb + q) } else { x.load4(qb + q) };
            }
            let mut w: Vec4<T> = v;
            let a: A = score(SCORES, A::from_f64(v.x.to_f64()), c, 4 * q, seen) - m;
            let b: A = score(SCORES, A::from_f64(v.y.to_f64()), c, 4 * q + 1, seen) - m;
            let cc: A = score(SCORES, A::from_f64(v.z.to_f64()), c, 4 * q + 2, seen) - m;
            let d: A = score(SCORES, A::from_f64(v.w.to_f64()), c, 4 * q + 3, seen) - m;
            if log == 1 {
                w.x = T::from_f64((a - ln).to_f64());
                w.y = T::from_f64((b - ln).to_f64());
                w.z = T::from_f64((cc - ln).to_f64());
                w.w = T::from_f64((d - ln).to_f64());
            } else {
                w.x = T::from_f64((a.exp() * inv).to_f64());
                w.y = T::from_f64((b.exp() * inv).to_f64());
                w.z = T::from_f64((cc.exp() * inv).to_f64());
                w.w = T::from_f64((d.exp() * inv).to_f64());
            }
            y.store4(qb + q, w);
            q += 32;
        }
    }
}

/// Element `k` of a row as the softmax takes it: `v` itself (`scores` 0), or — scores —
/// `v·c` where the row sees it (`k < seen`), else −∞.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn score<A: Float>(scores: u32, v: A, c: A, k: usize, seen: usize) -> A {
    if scores == 0 {
        v
    } else if k < seen {
        v * c
    } else {
        -A::infinity()
    }
}

/// Layer norm (`rms` 0) of each row of `cols` elements — `(x − mean) / √(var + eps) · γ
/// + β`, the biased variance, as PyTorch — or RMS norm (`rms` 1): `x / √(mean(x²) + eps)
/// · γ` (`beta` not read).
#[atomr_accel_cuda_macros::kernel(crate = crate)]
pub(crate) fn norm_rows<T: Float, A: Float>(
    x: &[T],
    gamma: &[T],
    beta: &[T],
    cols: usize,
    eps: f64,
    rms: u32,
    from_y: u32,
    y: &mut [T],
) {
    let mut part = shared_array::<A, 8>();
    let t = thread_idx_x();
    let (lane, warp) = (t % 32, t / 32);
    let warps = block_dim_x() / 32;
    let base = block_idx_x() * cols;
    let n = A::from_f64(cols as f64);
    let mut mean = A::zero();
    if rms == 0 {
        let mut s = A::zero();
        let mut j = t;
        while j < cols {
            s += A::from_f64(input(x, y, from_y, base + j));
            j += block_dim_x();
        }
        s = warp_sum(s);
        if lane == 0 {
            part[warp] = s;
        }
        sync_threads();
        s = part[0];
        let mut w = 1;
        while w < warps {
            s += part[w];
            w += 1;
        }
        sync_threads();
        mean = s / n;
    }
    let mut q = A::zero();
    let mut j = t;
    while j < cols {
        let d = A::from_f64(input(x, y, from_y, base + j)) - mean;
        q += d * d;
        j += block_dim_x();
    }
    q = warp_sum(q);
    if lane == 0 {
        part[warp] = q;
    }
    sync_threads();
    q = part[0];
    let mut w = 1;
    while w < warps {
        q += part[w];
        w += 1;
    }
    let scale = (q / n + A::from_f64(eps)).rsqrt();
    j = t;
    while j < cols {
        let mut v = (A::from_f64(input(x, y, from_y, base + j)) - mean) * scale * A::from_f64(gamma[j].to_f64());
        if rms == 0 {
            v += A::from_f64(beta[j].to_f64());
        }
        y[base + j] = T::from_f64(v.to_f64());
        j += block_dim_x();
    }
}

/// [`norm_rows`] over rows of a multiple of four elements, every row, γ and β 16-byte
/// aligned: each thread reads and writes four elements at a time.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
pub(crate) fn norm_rows4<T: Float, A: Float>(
    x: &[T],
    gamma: &[T],
    beta: &[T],
    cols: usize,
    eps: f64,
    rms: u32,
    from_y: u32,
    y: &mut [T],
) {
    let mut part = shared_array::<A, 8>();
    let t = thread_idx_x();
    let quads = cols / 4;
    let qb = block_idx_x() * quads;
    let n = A::from_f64(cols as f64);
    let mut mean = A::zero();
    if rms == 0 {
        let mut s = A::zero();
        let mut q = t;
        while q < quads {
            let v: Vec4<T> = if from_y == 1 { y.load4(qb + q) } else { x.load4(qb + q) };
            s += A::from_f64(v.x.to_f64()) + A::from_f64(v.y.to_f64()) + A::from_f64(v.z.to_f64()) + A::from_f64(v.w.to_f64());
            q += block_dim_x();
        }
        s = warp_sum(s);
        if t % 32 == 0 {
            part[t / 32] = s;
        }
        sync_threads();
        s = part[0];
        let mut w = 1;
        while w < block_dim_x() / 32 {
            s += part[w];
            w += 1;
        }
        sync_threads();
        mean = s / n;
    }
    let mut ss = A::zero();
    let mut q = t;
    while q < quads {
        let v: Vec4<T> = if from_y == 1 { y.load4(qb + q) } else { x.load4(qb + q) };
        let (a, b) = (A::from_f64(v.x.to_f64()) - mean, A::from_f64(v.y.to_f64()) - mean);
        let (c, d) = (A::from_f64(v.z.to_f64()) - mean, A::from_f64(v.w.to_f64()) - mean);
        ss += a * a + b * b + c * c + d * d;
        q += block_dim_x();
    }
    ss = warp_sum(ss);
    if t % 32 == 0 {
        part[t / 32] = ss;
    }
    sync_threads();
    ss = part[0];
    let mut w = 1;
    while w < block_dim_x() / 32 {
        ss += part[w];
        w += 1;
    }
    let scale = (ss / n + A::from_f64(eps)).rsqrt();
    q = t;
    while q < quads {
        let v: Vec4<T> = if from_y == 1 { y.load4(qb + q) } else { x.load4(qb + q) };
        let g: Vec4<T> = gamma.load4(q);
        let mut w: Vec4<T> = v;
        let mut a = (A::from_f64(v.x.to_f64()) - mean) * scale * A::from_f64(g.x.to_f64());
        let mut b = (A::from_f64(v.y.to_f64()) - mean) * scale * A::from_f64(g.y.to_f64());
        let mut c = (A::from_f64(v.z.to_f64()) - mean) * scale * A::from_f64(g.z.to_f64());
        let mut d = (A::from_f64(v.w.to_f64()) - mean) * scale * A::from_f64(g.w.to_f64());
        if rms == 0 {
            let bb: Vec4<T> = beta.load4(q);
            a += A::from_f64(bb.x.to_f64());
            b += A::from_f64(bb.y.to_f64());
            c += A::from_f64(bb.z.to_f64());
            d += A::from_f64(bb.w.to_f64());
        }
        w.x = T::from_f64(a.to_f64());
        w.y = T::from_f64(b.to_f64());
        w.z = T::from_f64(c.to_f64());
        w.w = T::from_f64(d.to_f64());
        y.store4(qb + q, w);
        q += block_dim_x();
    }
}

/// `y = f(x + bias[column])` over rows of `cols` elements, `f` by `act`: 0 identity,
/// 1 ReLU, 2 GELU (tanh form), 3 SiLU.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
pub(crate) fn bias_act<T: Float, A: Float>(x: &[T], bias: &[T], cols: usize, act: u32, from_y: u32, y: &mut [T]) {
    let mut i = global_index();
    while i < y.len() {
        let v = A::from_f64(input(x, y, from_y, i)) + A::from_f64(bias[i % cols].to_f64());
        let mut r = v;
        if act == 1 {
            r = v.max(A::zero());
        } else if act == 2 {
            let c = A::from_f64(0.7978845608028654);
            r = A::from_f64(0.5) * v * (A::one() + (c * (v + A::from_f64(0.044715) * v * v * v)).tanh());
        } else if act == 3 {
            r = v / (A::one() + (-v).exp());
        }
        y[i] = T::from_f64(r.to_f64());
        i += grid_stride();
    }
}
