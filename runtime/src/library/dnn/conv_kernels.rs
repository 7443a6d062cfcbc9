//! Direct 2-D convolutions as `#[kernel]`s, one per direction, each thread computing one
//! element of what its direction produces (an output pixel, an input-gradient pixel, a
//! filter-gradient tap) by walking the taps that reach it, accumulating in `A` (f32 for
//! the 16-bit types and f32, f64 for f64).
//!
//! Why ours beside cuDNN: the CPU device runs them emulated (one implementation on both
//! backends, checked against the tests' float64 reference), and on a GPU they serve the
//! shapes cuDNN's legacy API has no algorithm for (some dilated, grouped or f64 NHWC
//! backward passes) — slower than cuDNN's implicit GEMMs, but every shape runs.

use super::conv::{Conv2d, ImageLayout};
use crate::kernel::dsl::prelude::*;

/// A convolution's geometry as the kernels read it.
#[derive(Debug, Clone, Copy, Default, atomr_accel_cuda_macros::KernelArg)]
#[repr(C)]
pub(crate) struct ConvGeom {
    n: u64,
    c: u64,
    h: u64,
    w: u64,
    k: u64,
    r: u64,
    s: u64,
    p: u64,
    q: u64,
    pad_h: u64,
    pad_w: u64,
    stride_h: u64,
    stride_w: u64,
    dil_h: u64,
    dil_w: u64,
    groups: u64,
    /// 1 for NHWC (filters KRSC), 0 for NCHW (filters KCRS).
    nhwc: u64,
}

impl ConvGeom {
    /// The geometry of `g` (checked by the caller).
    pub(crate) fn of(g: &Conv2d) -> Self {
        let (p, q) = g.output();
        let u = |v: usize| v as u64;
        ConvGeom {
            n: u(g.batch),
            c: u(g.in_channels),
            h: u(g.input.0),
            w: u(g.input.1),
            k: u(g.out_channels),
            r: u(g.kernel.0),
            s: u(g.kernel.1),
            p: u(p),
            q: u(q),
            pad_h: u(g.padding.0),
            pad_w: u(g.padding.1),
            stride_h: u(g.stride.0),
            stride_w: u(g.stride.1),
            dil_h: u(g.dilation.0),
            dil_w: u(g.dilation.1),
            groups: u(g.groups),
            nhwc: u64::from(g.layout == ImageLayout::Nhwc),
        }
    }
}

/// The element `(n, c, h, w)` of images of `cs` channels of `hs × ws`.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn at(nhwc: u64, cs: u64, hs: u64, ws: u64, n: u64, c: u64, h: u64, w: u64) -> u64 {
    if nhwc == 1 {
        ((n * hs + h) * ws + w) * cs + c
    } else {
        ((n * cs + c) * hs + h) * ws + w
    }
}

/// The channel of element `i` of images of `cs` channels of `hs × ws`.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn channel_of(nhwc: u64, cs: u64, hs: u64, ws: u64, i: u64) -> u64 {
    if nhwc == 1 {
        i % cs
    } else {
        (i / (hs * ws)) % cs
    }
}

/// The row of element `i`.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn row_of(nhwc: u64, cs: u64, hs: u64, ws: u64, i: u64) -> u64 {
    if nhwc == 1 {
        (i / (ws * cs)) % hs
    } else {
        (i / ws) % hs
    }
}

/// The column of element `i`.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn column_of(nhwc: u64, cs: u64, ws: u64, i: u64) -> u64 {
    if nhwc == 1 {
        (i / cs) % ws
    } else {
        i % ws
    }
}

/// `y = x ⋆ w`: each thread one output element.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
pub(crate) fn conv_forward<T: Float, A: Float>(x: &[T], w: &[T], g: ConvGeom, y: &mut [T]) {
    let cg = g.c / g.groups;
    let kg = g.k / g.groups;
    let mut i = global_index();
    while i < y.len() {
        let e = i as u64;
        let n = e / (g.k * g.p * g.q);
        let k = channel_of(g.nhwc, g.k, g.p, g.q, e);
        let oh = row_of(g.nhwc, g.k, g.p, g.q, e);
        let ow = column_of(g.nhwc, g.k, g.q, e);
        let base = (k / kg) * cg;
        let mut acc = A::zero();
        let mut c = 0;
        while c < cg {
            let mut r = 0;
            while r < g.r {
                let ih = (oh * g.stride_h + r * g.dil_h) as i64 - g.pad_h as i64;
                if ih >= 0 && ih < g.h as i64 {
                    let mut s = 0;
                    while s < g.s {
                        let iw = (ow * g.stride_w + s * g.dil_w) as i64 - g.pad_w as i64;
                        if iw >= 0 && iw < g.w as i64 {
                            let xv = x[at(g.nhwc, g.c, g.h, g.w, n, base + c, ih as u64, iw as u64) as usize];
                            let wv = w[at(g.nhwc, cg, g.r, g.s, k, c, r, s) as usize];
                            acc += A::from_f64(xv.to_f64()) * A::from_f64(wv.to_f64());
                        }
                        s += 1;
                    }
                }
                r += 1;
            }
            c += 1;
        }
        y[i] = T::from_f64(acc.to_f64());
        i += grid_stride();
    }
}

