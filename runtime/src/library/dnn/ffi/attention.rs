//! cuDNN's fused (flash) attention as an operation graph of the backend API, the graph
//! PyTorch's cuDNN attention builds: non-causal, cuDNN's own attention operation (cuDNN
//! 9.13.1 and later); causal — or before 9.13.1 — the composite graph its fused engines
//! match: `S = Q·Kᵀ`, `S·scale`, the causal mask (row and column indices, `row ≥ col`,
//! a select of −∞), the softmax as max, subtract, exp, sum, divide (with the log-sum-exp
//! statistics its engines expect, kept virtual), and `O = P·V`. The scores never reach
//! memory. f16 and bf16 only (cuDNN's fused attention runs on tensor cores); addresses
//! 16-byte aligned, `head_dim` a multiple of 8.

use std::ffi::c_void;

use cudarc::cudnn::sys::{self, cudnnDataType_t as Data, cudnnPointwiseMode_t as Mode, cudnnReduceTensorOp_t as Reduce};

use super::graph::{self, Desc, GraphPlan, Held, Pointwise, Ptr};
use super::{Cudnn, Element};
use crate::error::GpuError;
use crate::library::dnn::attention::{Attention, AttentionLayout};

/// The unique ids of the graph's tensors in memory or passed by value.
const Q: i64 = 0;
const K: i64 = 1;
const V: i64 = 2;
const O: i64 = 3;
const SCALE: i64 = 5;
const MASKED: i64 = 10;

/// The first cuDNN with its own attention operation.
const SDPA_OPERATION: usize = 91301;

/// A planned attention: its graph's plan and whether it takes the mask's fill value.
pub(crate) struct AttentionPlan {
    plan: GraphPlan,
    causal: bool,
}

impl AttentionPlan {
    /// The chosen engine's place in cuDNN's ranking and the workspace bytes it takes
    /// (for the debug trace).
    pub(crate) fn describe(&self) -> (usize, usize) {
        (self.plan.rank, self.plan.workspace)
    }
}

/// Dimensions and strides (in elements) of Q, K, V or O of `seq` rows, as cuDNN's
/// `[batch, heads, seq, head_dim]` view of `a`'s layout.
fn operand(a: &Attention, seq: usize) -> ([i64; 4], [i64; 4]) {
    let (b, h, s, d) = (a.batch as i64, a.heads as i64, seq as i64, a.head_dim as i64);
    let strides = match a.layout {
        AttentionLayout::Bhsd => [h * s * d, s * d, d, 1],
        AttentionLayout::Bshd => [s * h * d, d, h * d, 1],
    };
    ([b, h, s, d], strides)
}

/// A virtual f32 tensor of every score (`[b, h, queries, keys]`), or of one per row.
fn scores(a: &Attention, uid: i64, data: Data, per_row: bool) -> Result<Desc, GpuError> {
    let (b, h, lq, lk) = (a.batch as i64, a.heads as i64, a.queries as i64, a.keys as i64);
    let (dims, strides) = match per_row {
        false => ([b, h, lq, lk], [h * lq * lk, lq * lk, lk, 1]),
        true => ([b, h, lq, 1], [h * lq, lq, 1, 1]),
    };
    graph::tensor(uid, data, dims, strides, Held::Virtual)
}

/// A by-value f32 scalar.
fn scalar(uid: i64) -> Result<Desc, GpuError> {
    graph::tensor(uid, Data::CUDNN_DATA_FLOAT, [1; 4], [1; 4], Held::ByValue)
}

/// A pointwise operation of f32 arithmetic on `x` (and `b`) into `y`.
fn pw(mode: Mode, x: &Desc, b: Option<&Desc>, y: &Desc) -> Result<Desc, GpuError> {
    graph::pointwise(mode, Data::CUDNN_DATA_FLOAT, None, Pointwise { x, b, t: None, y })
}

impl Cudnn {
    /// The plan of attention `a` on elements `e` (f16 or bf16): `None` where cuDNN has no
    /// fused engine for it (its version, this GPU, the shape).
    pub(crate) fn attention_plan(&self, a: &Attention, e: Element) -> Result<Option<AttentionPlan>, GpuError> {
        // SAFETY: a version query, no arguments.
        let version = unsafe { sys::cudnnGetVersion() };
        if !a.causal && version >= SDPA_OPERATION {
            if let Some(plan) = self.sdpa_operation(a, e.data)? {
                return Ok(Some(AttentionPlan { plan, causal: false }));
            }
        }
        Ok(self.composite(a, e.data)?.map(|plan| AttentionPlan { plan, causal: a.causal }))
    }

    /// The graph of cuDNN's own attention operation (not causal).
    fn sdpa_operation(&self, a: &Attention, data: Data) -> Result<Option<GraphPlan>, GpuError> {
        let (qd, qs) = operand(a, a.queries);
        let (kd, ks) = operand(a, a.keys);
        let q = graph::tensor(Q, data, qd, qs, Held::Memory)?;
        let k = graph::tensor(K, data, kd, ks, Held::Memory)?;
        let v = graph::tensor(V, data, kd, ks, Held::Memory)?;
        let o = graph::tensor(O, data, qd, qs, Held::Memory)?;
        let scale = scalar(SCALE)?;
        let op = graph::sdpa_forward(&q, &k, &v, &o, &scale)?;
        graph::plan(self.handle, vec![op], vec![q, k, v, o, scale])
    }

