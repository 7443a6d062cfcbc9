//! f16 and bf16 convolutions as one-operation graphs of cuDNN's backend API.
//!
//! Why: the legacy `cudnnGet…Algorithm_v7` heuristics choose among cuDNN's legacy
//! kernels; the graph API's heuristics choose among its newer engines too — those
//! PyTorch's cuDNN frontend runs, up to 1.8× faster for f16 NHWC on an H100 (the figures
//! in BENCHMARKS.md). f32 and f64 stay on the legacy path, whose FMA-only choice keeps
//! f32 exact (the graph engines' f32 kernels may use TF32).

use std::ffi::c_void;

use cudarc::cudnn::sys::cudnnDataType_t;

use super::graph::{self, ConvPass, GraphPlan, Held, Ptr, Window};
use super::{Cudnn, Element};
use crate::error::GpuError;
use crate::library::dnn::conv::{Conv2d, ImageLayout};
use crate::library::dnn::cpu::Direction;

/// A planned convolution pass: its graph's plan.
pub(crate) struct ConvGraphPlan {
    plan: GraphPlan,
}

/// Dimensions and strides (in elements) of `(n, c, h, w)` images — or `(k, c, r, s)`
/// filters, which lie as the images do (KRSC beside NHWC) — in `layout`.
fn images(layout: ImageLayout, (n, c, h, w): (usize, usize, usize, usize)) -> ([i64; 4], [i64; 4]) {
    let (n, c, h, w) = (n as i64, c as i64, h as i64, w as i64);
    let strides = match layout {
        ImageLayout::Nchw => [c * h * w, h * w, w, 1],
        ImageLayout::Nhwc => [h * w * c, 1, w * c, c],
    };
    ([n, c, h, w], strides)
}

/// Whether the graph path takes convolutions of `e`: f16 and bf16.
pub(crate) fn graphed(e: Element) -> bool {
    matches!(e.data, cudnnDataType_t::CUDNN_DATA_HALF | cudnnDataType_t::CUDNN_DATA_BFLOAT16)
}

impl Cudnn {
    /// The graph plan of `g` in direction `dir` over `e`, its operands' addresses
    /// aligned to `align` bytes (a power of two up to 16): `None` where cuDNN has no
    /// engine for it.
    pub(crate) fn conv_graph_plan(&self, g: &Conv2d, dir: Direction, e: Element, align: i64) -> Result<Option<ConvGraphPlan>, GpuError> {
        let (p, q) = g.output();
        let x = images(g.layout, (g.batch, g.in_channels, g.input.0, g.input.1));
        let y = images(g.layout, (g.batch, g.out_channels, p, q));
        let w = images(g.layout, (g.out_channels, g.in_channels / g.groups, g.kernel.0, g.kernel.1));
        let tensor = |uid: i64, (dims, strides): ([i64; 4], [i64; 4])| graph::tensor_aligned(uid, e.data, dims, strides, Held::Memory, align);
        // Operands in the order of `Direction`'s (a, b, out), uids 0, 1, 2.
        let (pass, [a, b, out]) = match dir {
            Direction::Forward => (ConvPass::Forward, [x, w, y]),
            Direction::BackwardData => (ConvPass::BackwardData, [y, w, x]),
            Direction::BackwardFilter => (ConvPass::BackwardFilter, [x, y, w]),
        };
        let (a, b, out) = (tensor(0, a)?, tensor(1, b)?, tensor(2, out)?);
        let window = Window {
            padding: [g.padding.0 as i64, g.padding.1 as i64],
            stride: [g.stride.0 as i64, g.stride.1 as i64],
            dilation: [g.dilation.0 as i64, g.dilation.1 as i64],
        };
        let op = graph::convolution(pass, e.compute, &window, [&a, &b, &out])?;
        Ok(graph::plan(self.handle, vec![op], vec![a, b, out])?.map(|plan| ConvGraphPlan { plan }))
    }

    /// Enqueues `plan` on the handle's stream: `a` and `b` read, `out` written (device
    /// addresses of buffers the caller checked hold the plan's shape, ordered on this
    /// stream).
    pub(crate) fn convolve_graph(&mut self, plan: &ConvGraphPlan, [a, b, out]: [u64; 3]) -> Result<(), GpuError> {
        let work = self.workspace(plan.plan.workspace)?;
        let ptrs = [a, b, out].map(|p| Ptr(p as *mut c_void));
        // SAFETY: the caller's addresses hold the plan's operands, in this stream's
        // order; the workspace is at least the plan's.
        unsafe { plan.plan.execute(self.handle, &[0, 1, 2], &ptrs, Ptr(work)) }
    }
}
