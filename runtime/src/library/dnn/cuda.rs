//! The GPU side of the dnn library's convolutions and pooling: cuDNN on the actor's
//! stream, each shape planned once (descriptors and the heuristics' algorithm, cached
//! per shape, direction and dtype) and every buffer's address taken in stream order
//! (after its last writer on another stream, the use recorded) for the enqueue.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};

use super::attention::{Attention, AttentionLayout};
use super::conv::{AlgoSearch, Conv2d};
use super::cpu::Direction;
use super::ffi::attention::{fusable, AttentionPlan};
use super::ffi::conv_graph::{graphed, ConvGraphPlan};
use super::ffi::{ConvPlan, Cudnn, Element, PoolPlan};
use super::pool::Pool2d;
use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::gpu_ref::{with_parts, GpuRef, RegionMut};

/// Operands of a routine: each handle and its name in errors.
pub(super) type Named<'a, T> = (&'a GpuRef<T>, &'a str);

/// The cuDNN handle of one dnn actor and its plans.
pub(super) struct CudaDnn {
    cudnn: Cudnn,
    stream: Arc<CudaStream>,
    /// `None`: cuDNN has no algorithm for the shape (the caller runs our kernels).
    convs: HashMap<(Conv2d, Direction, Element), Option<ConvPlan>>,
    /// f16/bf16 convolutions through the graph API, by shape, direction, dtype and the
    /// operands' alignment; `None`: no engine (the legacy path runs it).
    conv_graphs: HashMap<(Conv2d, Direction, Element, i64), Option<ConvGraphPlan>>,
    pools: HashMap<(Pool2d, Element), PoolPlan>,
    /// `None`: cuDNN has no fused engine for the shape.
    attentions: HashMap<(AttentionKey, Element), Option<AttentionPlan>>,
}

/// What an attention plan depends on: the shape, layout and mask (not the scale, passed
/// by value at each call, nor the method).
type AttentionKey = ([usize; 5], AttentionLayout, bool);

fn attention_key(a: &Attention) -> AttentionKey {
    ([a.batch, a.heads, a.queries, a.keys, a.head_dim], a.layout, a.causal)
}

/// The device address of a region for a use on `stream`, ordered after its last writer
/// (and, for a write, its readers); the guard records the use when dropped.
macro_rules! address {
    ($region:expr, $stream:expr, $writes:expr) => {
        match $region {
            RegionMut::Cuda(c) if $writes => Ok(c.device_ptr_mut($stream)),
            RegionMut::Cuda(c) => Ok(c.device_ptr($stream)),
            RegionMut::Cpu(_) => Err(GpuError::invalid("a CPU-device buffer on a CUDA stream")),
        }
    };
}

