//! cuDNN's convolutions and pooling (its legacy descriptor API, present in cuDNN 8 and
//! 9) as safe calls on stream-ordered device addresses: the dnn library's FFI edge.
//!
//! cudarc's safe cuDNN layer types every descriptor by a Rust element type; the dnn
//! actor's handlers are generic over [`DnnFloat`](super::DnnFloat) alone, so here each
//! descriptor is a value destroyed once, typed by cuDNN's own data type, and a
//! convolution is a [`ConvPlan`]: its four descriptors, the algorithm cuDNN's heuristics
//! chose and the workspace it needs — made once per shape and cached by the caller.
//! The handle is bound to one stream and keeps one workspace, grown on demand (reuse is
//! safe: every routine runs on that stream, in order). Shapes are the caller's to check
//! (`Conv2d::check`, `Pool2d::check`); the routines trust them, as cuDNN does.

use std::ffi::{c_int, c_void, CStr};
use std::sync::Arc;

use cudarc::cudnn::sys::{
    self, cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdFilterAlgo_t, cudnnConvolutionFwdAlgo_t, cudnnDataType_t,
    cudnnMathType_t, cudnnStatus_t, cudnnTensorFormat_t,
};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

pub(crate) mod attention;
pub(crate) mod conv_graph;
pub(crate) mod graph;

use super::conv::{AlgoSearch, Conv2d, ImageLayout};
use super::cpu::Direction;
use super::pool::{Pool2d, PoolMode};
use crate::dtype::DTypeBase;
use crate::error::{GpuError, Lib};

/// True if cuDNN's library can be loaded (cudarc panics on first use when it cannot).
pub(crate) fn cudnn_present() -> bool {
    // SAFETY: only tries to open the shared library; no cuDNN call is made.
    unsafe { sys::is_culib_present() }
}