    /// The composite graph (see the module's docs).
    fn composite(&self, a: &Attention, data: Data) -> Result<Option<GraphPlan>, GpuError> {
        let f32 = Data::CUDNN_DATA_FLOAT;
        let (qd, qs) = operand(a, a.queries);
        let (kd, ks) = operand(a, a.keys);
        // Kᵀ: K's last two dimensions swapped, strides with them — no copy.
        let (ktd, kts) = ([kd[0], kd[1], kd[3], kd[2]], [ks[0], ks[1], ks[3], ks[2]]);
        let q = graph::tensor(Q, data, qd, qs, Held::Memory)?;
        let kt = graph::tensor(K, data, ktd, kts, Held::Memory)?;
        let v = graph::tensor(V, data, kd, ks, Held::Memory)?;
        let o = graph::tensor(O, data, qd, qs, Held::Memory)?;
        let scale = scalar(SCALE)?;
        let s = scores(a, 4, f32, false)?;
        let scaled = scores(a, 6, f32, false)?;
        let mut ops = vec![graph::matmul(&q, &kt, &s)?, pw(Mode::CUDNN_POINTWISE_MUL, &s, Some(&scale), &scaled)?];
        let mut tensors = vec![];
        let masked = if a.causal {
            let row = scores(a, 7, Data::CUDNN_DATA_INT32, false)?;
            let col = scores(a, 8, Data::CUDNN_DATA_INT32, false)?;
            let keep = scores(a, 9, Data::CUDNN_DATA_BOOLEAN, false)?;
            let fill = scalar(MASKED)?;
            let masked = scores(a, 11, f32, false)?;
            let index = |axis: i64, y: &Desc| {
                graph::pointwise(Mode::CUDNN_POINTWISE_GEN_INDEX, f32, Some(axis), Pointwise { x: &scaled, b: None, t: None, y })
            };
            ops.push(index(3, &col)?);
            ops.push(index(2, &row)?);
            ops.push(graph::pointwise(
                Mode::CUDNN_POINTWISE_CMP_GE,
                Data::CUDNN_DATA_BOOLEAN,
                None,
                Pointwise { x: &row, b: Some(&col), t: None, y: &keep },
            )?);
            ops.push(graph::pointwise(
                Mode::CUDNN_POINTWISE_BINARY_SELECT,
                f32,
                None,
                Pointwise { x: &scaled, b: Some(&fill), t: Some(&keep), y: &masked },
            )?);
            tensors.extend([row, col, keep, fill]);
            Some(masked)
        } else {
            None
        };
        let logits = masked.as_ref().unwrap_or(&scaled);
        let max = scores(a, 14, f32, true)?;
        let shifted = scores(a, 15, f32, false)?;
        let exp = scores(a, 16, f32, false)?;
        let sum = scores(a, 17, f32, true)?;
        let log = scores(a, 18, f32, true)?;
        let stats = scores(a, 12, f32, true)?;
        let p = scores(a, 13, data, false)?;
        ops.push(graph::reduction(Reduce::CUDNN_REDUCE_TENSOR_MAX, logits, &max)?);
        ops.push(pw(Mode::CUDNN_POINTWISE_SUB, logits, Some(&max), &shifted)?);
        ops.push(pw(Mode::CUDNN_POINTWISE_EXP, &shifted, None, &exp)?);
        ops.push(graph::reduction(Reduce::CUDNN_REDUCE_TENSOR_ADD, &exp, &sum)?);
        ops.push(pw(Mode::CUDNN_POINTWISE_LOG, &sum, None, &log)?);
        ops.push(pw(Mode::CUDNN_POINTWISE_ADD, &max, Some(&log), &stats)?);
        ops.push(pw(Mode::CUDNN_POINTWISE_DIV, &exp, Some(&sum), &p)?);
        ops.push(graph::matmul(&p, &v, &o)?);
        tensors.extend([q, kt, v, o, scale, s, scaled, max, shifted, exp, sum, log, stats, p]);
        tensors.extend(masked);
        graph::plan(self.handle, ops, tensors)
    }

    /// Enqueues `plan` on the handle's stream: Q, K, V at `q`, `k`, `v`, O written at
    /// `o` (device addresses of buffers the caller checked hold the plan's shape and
    /// ordered on this stream), the scores scaled by `scale`.
    pub(crate) fn attend(&mut self, plan: &AttentionPlan, scale: f32, [q, k, v, o]: [u64; 4]) -> Result<(), GpuError> {
        let work = self.workspace(plan.plan.workspace)?;
        // The mask's fill: the lowest f32 (cuDNN's frontend uses it too; −∞ would make a
        // row of no key NaN, though none is, causal rows seeing key 0 at least).
        let (scale, fill) = (scale, f32::MIN);
        let device = |a: u64| Ptr(a as *mut c_void);
        let host = |x: &f32| Ptr((x as *const f32).cast_mut().cast());
        let mut uids = vec![Q, K, V, O, SCALE];
        let mut ptrs = vec![device(q), device(k), device(v), device(o), host(&scale)];
        if plan.causal {
            uids.push(MASKED);
            ptrs.push(host(&fill));
        }
        // SAFETY: the caller's addresses hold Q, K, V and O of the planned shape, in this
        // stream's order; `scale` and `fill` are f32s alive for the call (by-value
        // scalars are read during it); the workspace is at least the plan's.
        unsafe { plan.plan.execute(self.handle, &uids, &ptrs, Ptr(work)) }
    }
}

/// Whether cuDNN's fused attention can take `a` over elements of `e` at all (before
/// asking it): f16 or bf16, `head_dim` a multiple of 8 up to 256.
pub(crate) fn fusable(a: &Attention, e: Element) -> bool {
    matches!(e.data, Data::CUDNN_DATA_HALF | Data::CUDNN_DATA_BFLOAT16) && a.head_dim % 8 == 0 && a.head_dim <= 256
}
