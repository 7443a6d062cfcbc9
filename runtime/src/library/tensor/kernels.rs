//! The tensor library's own `#[kernel]`s: a strided gather into a tight buffer (an
//! operand permuted, broadcast or diagonal-read into the column-major batch a GEMM
//! takes) and its inverse, a scatter-add through an output's strides.

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