/// The classified error of a cuDNN status, with cuDNN's own description.
fn check(s: cudnnStatus_t) -> Result<(), GpuError> {
    s.result().map_err(|e| {
        // SAFETY: `cudnnGetErrorString` returns a static NUL-terminated string for every
        // status value (cuDNN's documented contract); it is only read here.
        let msg = unsafe {
            let p = sys::cudnnGetErrorString(e.0);
            if p.is_null() {
                format!("{:?}", e.0)
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        GpuError::Library {
            lib: Lib::Cudnn,
            code: e.0 as i32,
            msg,
        }
    })
}

/// cuDNN's types for elements of `T`: the data and the arithmetic (f32 for the 16-bit
/// types, as cuDNN's "pseudo-half" configuration and PyTorch compute them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Element {
    data: cudnnDataType_t,
    compute: cudnnDataType_t,
}

impl Element {
    /// The types of `T`: f16, bf16, f32 or f64 (the dnn library's dtypes).
    pub(crate) fn of<T: DTypeBase>() -> Result<Self, GpuError> {
        use cudnnDataType_t::*;
        let data = match T::NAME {
            "f16" => CUDNN_DATA_HALF,
            "bf16" => CUDNN_DATA_BFLOAT16,
            "f32" => CUDNN_DATA_FLOAT,
            "f64" => CUDNN_DATA_DOUBLE,
            other => return Err(GpuError::Unsupported(format!("cuDNN has no routines of {other} here"))),
        };
        let compute = if data == CUDNN_DATA_DOUBLE { CUDNN_DATA_DOUBLE } else { CUDNN_DATA_FLOAT };
        Ok(Element { data, compute })
    }

    /// Where f32 must stay f32: its convolutions use FMA units only (never TF32 tensor
    /// cores, as our GEMMs unless asked).
    fn strict(self) -> bool {
        self.data == cudnnDataType_t::CUDNN_DATA_FLOAT
    }
}

/// The scaling factors `alpha = 1`, `beta = 0` in the type cuDNN reads for `e`: f64 for
/// double data, f32 otherwise.
enum Scale {
    F32([f32; 2]),
    F64([f64; 2]),
}

impl Scale {
    fn of(e: Element) -> Self {
        if e.data == cudnnDataType_t::CUDNN_DATA_DOUBLE {
            Scale::F64([1.0, 0.0])
        } else {
            Scale::F32([1.0, 0.0])
        }
    }

    /// Pointers to alpha and beta, valid while `self` lives.
    fn ptrs(&self) -> (*const c_void, *const c_void) {
        match self {
            Scale::F32(v) => ((&v[0]) as *const f32 as _, (&v[1]) as *const f32 as _),
            Scale::F64(v) => ((&v[0]) as *const f64 as _, (&v[1]) as *const f64 as _),
        }
    }
}

/// Writes a descriptor type: created by `$create`, destroyed once by `$destroy`.
macro_rules! descriptor {
    ($(#[$doc:meta])* $name:ident($raw:ty) = $create:ident / $destroy:ident) => {
        $(#[$doc])*
        pub(crate) struct $name($raw);

        impl $name {
            fn create() -> Result<Self, GpuError> {
                let mut raw = std::ptr::null_mut();
                // SAFETY: FFI edge: cuDNN writes a new descriptor into `raw`.
                check(unsafe { sys::$create(&mut raw) })?;
                Ok($name(raw))
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: a descriptor made by `create`, destroyed once, here. A failure
                // (only for an invalid descriptor) leaves nothing to do.
                let _ = unsafe { sys::$destroy(self.0) };
            }
        }
    };
}

descriptor!(
    /// A 4-D tensor descriptor (a batch of images).
    Tensor(sys::cudnnTensorDescriptor_t) = cudnnCreateTensorDescriptor / cudnnDestroyTensorDescriptor
);
descriptor!(
    /// A filter descriptor.
    Filter(sys::cudnnFilterDescriptor_t) = cudnnCreateFilterDescriptor / cudnnDestroyFilterDescriptor
);
descriptor!(
    /// A convolution descriptor: padding, stride, dilation, groups, arithmetic.
    Convolution(sys::cudnnConvolutionDescriptor_t) = cudnnCreateConvolutionDescriptor / cudnnDestroyConvolutionDescriptor
);
descriptor!(
    /// A pooling descriptor: window, padding, stride, mode.
    Pooling(sys::cudnnPoolingDescriptor_t) = cudnnCreatePoolingDescriptor / cudnnDestroyPoolingDescriptor
);

/// A dimension as cuDNN's `int` (the caller's check keeps it within).
fn int(v: usize) -> c_int {
    v as c_int
}

fn format(layout: ImageLayout) -> cudnnTensorFormat_t {
    match layout {
        ImageLayout::Nchw => cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
        ImageLayout::Nhwc => cudnnTensorFormat_t::CUDNN_TENSOR_NHWC,
    }
}

impl Tensor {
    /// Images of `(n, c, h, w)` in `layout`.
    fn images(e: Element, layout: ImageLayout, (n, c, h, w): (usize, usize, usize, usize)) -> Result<Self, GpuError> {
        let t = Tensor::create()?;
        // SAFETY: FFI edge: a live descriptor and plain values.
        check(unsafe { sys::cudnnSetTensor4dDescriptor(t.0, format(layout), e.data, int(n), int(c), int(h), int(w)) })?;
        Ok(t)
    }
}

/// The algorithm of a convolution, in its direction.
#[derive(Debug, Clone, Copy)]
enum Algo {
    Forward(cudnnConvolutionFwdAlgo_t),
    Data(cudnnConvolutionBwdDataAlgo_t),
    Filter(cudnnConvolutionBwdFilterAlgo_t),
}

/// A convolution ready to run: its descriptors, the algorithm cuDNN's heuristics chose
/// and the workspace that algorithm needs.
pub(crate) struct ConvPlan {
    x: Tensor,
    w: Filter,
    conv: Convolution,
    y: Tensor,
    algo: Algo,
    workspace: usize,
    scale: Scale,
}

// SAFETY: descriptors are plain host structures with no thread affinity; a plan is used
// by the one dnn actor that owns it (`&` access under its `&mut` core).
unsafe impl Send for ConvPlan {}

/// A pooling ready to run: its descriptors.
pub(crate) struct PoolPlan {
    x: Tensor,
    y: Tensor,
    pool: Pooling,
    scale: Scale,
}

// SAFETY: as `ConvPlan`'s.
unsafe impl Send for PoolPlan {}

/// The best heuristic choice among `n` results of a `_v7` query: the first that cuDNN
/// can run, skipping tensor-core math for strict f32.
macro_rules! pick {
    ($results:expr, $n:expr, $strict:expr) => {
        $results[..$n.max(0) as usize]
            .iter()
            .find(|r| {
                r.status == cudnnStatus_t::CUDNN_STATUS_SUCCESS
                    && !($strict
                        && matches!(
                            r.mathType,
                            cudnnMathType_t::CUDNN_TENSOR_OP_MATH | cudnnMathType_t::CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                        ))
            })
            .map(|r| (r.algo, r.mathType))
    };
}

/// The handle of one dnn actor, bound to its stream, with its workspace.
pub(crate) struct Cudnn {
    handle: sys::cudnnHandle_t,
    stream: Arc<CudaStream>,
    /// Grown on demand; dropped (freed on the stream, after every routine enqueued
    /// before) when a larger one replaces it. Its address is taken once, when made: it
    /// is only ever used on this stream, in order.
    work: Option<(CudaSlice<u8>, u64)>,
}

// SAFETY: the handle is used by one thread at a time: the dnn actor owns its `Cudnn`
// (`&mut` access only), as cudarc's own handles are `Send`.
unsafe impl Send for Cudnn {}

impl Drop for Cudnn {
    fn drop(&mut self) {
        // SAFETY: the handle made in `new`, destroyed once, here.
        let _ = unsafe { sys::cudnnDestroy(self.handle) };
    }
}

impl Cudnn {
    /// A handle whose routines run on `stream`: `Unsupported` where cuDNN's library is
    /// not installed.
    pub(crate) fn new(stream: Arc<CudaStream>) -> Result<Self, GpuError> {
        if !cudnn_present() {
            return Err(GpuError::Unsupported(
                "cuDNN's library (libcudnn.so.9 or .8) is not installed or not on LD_LIBRARY_PATH: convolutions and \
                 pooling need it on a GPU (pip's nvidia-cudnn-cu13 or nvidia-cudnn-cu12 brings one; add its lib \
                 directory to LD_LIBRARY_PATH)"
                    .into(),
            ));
        }
        stream.context().bind_to_thread()?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: FFI edge: cuDNN writes a new handle into `handle`.
        check(unsafe { sys::cudnnCreate(&mut handle) })?;
        let dnn = Cudnn {
            handle,
            stream,
            work: None,
        };
        // SAFETY: a live handle and the stream's own handle (kept alive by the `Arc`
        // beside it for the handle's life).
        check(unsafe { sys::cudnnSetStream(dnn.handle, dnn.stream.cu_stream() as sys::cudaStream_t) })?;
        Ok(dnn)
    }

    /// The workspace's address, at least `bytes` long (one byte at least, so that it is
    /// a real allocation), for a routine enqueued on the handle's stream.
    fn workspace(&mut self, bytes: usize) -> Result<*mut c_void, GpuError> {
        if self.work.as_ref().is_none_or(|(w, _)| w.len() < bytes.max(1)) {
            self.work = None;
            let w = self.stream.alloc_zeros::<u8>(bytes.max(1))?;
            let ptr = w.device_ptr(&self.stream).0;
            self.work = Some((w, ptr));
        }
        Ok(self.work.as_ref().expect("just made").1 as *mut c_void)
    }

    /// The plan of `g` in direction `dir` for elements `e`: its descriptors and the
    /// algorithm cuDNN's heuristics rank first (`cudnnGet…Algorithm_v7`), with its math
    /// type and workspace; `None` where cuDNN has no algorithm for the shape.
    pub(crate) fn plan(&self, g: &Conv2d, dir: Direction, e: Element) -> Result<Option<ConvPlan>, GpuError> {
        let (p, q) = g.output();
        let x = Tensor::images(e, g.layout, (g.batch, g.in_channels, g.input.0, g.input.1))?;
        let y = Tensor::images(e, g.layout, (g.batch, g.out_channels, p, q))?;
        let w = Filter::create()?;
        let conv = Convolution::create()?;
        let initial = if e.strict() {
            cudnnMathType_t::CUDNN_FMA_MATH
        } else if e.data == cudnnDataType_t::CUDNN_DATA_DOUBLE {
            cudnnMathType_t::CUDNN_DEFAULT_MATH
        } else {
            cudnnMathType_t::CUDNN_TENSOR_OP_MATH
        };
        // SAFETY: FFI edge: live descriptors and plain values.
        unsafe {
            check(sys::cudnnSetFilter4dDescriptor(
                w.0,
                e.data,
                format(g.layout),
                int(g.out_channels),
                int(g.in_channels / g.groups),
                int(g.kernel.0),
                int(g.kernel.1),
            ))?;
            check(sys::cudnnSetConvolution2dDescriptor(
                conv.0,
                int(g.padding.0),
                int(g.padding.1),
                int(g.stride.0),
                int(g.stride.1),
                int(g.dilation.0),
                int(g.dilation.1),
                sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
                e.compute,
            ))?;
            check(sys::cudnnSetConvolutionGroupCount(conv.0, int(g.groups)))?;
            check(sys::cudnnSetConvolutionMathType(conv.0, initial))?;
        }
        let mut n: c_int = 0;
        let benchmark = g.search == AlgoSearch::Benchmark;
        // SAFETY: FFI edge: live handle and descriptors; each results array holds 16
        // entries and cuDNN writes at most the requested count. `cudnnFind…` allocates
        // its own buffers and waits for the GPU; `cudnnGet…_v7` only ranks.
        let algo = unsafe {
            match dir {
                Direction::Forward => {
                    let mut r = [std::mem::zeroed::<sys::cudnnConvolutionFwdAlgoPerf_t>(); 16];
                    let (h, rp) = (self.handle, r.as_mut_ptr());
                    check(if benchmark {
                        sys::cudnnFindConvolutionForwardAlgorithm(h, x.0, w.0, conv.0, y.0, 16, &mut n, rp)
                    } else {
                        sys::cudnnGetConvolutionForwardAlgorithm_v7(h, x.0, w.0, conv.0, y.0, 16, &mut n, rp)
                    })?;
                    pick!(r, n, e.strict()).map(|(a, m)| (Algo::Forward(a), m))
                }
                Direction::BackwardData => {
                    let mut r = [std::mem::zeroed::<sys::cudnnConvolutionBwdDataAlgoPerf_t>(); 16];
                    let (h, rp) = (self.handle, r.as_mut_ptr());
                    check(if benchmark {
                        sys::cudnnFindConvolutionBackwardDataAlgorithm(h, w.0, y.0, conv.0, x.0, 16, &mut n, rp)
                    } else {
                        sys::cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w.0, y.0, conv.0, x.0, 16, &mut n, rp)
                    })?;
                    pick!(r, n, e.strict()).map(|(a, m)| (Algo::Data(a), m))
                }
                Direction::BackwardFilter => {
                    let mut r = [std::mem::zeroed::<sys::cudnnConvolutionBwdFilterAlgoPerf_t>(); 16];
                    let (h, rp) = (self.handle, r.as_mut_ptr());
                    check(if benchmark {
                        sys::cudnnFindConvolutionBackwardFilterAlgorithm(h, x.0, y.0, conv.0, w.0, 16, &mut n, rp)
                    } else {
                        sys::cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x.0, y.0, conv.0, w.0, 16, &mut n, rp)
                    })?;
                    pick!(r, n, e.strict()).map(|(a, m)| (Algo::Filter(a), m))
                }
            }
        };
        let Some((algo, math)) = algo else {
            return Ok(None);
        };
        let mut workspace = 0usize;
        // SAFETY: FFI edge: live handle and descriptors, the algorithm cuDNN chose.
        unsafe {
            if !e.strict() {
                check(sys::cudnnSetConvolutionMathType(conv.0, math))?;
            }
            check(match algo {
                Algo::Forward(a) => {
                    sys::cudnnGetConvolutionForwardWorkspaceSize(self.handle, x.0, w.0, conv.0, y.0, a, &mut workspace)
                }
                Algo::Data(a) => {
                    sys::cudnnGetConvolutionBackwardDataWorkspaceSize(self.handle, w.0, y.0, conv.0, x.0, a, &mut workspace)
                }
                Algo::Filter(a) => {
                    sys::cudnnGetConvolutionBackwardFilterWorkspaceSize(self.handle, x.0, y.0, conv.0, w.0, a, &mut workspace)
                }
            })?;
        }
        tracing::debug!(op = dir.op(), ?g, ?algo, ?math, workspace, "cuDNN convolution planned");
        Ok(Some(ConvPlan {
            x,
            w,
            conv,
            y,
            algo,
            workspace,
            scale: Scale::of(e),
        }))
    }

    /// Enqueues `plan`'s convolution: `a` and `b` its inputs in the order its direction
    /// names them (forward `x`, `w`; backward-data `dy`, `w`; backward-filter `x`,
    /// `dy`), `out` what it computes (overwritten). Addresses are the caller's, taken
    /// in stream order and of the lengths the plan's shape gives.
    pub(crate) fn convolve(&mut self, plan: &ConvPlan, a: u64, b: u64, out: u64) -> Result<(), GpuError> {
        let ws = self.workspace(plan.workspace)?;
        let (alpha, beta) = plan.scale.ptrs();
        let (a, b, out) = (a as *const c_void, b as *const c_void, out as *mut c_void);
        let p = plan;
        // SAFETY: FFI edge: live handle and descriptors; the addresses hold the plan's
        // shapes (the caller checked their lengths) and the workspace `p.workspace` bytes;
        // alpha and beta live in the plan.
        check(unsafe {
            match p.algo {
                Algo::Forward(algo) => sys::cudnnConvolutionForward(
                    self.handle, alpha, p.x.0, a, p.w.0, b, p.conv.0, algo, ws, p.workspace, beta, p.y.0, out,
                ),
                Algo::Data(algo) => sys::cudnnConvolutionBackwardData(
                    self.handle, alpha, p.w.0, b, p.y.0, a, p.conv.0, algo, ws, p.workspace, beta, p.x.0, out,
                ),
                Algo::Filter(algo) => sys::cudnnConvolutionBackwardFilter(
                    self.handle, alpha, p.x.0, a, p.y.0, b, p.conv.0, algo, ws, p.workspace, beta, p.w.0, out,
                ),
            }
        })
    }

    /// The plan of the pooling `g` for elements `e`: its descriptors.
    pub(crate) fn pool_plan(&self, g: &Pool2d, e: Element) -> Result<PoolPlan, GpuError> {
        let (p, q) = g.output();
        let x = Tensor::images(e, g.layout, (g.batch, g.channels, g.input.0, g.input.1))?;
        let y = Tensor::images(e, g.layout, (g.batch, g.channels, p, q))?;
        let pool = Pooling::create()?;
        let mode = match g.mode {
            PoolMode::Max => sys::cudnnPoolingMode_t::CUDNN_POOLING_MAX_DETERMINISTIC,
            PoolMode::Average => sys::cudnnPoolingMode_t::CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
            PoolMode::AverageOfValid => sys::cudnnPoolingMode_t::CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
        };
        // SAFETY: FFI edge: a live descriptor and plain values.
        check(unsafe {
            sys::cudnnSetPooling2dDescriptor(
                pool.0,
                mode,
                sys::cudnnNanPropagation_t::CUDNN_PROPAGATE_NAN,
                int(g.window.0),
                int(g.window.1),
                int(g.padding.0),
                int(g.padding.1),
                int(g.stride.0),
                int(g.stride.1),
            )
        })?;
        Ok(PoolPlan {
            x,
            y,
            pool,
            scale: Scale::of(e),
        })
    }

    /// Enqueues `plan`'s pooling of `x` into `y` (addresses in stream order, of the
    /// lengths the plan's shape gives).
    pub(crate) fn pool(&mut self, plan: &PoolPlan, x: u64, y: u64) -> Result<(), GpuError> {
        let (alpha, beta) = plan.scale.ptrs();
        // SAFETY: FFI edge: live handle and descriptors; the addresses hold the shapes
        // (the caller checked their lengths); alpha and beta live in the plan.
        check(unsafe {
            sys::cudnnPoolingForward(
                self.handle,
                plan.pool.0,
                alpha,
                plan.x.0,
                x as *const c_void,
                beta,
                plan.y.0,
                y as *mut c_void,
            )
        })
    }
}
