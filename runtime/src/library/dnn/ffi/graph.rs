//! cuDNN's graph ("backend") API: a descriptor made, given its attributes, finalized and
//! destroyed once ([`Desc`]); tensors and operations built from them; an operation graph
//! planned through cuDNN's heuristics ([`GraphPlan`]) and run with the addresses of its
//! tensors (a variant pack).
//!
//! Why the backend API and not the legacy one: cuDNN's fused kernels — flash attention
//! among them — exist only as engines of operation graphs. The C++ frontend that
//! PyTorch uses builds the same descriptors; here they are built directly, each call's
//! status checked and named in the error.

use std::ffi::c_void;

use cudarc::cudnn::sys::{
    self, cudnnBackendAttributeName_t as Name, cudnnBackendAttributeType_t as Type, cudnnBackendDescriptorType_t as Kind,
    cudnnDataType_t, cudnnStatus_t,
};

use super::check;
use crate::error::GpuError;

/// One backend descriptor, destroyed when dropped.
pub(crate) struct Desc(sys::cudnnBackendDescriptor_t);

impl Drop for Desc {
    fn drop(&mut self) {
        // SAFETY: the descriptor made in `new`, destroyed once, here.
        let _ = unsafe { sys::cudnnBackendDestroyDescriptor(self.0) };
    }
}

// SAFETY: a descriptor is plain host data of cuDNN's, used by one thread at a time (the
// dnn actor owns its plans; `&mut` access for execution).
unsafe impl Send for Desc {}

/// A value cuDNN reads as one element of an attribute of type [`Attr::TYPE`]: the Rust
/// type has the C type's size and representation.
trait Attr: Copy {
    const TYPE: Type;
}

impl Attr for i64 {
    const TYPE: Type = Type::CUDNN_TYPE_INT64;
}
impl Attr for bool {
    const TYPE: Type = Type::CUDNN_TYPE_BOOLEAN;
}
impl Attr for cudnnDataType_t {
    const TYPE: Type = Type::CUDNN_TYPE_DATA_TYPE;
}
impl Attr for sys::cudnnPointwiseMode_t {
    const TYPE: Type = Type::CUDNN_TYPE_POINTWISE_MODE;
}
impl Attr for sys::cudnnReduceTensorOp_t {
    const TYPE: Type = Type::CUDNN_TYPE_REDUCTION_OPERATOR_TYPE;
}
impl Attr for sys::cudnnBackendHeurMode_t {
    const TYPE: Type = Type::CUDNN_TYPE_HEUR_MODE;
}
impl Attr for f32 {
    const TYPE: Type = Type::CUDNN_TYPE_FLOAT;
}
impl Attr for sys::cudnnConvolutionMode_t {
    const TYPE: Type = Type::CUDNN_TYPE_CONVOLUTION_MODE;
}
impl Attr for sys::cudnnHandle_t {
    const TYPE: Type = Type::CUDNN_TYPE_HANDLE;
}

/// A device or host address in a variant pack.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub(crate) struct Ptr(pub(crate) *mut c_void);

impl Attr for Ptr {
    const TYPE: Type = Type::CUDNN_TYPE_VOID_PTR;
}

/// A descriptor handed to another as an attribute.
#[derive(Clone, Copy)]
#[repr(transparent)]
struct Raw(sys::cudnnBackendDescriptor_t);

impl Attr for Raw {
    const TYPE: Type = Type::CUDNN_TYPE_BACKEND_DESCRIPTOR;
}

/// The error of a graph-API call, named by what it was building (formatted only on
/// failure: attributes are set on every execution's variant pack).
fn named(what: impl std::fmt::Display, s: cudnnStatus_t) -> Result<(), GpuError> {
    check(s).map_err(|e| match e {
        GpuError::Library { lib, code, msg } => GpuError::Library {
            lib,
            code,
            msg: format!("{what}: {msg}"),
        },
        e => e,
    })
}

