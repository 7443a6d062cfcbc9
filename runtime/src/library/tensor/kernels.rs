//! The tensor library's own `#[kernel]`s: a strided gather into a tight buffer (an
//! operand permuted, broadcast or diagonal-read into the column-major batch a GEMM
//! takes) and its inverse, a scatter-add through an output's strides; and the
//! element-wise binary and trinary ops and the reduction over modes (`modes.rs`), each
//! thread one element of the output, reading its inputs through their own strides.

use super::einsum::{Dim, MAX_RANK};
use crate::kernel::dsl::prelude::*;

/// Up to eight dimensions, fastest first: their sizes and the strides of the strided
/// side (unused ones: size 1, stride 0).
#[derive(Debug, Clone, Copy, Default, atomr_accel_cuda_macros::KernelArg)]
#[repr(C)]
pub(crate) struct Dims8 {
    d0: u64,
    d1: u64,
    d2: u64,
    d3: u64,
    d4: u64,
    d5: u64,
    d6: u64,
    d7: u64,
    s0: u64,
    s1: u64,
    s2: u64,
    s3: u64,
    s4: u64,
    s5: u64,
    s6: u64,
    s7: u64,
}

impl Dims8 {
    /// `dims` (fastest first, at most [`MAX_RANK`]) padded with unit dimensions.
    pub(crate) fn of(dims: &[Dim]) -> Self {
        debug_assert!(dims.len() <= MAX_RANK);
        let mut d = [1u64; MAX_RANK];
        let mut s = [0u64; MAX_RANK];
        for (i, &(n, st)) in dims.iter().enumerate() {
            d[i] = n as u64;
            s[i] = st as u64;
        }
        Dims8 {
            d0: d[0],
            d1: d[1],
            d2: d[2],
            d3: d[3],
            d4: d[4],
            d5: d[5],
            d6: d[6],
            d7: d[7],
            s0: s[0],
            s1: s[1],
            s2: s[2],
            s3: s[3],
            s4: s[4],
            s5: s[5],
            s6: s[6],
            s7: s[7],
        }
    }
}

/// The offset on the strided side of element `i` of the tight side.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn strided_offset(i: u64, l: Dims8) -> u64 {
    let mut r = i;
    let mut off = (r % l.d0) * l.s0;
    r = r / l.d0;
    off += (r % l.d1) * l.s1;
    r = r / l.d1;
    off += (r % l.d2) * l.s2;
    r = r / l.d2;
    off += (r % l.d3) * l.s3;
    r = r / l.d3;
    off += (r % l.d4) * l.s4;
    r = r / l.d4;
    off += (r % l.d5) * l.s5;
    r = r / l.d5;
    off += (r % l.d6) * l.s6;
    r = r / l.d6;
    off + (r % l.d7) * l.s7
}

/// `out[i] = x[offset(i)]` for every element of `out`.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
pub(crate) fn gather<T: Float>(x: &[T], l: Dims8, out: &mut [T]) {
    let mut i = global_index();
    while i < out.len() {
        out[i] = x[strided_offset(i as u64, l) as usize];
        i += grid_stride();
    }
}

/// `c[offset(i)] = t[i] + beta · c[offset(i)]` for every element of `t` (`beta` = 0:
/// `c` is not read, so what it held — NaN included — does not leak through).
#[atomr_accel_cuda_macros::kernel(crate = crate)]
pub(crate) fn scatter<T: Float>(t: &[T], l: Dims8, beta: f64, c: &mut [T]) {
    let mut i = global_index();
    while i < t.len() {
        let o = strided_offset(i as u64, l) as usize;
        if beta == 0.0 {
            c[o] = t[i];
        } else {
            c[o] = T::from_f64(t[i].to_f64() + beta * c[o].to_f64());
        }
        i += grid_stride();
    }
}

/// Up to eight modes, fastest first: their sizes and the strides of C, A and B along
/// them (unused ones: size 1, strides 0; a broadcast input: stride 0).
#[derive(Debug, Clone, Copy, Default, atomr_accel_cuda_macros::KernelArg)]
#[repr(C)]
pub(crate) struct Modes8 {
    n0: u64,
    n1: u64,
    n2: u64,
    n3: u64,
    n4: u64,
    n5: u64,
    n6: u64,
    n7: u64,
    c0: u64,
    c1: u64,
    c2: u64,
    c3: u64,
    c4: u64,
    c5: u64,
    c6: u64,
    c7: u64,
    a0: u64,
    a1: u64,
    a2: u64,
    a3: u64,
    a4: u64,
    a5: u64,
    a6: u64,
    a7: u64,
    b0: u64,
    b1: u64,
    b2: u64,
    b3: u64,
    b4: u64,
    b5: u64,
    b6: u64,
    b7: u64,
}

impl Modes8 {
    /// `dims` (size and C, A, B strides; slowest first, at most [`MAX_RANK`]) padded
    /// with unit modes, fastest first.
    pub(crate) fn of(dims: &[(usize, usize, usize, usize)]) -> Self {
        debug_assert!(dims.len() <= MAX_RANK);
        let mut n = [1u64; MAX_RANK];
        let (mut c, mut a, mut b) = ([0u64; MAX_RANK], [0u64; MAX_RANK], [0u64; MAX_RANK]);
        for (i, &(size, sc, sa, sb)) in dims.iter().rev().enumerate() {
            (n[i], c[i], a[i], b[i]) = (size as u64, sc as u64, sa as u64, sb as u64);
        }
        let [n0, n1, n2, n3, n4, n5, n6, n7] = n;
        let [c0, c1, c2, c3, c4, c5, c6, c7] = c;
        let [a0, a1, a2, a3, a4, a5, a6, a7] = a;
        let [b0, b1, b2, b3, b4, b5, b6, b7] = b;
        Modes8 {
            n0, n1, n2, n3, n4, n5, n6, n7, c0, c1, c2, c3, c4, c5, c6, c7, a0, a1, a2, a3, a4, a5, a6, a7, b0, b1,
            b2, b3, b4, b5, b6, b7,
        }
    }
}