/// `dx` from `dy` and `w`: each thread one input element, summing the taps whose
/// window covers it (a row `t = ih + pad − r·dil` of the dilated window is an output
/// row when `t` is a multiple of the stride and below `p`).
#[atomr_accel_cuda_macros::kernel(crate = crate)]
pub(crate) fn conv_backward_data<T: Float, A: Float>(dy: &[T], w: &[T], g: ConvGeom, dx: &mut [T]) {
    let cg = g.c / g.groups;
    let kg = g.k / g.groups;
    let mut i = global_index();
    while i < dx.len() {
        let e = i as u64;
        let n = e / (g.c * g.h * g.w);
        let ci = channel_of(g.nhwc, g.c, g.h, g.w, e);
        let ih = row_of(g.nhwc, g.c, g.h, g.w, e) as i64;
        let iw = column_of(g.nhwc, g.c, g.w, e) as i64;
        let c = ci % cg;
        let first = (ci / cg) * kg;
        let mut acc = A::zero();
        let mut kk = 0;
        while kk < kg {
            let k = first + kk;
            let mut r = 0;
            while r < g.r {
                let th = ih + g.pad_h as i64 - (r * g.dil_h) as i64;
                if th >= 0 && th % g.stride_h as i64 == 0 && th / (g.stride_h as i64) < g.p as i64 {
                    let oh = (th / g.stride_h as i64) as u64;
                    let mut s = 0;
                    while s < g.s {
                        let tw = iw + g.pad_w as i64 - (s * g.dil_w) as i64;
                        if tw >= 0 && tw % g.stride_w as i64 == 0 && tw / (g.stride_w as i64) < g.q as i64 {
                            let ow = (tw / g.stride_w as i64) as u64;
                            let dv = dy[at(g.nhwc, g.k, g.p, g.q, n, k, oh, ow) as usize];
                            let wv = w[at(g.nhwc, cg, g.r, g.s, k, c, r, s) as usize];
                            acc += A::from_f64(dv.to_f64()) * A::from_f64(wv.to_f64());
                        }
                        s += 1;
                    }
                }
                r += 1;
            }
            kk += 1;
        }
        dx[i] = T::from_f64(acc.to_f64());
        i += grid_stride();
    }
}

/// `dw` from `x` and `dy`: each thread one filter element, summing over every image and
/// output pixel.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
pub(crate) fn conv_backward_filter<T: Float, A: Float>(x: &[T], dy: &[T], g: ConvGeom, dw: &mut [T]) {
    let cg = g.c / g.groups;
    let kg = g.k / g.groups;
    let mut i = global_index();
    while i < dw.len() {
        let e = i as u64;
        // Filters are images of `cg` channels of `r × s`, one per output channel.
        let k = e / (cg * g.r * g.s);
        let c = channel_of(g.nhwc, cg, g.r, g.s, e);
        let r = row_of(g.nhwc, cg, g.r, g.s, e);
        let s = column_of(g.nhwc, cg, g.s, e);
        let ci = (k / kg) * cg + c;
        let mut acc = A::zero();
        let mut n = 0;
        while n < g.n {
            let mut oh = 0;
            while oh < g.p {
                let ih = (oh * g.stride_h + r * g.dil_h) as i64 - g.pad_h as i64;
                if ih >= 0 && ih < g.h as i64 {
                    let mut ow = 0;
                    while ow < g.q {
                        let iw = (ow * g.stride_w + s * g.dil_w) as i64 - g.pad_w as i64;
                        if iw >= 0 && iw < g.w as i64 {
                            let xv = x[at(g.nhwc, g.c, g.h, g.w, n, ci, ih as u64, iw as u64) as usize];
                            let dv = dy[at(g.nhwc, g.k, g.p, g.q, n, k, oh, ow) as usize];
                            acc += A::from_f64(xv.to_f64()) * A::from_f64(dv.to_f64());
                        }
                        ow += 1;
                    }
                }
                oh += 1;
            }
            n += 1;
        }
        dw[i] = T::from_f64(acc.to_f64());
        i += grid_stride();
    }
}