/// True for the statuses with which cuDNN says it has no engine for a graph (its 3000s,
/// `CUDNN_STATUS_NOT_SUPPORTED…`), as against a failure.
pub(crate) fn unsupported(e: &GpuError) -> bool {
    matches!(e, GpuError::Library { code, .. } if (3000..4000).contains(code))
}

impl Desc {
    /// A new descriptor of `kind`.
    pub(crate) fn new(kind: Kind) -> Result<Self, GpuError> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: FFI edge: cuDNN writes a new descriptor into `raw`.
        named("cudnnBackendCreateDescriptor", unsafe { sys::cudnnBackendCreateDescriptor(kind, &mut raw) })?;
        Ok(Desc(raw))
    }

    /// Sets attribute `name` to `values`.
    fn set<V: Attr>(self, name: Name, values: &[V]) -> Result<Self, GpuError> {
        // SAFETY: `values` are `values.len()` elements of the C type `V::TYPE` names (the
        // `Attr` impls pair each Rust type with the tag of its C type), read during the call.
        let s = unsafe { sys::cudnnBackendSetAttribute(self.0, name, V::TYPE, values.len() as i64, values.as_ptr().cast()) };
        named(format_args!("{name:?}"), s)?;
        Ok(self)
    }

    /// Sets attribute `name` to the descriptors `values`.
    fn set_descs(self, name: Name, values: &[&Desc]) -> Result<Self, GpuError> {
        let raw: Vec<Raw> = values.iter().map(|d| Raw(d.0)).collect();
        self.set(name, &raw)
    }

    /// Finalizes the descriptor (cuDNN checks it whole).
    fn finalize(self, what: &str) -> Result<Self, GpuError> {
        // SAFETY: a live descriptor whose attributes were set above.
        named(what, unsafe { sys::cudnnBackendFinalize(self.0) })?;
        Ok(self)
    }

    /// Reads the one `i64` of attribute `name`.
    fn get_i64(&self, name: Name) -> Result<i64, GpuError> {
        let (mut count, mut value) = (0i64, 0i64);
        // SAFETY: room for one INT64 element, written by cuDNN with the count it wrote.
        let s = unsafe { sys::cudnnBackendGetAttribute(self.0, name, Type::CUDNN_TYPE_INT64, 1, &mut count, (&mut value as *mut i64).cast()) };
        named(format_args!("{name:?}"), s)?;
        Ok(value)
    }
}

/// Whether a tensor is in memory (given by the variant pack), only between two
/// operations of the graph, or a scalar passed by value at execution.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    Memory,
    Virtual,
    ByValue,
}

/// A tensor of the graph: unique id `uid`, elements `data`, 4-D `dims` and `strides`
/// (in elements), its addresses 16-byte aligned.
pub(crate) fn tensor(uid: i64, data: cudnnDataType_t, dims: [i64; 4], strides: [i64; 4], held: Held) -> Result<Desc, GpuError> {
    tensor_aligned(uid, data, dims, strides, held, 16)
}

/// [`tensor`] with its addresses aligned to `align` bytes (engines that load 16 bytes at
/// a time need 16).
pub(crate) fn tensor_aligned(uid: i64, data: cudnnDataType_t, dims: [i64; 4], strides: [i64; 4], held: Held, align: i64) -> Result<Desc, GpuError> {
    Desc::new(Kind::CUDNN_BACKEND_TENSOR_DESCRIPTOR)?
        .set(Name::CUDNN_ATTR_TENSOR_UNIQUE_ID, &[uid])?
        .set(Name::CUDNN_ATTR_TENSOR_DATA_TYPE, &[data])?
        .set(Name::CUDNN_ATTR_TENSOR_DIMENSIONS, &dims)?
        .set(Name::CUDNN_ATTR_TENSOR_STRIDES, &strides)?
        .set(Name::CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, &[align])?
        .set(Name::CUDNN_ATTR_TENSOR_IS_VIRTUAL, &[held == Held::Virtual])?
        .set(Name::CUDNN_ATTR_TENSOR_IS_BY_VALUE, &[held == Held::ByValue])?
        .finalize("tensor")
}