/// Runs `f` with the device addresses of `a` and `b` (read) and `out` (written), each
/// ordered on `stream` (their uses recorded when `f` returns): a routine's enqueue.
fn with_addresses<T: DTypeBase>(
    op: &str,
    stream: &Arc<CudaStream>,
    [a, b, out]: [Named<'_, T>; 3],
    f: impl FnOnce([u64; 3]) -> Result<(), GpuError>,
) -> Result<(), GpuError> {
    with_parts(op, [a, b, out], |[mut ra, mut rb, mut ro]| {
        let (pa, _ga) = address!(&mut ra, stream, false)?;
        let (pb, _gb) = address!(&mut rb, stream, false)?;
        let (po, _go) = address!(&mut ro, stream, true)?;
        f([pa, pb, po])
    })?
}

impl CudaDnn {
    /// A cuDNN handle on `stream`: `Unsupported` where cuDNN is not installed.
    pub(super) fn new(stream: &Arc<CudaStream>) -> Result<Self, GpuError> {
        Ok(CudaDnn {
            cudnn: Cudnn::new(stream.clone())?,
            stream: stream.clone(),
            convs: HashMap::new(),
            conv_graphs: HashMap::new(),
            pools: HashMap::new(),
            attentions: HashMap::new(),
        })
    }

    /// Enqueues the convolution `g` in direction `dir`: `a`, `b` its inputs, `out` what
    /// it computes (all checked by the caller: shapes, lengths, apart). False, with
    /// nothing enqueued, where cuDNN has no algorithm for the shape.
    pub(super) fn conv<T: DTypeBase>(&mut self, g: &Conv2d, dir: Direction, [a, b, out]: [Named<'_, T>; 3]) -> Result<bool, GpuError> {
        let e = Element::of::<T>()?;
        if graphed(e) && g.search == AlgoSearch::Heuristic && self.conv_graph(g, dir, e, [a, b, out])? {
            return Ok(true);
        }
        let key = (*g, dir, e);
        if !self.convs.contains_key(&key) {
            let plan = self.cudnn.plan(g, dir, e)?;
            if plan.is_none() {
                tracing::debug!(op = dir.op(), ?g, dtype = T::NAME, "cuDNN has no algorithm: our direct kernel runs it");
            }
            self.convs.insert(key, plan);
        }
        let Some(plan) = &self.convs[&key] else {
            return Ok(false);
        };
        let cudnn = &mut self.cudnn;
        with_addresses(dir.op(), &self.stream, [a, b, out], |[pa, pb, po]| cudnn.convolve(plan, pa, pb, po))?;
        Ok(true)
    }

    /// [`CudaDnn::conv`] through a graph-API plan (f16, bf16): false, with nothing
    /// enqueued, where cuDNN's graph heuristics have no engine for it — or failed, which
    /// is logged — and the legacy path is to run it.
    fn conv_graph<T: DTypeBase>(&mut self, g: &Conv2d, dir: Direction, e: Element, [a, b, out]: [Named<'_, T>; 3]) -> Result<bool, GpuError> {
        // The largest power of two up to 16 dividing every operand's byte offset
        // (allocations themselves are 256-byte aligned).
        let align = [a.0, b.0, out.0]
            .iter()
            .map(|r| (r.window().start * std::mem::size_of::<T>()) | 16)
            .map(|bytes| 1i64 << bytes.trailing_zeros().min(4))
            .min()
            .unwrap_or(16);
        let key = (*g, dir, e, align);
        if !self.conv_graphs.contains_key(&key) {
            let plan = match self.cudnn.conv_graph_plan(g, dir, e, align) {
                Ok(plan) => plan,
                Err(err) => {
                    tracing::warn!(op = dir.op(), ?g, dtype = T::NAME, %err, "cuDNN's graph API failed to plan: its legacy API runs it");
                    None
                }
            };
            self.conv_graphs.insert(key, plan);
        }
        let Some(plan) = &self.conv_graphs[&key] else {
            return Ok(false);
        };
        let cudnn = &mut self.cudnn;
        with_addresses(dir.op(), &self.stream, [a, b, out], |addresses| cudnn.convolve_graph(plan, addresses))?;
        Ok(true)
    }

    /// Enqueues the pooling `g` of `x` into `y` (checked by the caller).
    pub(super) fn pool<T: DTypeBase>(&mut self, g: &Pool2d, [x, y]: [Named<'_, T>; 2]) -> Result<(), GpuError> {
        let e = Element::of::<T>()?;
        let key = (*g, e);
        if !self.pools.contains_key(&key) {
            let plan = self.cudnn.pool_plan(g, e)?;
            self.pools.insert(key, plan);
        }
        let plan = &self.pools[&key];
        let (cudnn, stream) = (&mut self.cudnn, &self.stream);
        with_parts("pool2d", [x, y], |[mut rx, mut ry]| {
            let (px, _gx) = address!(&mut rx, stream, false)?;
            let (py, _gy) = address!(&mut ry, stream, true)?;
            cudnn.pool(plan, px, py)
        })?
    }

    /// Plans attention `a` over `T` (once per shape): true if cuDNN has a fused engine
    /// for it. With `strict`, a failure of cuDNN's is the caller's error; without, it is
    /// logged and the shape left to our paths.
    pub(super) fn plans_attention<T: DTypeBase>(&mut self, a: &Attention, strict: bool) -> Result<bool, GpuError> {
        let e = Element::of::<T>()?;
        if !fusable(a, e) {
            return Ok(false);
        }
        let key = (attention_key(a), e);
        if !self.attentions.contains_key(&key) {
            let plan = match self.cudnn.attention_plan(a, e) {
                Ok(plan) => plan,
                Err(err) if !strict => {
                    tracing::warn!(?a, dtype = T::NAME, %err, "cuDNN's fused attention failed to plan: the GEMMs run it");
                    None
                }
                Err(err) => return Err(err),
            };
            match &plan {
                None => tracing::debug!(?a, dtype = T::NAME, "cuDNN has no fused attention engine for the shape"),
                Some(p) => {
                    let (rank, workspace) = p.describe();
                    tracing::debug!(?a, dtype = T::NAME, rank, workspace, "cuDNN's fused attention planned");
                }
            }
            self.attentions.insert(key, plan);
        }
        Ok(self.attentions[&key].is_some())
    }

    /// Enqueues attention `a` planned by [`CudaDnn::plans_attention`] (shapes, lengths,
    /// alignment and apartness checked by the caller): Q, K, V read, O written.
    pub(super) fn attend<T: DTypeBase>(&mut self, a: &Attention, [q, k, v, o]: [Named<'_, T>; 4]) -> Result<(), GpuError> {
        let key = (attention_key(a), Element::of::<T>()?);
        let Some(Some(plan)) = self.attentions.get(&key) else {
            return Err(GpuError::invalid("attention: not planned for cuDNN"));
        };
        let (cudnn, stream) = (&mut self.cudnn, &self.stream);
        let scale = a.scale_factor() as f32;
        with_parts("attention", [q, k, v, o], |[mut rq, mut rk, mut rv, mut ro]| {
            let (pq, _gq) = address!(&mut rq, stream, false)?;
            let (pk, _gk) = address!(&mut rk, stream, false)?;
            let (pv, _gv) = address!(&mut rv, stream, false)?;
            let (po, _go) = address!(&mut ro, stream, true)?;
            cudnn.attend(plan, scale, [pq, pk, pv, po])
        })?
    }
}