/// The `k`-th of eight values.
#[atomr_accel_cuda_macros::device(crate = crate)]
#[allow(clippy::too_many_arguments)]
fn pick8(k: u32, v0: u64, v1: u64, v2: u64, v3: u64, v4: u64, v5: u64, v6: u64, v7: u64) -> u64 {
    if k == 0 {
        v0
    } else if k == 1 {
        v1
    } else if k == 2 {
        v2
    } else if k == 3 {
        v3
    } else if k == 4 {
        v4
    } else if k == 5 {
        v5
    } else if k == 6 {
        v6
    } else {
        v7
    }
}

/// The offset of element `i` (counted over the modes, fastest first) in C (`which`
/// 0), A (1) or B (2).
#[atomr_accel_cuda_macros::device(crate = crate)]
fn mode_offset(i: u64, m: Modes8, which: u32) -> u64 {
    let mut r = i;
    let mut off: u64 = 0;
    let mut k: u32 = 0;
    while k < 8 {
        let n = pick8(k, m.n0, m.n1, m.n2, m.n3, m.n4, m.n5, m.n6, m.n7);
        let s = if which == 0 {
            pick8(k, m.c0, m.c1, m.c2, m.c3, m.c4, m.c5, m.c6, m.c7)
        } else if which == 1 {
            pick8(k, m.a0, m.a1, m.a2, m.a3, m.a4, m.a5, m.a6, m.a7)
        } else {
            pick8(k, m.b0, m.b1, m.b2, m.b3, m.b4, m.b5, m.b6, m.b7)
        };
        off += (r % n) * s;
        r = r / n;
        k += 1;
    }
    off
}

/// `op` (0 add, 1 multiply, 2 max, 3 min; NaN wins the last two) of `x` and `y`.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn combine<A: Float>(op: u32, x: A, y: A) -> A {
    if op == 0 {
        x + y
    } else if op == 1 {
        x * y
    } else if x != x || y != y {
        x + y
    } else if op == 2 {
        x.max(y)
    } else {
        x.min(y)
    }
}

/// `c = op(alpha · a, beta · b)` over the `total` elements the modes `m` count.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
pub(crate) fn modes_binary<T: Float, A: Float>(
    a: &[T],
    b: &[T],
    m: Modes8,
    total: usize,
    op: u32,
    alpha: f64,
    beta: f64,
    c: &mut [T],
) {
    let mut i = global_index();
    while i < total {
        let x = A::from_f64(alpha) * A::from_f64(a[mode_offset(i as u64, m, 1) as usize].to_f64());
        let y = A::from_f64(beta) * A::from_f64(b[mode_offset(i as u64, m, 2) as usize].to_f64());
        c[mode_offset(i as u64, m, 0) as usize] = T::from_f64(combine(op, x, y).to_f64());
        i += grid_stride();
    }
}

/// `d = op_abc(op_ab(alpha · a, beta · b), gamma · x)` over the `total` elements the
/// modes `m` count; `mx` holds the same modes with the third input's strides in A's
/// place, so its offset is `mode_offset(i, mx, 1)`.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
pub(crate) fn modes_trinary<T: Float, A: Float>(
    a: &[T],
    b: &[T],
    x: &[T],
    m: Modes8,
    mx: Modes8,
    total: usize,
    ops: u32,
    alpha: f64,
    beta: f64,
    gamma: f64,
    d: &mut [T],
) {
    let mut i = global_index();
    while i < total {
        let va = A::from_f64(alpha) * A::from_f64(a[mode_offset(i as u64, m, 1) as usize].to_f64());
        let vb = A::from_f64(beta) * A::from_f64(b[mode_offset(i as u64, m, 2) as usize].to_f64());
        let vx = A::from_f64(gamma) * A::from_f64(x[mode_offset(i as u64, mx, 1) as usize].to_f64());
        let ab = combine(ops & 3, va, vb);
        d[mode_offset(i as u64, m, 0) as usize] = T::from_f64(combine(ops >> 2, ab, vx).to_f64());
        i += grid_stride();
    }
}

/// `c = alpha · reduce(a) + beta · c` over the `total` elements the modes `m` count,
/// each reducing the `inner` elements the modes `r` count (`beta` 0: `c` not read).
#[atomr_accel_cuda_macros::kernel(crate = crate)]
pub(crate) fn modes_reduce<T: Float, A: Float>(
    a: &[T],
    m: Modes8,
    r: Modes8,
    total: usize,
    inner: usize,
    op: u32,
    alpha: f64,
    beta: f64,
    c: &mut [T],
) {
    let mut i = global_index();
    while i < total {
        let base = mode_offset(i as u64, m, 1);
        let mut acc = A::zero();
        if op == 1 {
            acc = A::one();
        } else if op == 2 {
            acc = -A::infinity();
        } else if op == 3 {
            acc = A::infinity();
        }
        let mut j = 0;
        while j < inner {
            let v = A::from_f64(a[(base + mode_offset(j as u64, r, 1)) as usize].to_f64());
            acc = combine(op, acc, v);
            j += 1;
        }
        let oc = mode_offset(i as u64, m, 0) as usize;
        let mut out = A::from_f64(alpha) * acc;
        if beta != 0.0 {
            out += A::from_f64(beta) * A::from_f64(c[oc].to_f64());
        }
        c[oc] = T::from_f64(out.to_f64());
        i += grid_stride();
    }
}