/// `c = a · b` over the last two dimensions (batched over the first two), f32 arithmetic.
pub(crate) fn matmul(a: &Desc, b: &Desc, c: &Desc) -> Result<Desc, GpuError> {
    let desc = Desc::new(Kind::CUDNN_BACKEND_MATMUL_DESCRIPTOR)?
        .set(Name::CUDNN_ATTR_MATMUL_COMP_TYPE, &[cudnnDataType_t::CUDNN_DATA_FLOAT])?
        .finalize("matmul")?;
    Desc::new(Kind::CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR)?
        .set_descs(Name::CUDNN_ATTR_OPERATION_MATMUL_ADESC, &[a])?
        .set_descs(Name::CUDNN_ATTR_OPERATION_MATMUL_BDESC, &[b])?
        .set_descs(Name::CUDNN_ATTR_OPERATION_MATMUL_CDESC, &[c])?
        .set_descs(Name::CUDNN_ATTR_OPERATION_MATMUL_DESC, &[&desc])?
        .finalize("matmul operation")
}

/// The operands of a pointwise operation: `x`, the second input `b`, the selector `t`
/// (of a binary select), and `y`, what it writes.
pub(crate) struct Pointwise<'a> {
    pub(crate) x: &'a Desc,
    pub(crate) b: Option<&'a Desc>,
    pub(crate) t: Option<&'a Desc>,
    pub(crate) y: &'a Desc,
}

/// `y = mode(x, b[, t])` in arithmetic of `precision`; `axis` for an index generator.
pub(crate) fn pointwise(mode: sys::cudnnPointwiseMode_t, precision: cudnnDataType_t, axis: Option<i64>, p: Pointwise<'_>) -> Result<Desc, GpuError> {
    let mut desc = Desc::new(Kind::CUDNN_BACKEND_POINTWISE_DESCRIPTOR)?
        .set(Name::CUDNN_ATTR_POINTWISE_MODE, &[mode])?
        .set(Name::CUDNN_ATTR_POINTWISE_MATH_PREC, &[precision])?;
    if let Some(axis) = axis {
        desc = desc.set(Name::CUDNN_ATTR_POINTWISE_AXIS, &[axis])?;
    }
    let desc = desc.finalize("pointwise")?;
    let mut op = Desc::new(Kind::CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)?
        .set_descs(Name::CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, &[&desc])?
        .set_descs(Name::CUDNN_ATTR_OPERATION_POINTWISE_XDESC, &[p.x])?;
    if let Some(b) = p.b {
        op = op.set_descs(Name::CUDNN_ATTR_OPERATION_POINTWISE_BDESC, &[b])?;
    }
    if let Some(t) = p.t {
        op = op.set_descs(Name::CUDNN_ATTR_OPERATION_POINTWISE_TDESC, &[t])?;
    }
    op.set_descs(Name::CUDNN_ATTR_OPERATION_POINTWISE_YDESC, &[p.y])?
        .finalize(&format!("pointwise {mode:?}"))
}

/// `y = reduce(x)` over the dimensions where `y` has extent 1, f32 arithmetic.
pub(crate) fn reduction(op: sys::cudnnReduceTensorOp_t, x: &Desc, y: &Desc) -> Result<Desc, GpuError> {
    let desc = Desc::new(Kind::CUDNN_BACKEND_REDUCTION_DESCRIPTOR)?
        .set(Name::CUDNN_ATTR_REDUCTION_OPERATOR, &[op])?
        .set(Name::CUDNN_ATTR_REDUCTION_COMP_TYPE, &[cudnnDataType_t::CUDNN_DATA_FLOAT])?
        .finalize("reduction")?;
    Desc::new(Kind::CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR)?
        .set_descs(Name::CUDNN_ATTR_OPERATION_REDUCTION_XDESC, &[x])?
        .set_descs(Name::CUDNN_ATTR_OPERATION_REDUCTION_YDESC, &[y])?
        .set_descs(Name::CUDNN_ATTR_OPERATION_REDUCTION_DESC, &[&desc])?
        .finalize(&format!("reduction {op:?}"))
}

/// A 2-D cross-correlation's geometry: zero padding on both sides, strides and
/// dilations, each (height, width).
pub(crate) struct Window {
    pub(crate) padding: [i64; 2],
    pub(crate) stride: [i64; 2],
    pub(crate) dilation: [i64; 2],
}

/// Which pass of a convolution an operation is, with the attributes of its three
/// operands in the order the caller gives them: forward `(x, w, y)`, backward-data
/// `(dy, w, dx)`, backward-filter `(x, dy, dw)`.
#[derive(Clone, Copy)]
pub(crate) enum ConvPass {
    Forward,
    BackwardData,
    BackwardFilter,
}

/// One pass of a 2-D convolution over `operands` (see [`ConvPass`]), `computed = 1·conv
/// + 0·computed`, in arithmetic of `compute`.
pub(crate) fn convolution(pass: ConvPass, compute: cudnnDataType_t, w: &Window, operands: [&Desc; 3]) -> Result<Desc, GpuError> {
    let conv = Desc::new(Kind::CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)?
        .set(Name::CUDNN_ATTR_CONVOLUTION_COMP_TYPE, &[compute])?
        .set(Name::CUDNN_ATTR_CONVOLUTION_CONV_MODE, &[sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION])?
        .set(Name::CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, &[2i64])?
        .set(Name::CUDNN_ATTR_CONVOLUTION_DILATIONS, &w.dilation)?
        .set(Name::CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, &w.stride)?
        .set(Name::CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, &w.padding)?
        .set(Name::CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, &w.padding)?
        .finalize("convolution")?;
    use Name::*;
    let (kind, names) = match pass {
        ConvPass::Forward => (
            Kind::CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
            [
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
            ],
        ),
        ConvPass::BackwardData => (
            Kind::CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
            [
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
            ],
        ),
        ConvPass::BackwardFilter => (
            Kind::CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
            [
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
            ],
        ),
    };
    let [a, b, c, desc, alpha, beta] = names;
    Desc::new(kind)?
        .set_descs(a, &[operands[0]])?
        .set_descs(b, &[operands[1]])?
        .set_descs(c, &[operands[2]])?
        .set_descs(desc, &[&conv])?
        .set(alpha, &[1.0f32])?
        .set(beta, &[0.0f32])?
        .finalize("convolution operation")
}

/// cuDNN's own scaled-dot-product attention operation (cuDNN 9.13.1 and later): `o =
/// softmax(q·kᵀ · scale) · v`, K given as `[b, h, keys, d]`.
pub(crate) fn sdpa_forward(q: &Desc, k: &Desc, v: &Desc, o: &Desc, scale: &Desc) -> Result<Desc, GpuError> {
    Desc::new(Kind::CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR)?
        .set_descs(Name::CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, &[q])?
        .set_descs(Name::CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, &[k])?
        .set_descs(Name::CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, &[v])?
        .set_descs(Name::CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, &[o])?
        .set_descs(Name::CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, &[scale])?
        .finalize("sdpa forward operation")
}

/// An operation graph's execution plan: the engine cuDNN's heuristics rank first among
/// those that finalize for it, and the workspace it needs.
pub(crate) struct GraphPlan {
    plan: Desc,
    pub(crate) workspace: usize,
    /// The chosen engine's place in the heuristics' ranking (0: their first choice).
    pub(crate) rank: usize,
    /// The graph, its configuration, operations and tensors, kept for the plan's life.
    _keep: Vec<Desc>,
}

/// The plan of the graph of `ops` on `handle`: `None` where cuDNN has no engine for it
/// (the graph is not one its engines fuse, or not on this GPU). `tensors` are the
/// operations' tensors, kept alive with the plan.
pub(crate) fn plan(handle: sys::cudnnHandle_t, ops: Vec<Desc>, tensors: Vec<Desc>) -> Result<Option<GraphPlan>, GpuError> {
    let graph = Desc::new(Kind::CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)?
        .set(Name::CUDNN_ATTR_OPERATIONGRAPH_HANDLE, &[handle])?
        .set_descs(Name::CUDNN_ATTR_OPERATIONGRAPH_OPS, &ops.iter().collect::<Vec<_>>())?;
    let graph = match graph.finalize("operation graph") {
        Err(e) if unsupported(&e) => return Ok(None),
        r => r?,
    };
    let heuristics = Desc::new(Kind::CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)?
        .set_descs(Name::CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, &[&graph])?
        .set(Name::CUDNN_ATTR_ENGINEHEUR_MODE, &[sys::cudnnBackendHeurMode_t::CUDNN_HEUR_MODE_A])?;
    let heuristics = match heuristics.finalize("engine heuristics") {
        Err(e) if unsupported(&e) => return Ok(None),
        r => r?,
    };
    let results = Name::CUDNN_ATTR_ENGINEHEUR_RESULTS;
    let mut count = 0i64;
    // SAFETY: a count query: no elements requested, none written.
    let s = unsafe {
        sys::cudnnBackendGetAttribute(heuristics.0, results, Type::CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &mut count, std::ptr::null_mut())
    };
    named("engine heuristics' count", s)?;
    let configs = (0..count.max(0))
        .map(|_| Desc::new(Kind::CUDNN_BACKEND_ENGINECFG_DESCRIPTOR))
        .collect::<Result<Vec<_>, _>>()?;
    let mut raw: Vec<Raw> = configs.iter().map(|d| Raw(d.0)).collect();
    let mut got = 0i64;
    // SAFETY: `raw` holds `count` engine-config descriptors made above, which cuDNN fills.
    let s = unsafe {
        sys::cudnnBackendGetAttribute(heuristics.0, results, Type::CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &mut got, raw.as_mut_ptr().cast())
    };
    named("engine heuristics' results", s)?;
    let got = (got.max(0) as usize).min(configs.len());
    let mut chosen = None;
    for (rank, config) in configs.iter().enumerate().take(got) {
        let plan = Desc::new(Kind::CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)?
            .set(Name::CUDNN_ATTR_EXECUTION_PLAN_HANDLE, &[handle])?
            .set_descs(Name::CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, &[config])?;
        match plan.finalize("execution plan") {
            Ok(plan) => {
                chosen = Some((rank, plan));
                break;
            }
            Err(e) if unsupported(&e) => continue,
            Err(e) => return Err(e),
        }
    }
    let Some((rank, plan)) = chosen else {
        return Ok(None);
    };
    let workspace = plan.get_i64(Name::CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)?.max(0) as usize;
    let mut keep = configs;
    keep.extend([graph, heuristics]);
    keep.extend(ops);
    keep.extend(tensors);
    Ok(Some(GraphPlan {
        plan,
        workspace,
        rank,
        _keep: keep,
    }))
}

impl GraphPlan {
    /// Enqueues the plan on `handle`'s stream with the tensors `uids` at `ptrs` (device
    /// addresses, or host addresses of by-value scalars, read during this call) and the
    /// workspace at `workspace`.
    ///
    /// # Safety
    /// Each device address must be a live allocation holding its tensor's extent, used in
    /// the handle's stream order; each host address must point to the scalar of its
    /// tensor's type; the workspace at least [`GraphPlan::workspace`] bytes.
    pub(crate) unsafe fn execute(&self, handle: sys::cudnnHandle_t, uids: &[i64], ptrs: &[Ptr], workspace: Ptr) -> Result<(), GpuError> {
        let pack = Desc::new(Kind::CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)?
            .set(Name::CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids)?
            .set(Name::CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, ptrs)?
            .set(Name::CUDNN_ATTR_VARIANT_PACK_WORKSPACE, &[workspace])?
            .finalize("variant pack")?;
        // SAFETY: a finalized plan and pack; the addresses are the caller's contract.
        named("cudnnBackendExecute", unsafe { sys::cudnnBackendExecute(handle, self.plan.0, pack.0) })
    }
}
