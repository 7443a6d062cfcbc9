//! `DnnActor`: the row-wise building blocks of neural networks over f16, bf16, f32 and
//! f64 — softmax and log-softmax over the last axis, layer norm and RMS norm (forward),
//! and a bias added before a nonlinearity (ReLU, GELU, SiLU) — written as `#[kernel]`s
//! of ours (`kernels.rs`), computed in f32 for the 16-bit types and f32 (f64 for f64),
//! as PyTorch computes them. The CPU device runs the same kernels emulated.
//!
//! Tensors are row-major: the ops act on the last axis, `cols` long, of `rows` rows
//! (any leading axes flattened into `rows`).
//!
//! 2-D convolutions (forward, backward-data, backward-filter; NCHW or NHWC, padding,
//! stride, dilation, groups) and pooling (max, average) run through cuDNN on a GPU
//! (`ffi.rs`, `cuda.rs`: each shape planned once, the algorithm from cuDNN's heuristics).
//! Convolutions on the CPU device, and the shapes cuDNN has no algorithm for, run our
//! direct `#[kernel]`s (`conv_kernels.rs`); pooling on the CPU device is a float64 loop
//! (`cpu.rs`).
//!
//! Scaled-dot-product attention (causal or not) is two strided-batched cuBLAS GEMMs
//! (tensor cores for f16/bf16) around our scaled, masked softmax in place, where the
//! scores fit in memory; otherwise one tiled `#[kernel]` of ours in the manner of
//! FlashAttention (`attention_kernel.rs`), on CUDA cores. cuDNN's fused attention (its
//! graph API) is not used yet.

mod attention;
#[cfg(feature = "dnn")]
mod attention_kernel;
mod conv;
#[cfg(feature = "dnn")]
mod conv_kernels;
#[cfg_attr(not(feature = "dnn"), allow(dead_code))]
mod cpu;
#[cfg(feature = "dnn")]
mod cuda;
#[cfg(feature = "dnn")]
mod ffi;
#[cfg(feature = "dnn")]
mod kernels;
mod pool;

pub use attention::{Attention, AttentionLayout, AttentionMethod, GEMM_SCORES_MAX, MAX_HEAD_DIM};
pub use conv::{AlgoSearch, Conv2d, ImageLayout};
pub use pool::{Pool2d, PoolMode};

use atomr_accel_cuda_macros::gpu_actor;

use crate::actor::{Context, Deferred};
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;
use crate::library::shell::Library;

/// Element types of the dnn library, with the type each computes in. cuBLAS multiplies
/// them too ([`BlasBase`](crate::dtype::BlasBase)): attention's two products.
pub trait DnnFloat: crate::kernel::dsl::Float + crate::dtype::BlasBase {
    /// f32 for f16, bf16 and f32; f64 for f64.
    type Acc: crate::kernel::dsl::Float;
}
/// The type `T` computes in (`DnnFloat::Acc`, named apart from `BlasBase::Acc`).
type Acc<T> = <T as DnnFloat>::Acc;

impl DnnFloat for half::f16 {
    type Acc = f32;
}
impl DnnFloat for half::bf16 {
    type Acc = f32;
}
impl DnnFloat for f32 {
    type Acc = f32;
}
impl DnnFloat for f64 {
    type Acc = f64;
}

/// The rows of a row-major tensor that a row-wise op acts on: `rows` rows of `cols`
/// elements (the last axis; leading axes flattened into `rows`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rows {
    /// Number of rows.
    pub rows: usize,
    /// Elements per row: the axis the op acts on.
    pub cols: usize,
}

crate::wire::wire_struct!(Rows { rows, cols });

impl Rows {
    /// `rows` rows of `cols` elements.
    pub fn new(rows: usize, cols: usize) -> Self {
        Rows { rows, cols }
    }
}

/// A layer norm or RMS norm: its rows and the epsilon added to the variance.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// let x = dev.upload(vec![1.0f32, 2.0, 3.0, 4.0]).await?; // one row of four
/// let gamma = dev.upload(vec![1.0f32; 4]).await?;
/// let beta = dev.upload(vec![0.0f32; 4]).await?;
/// let y = dev.alloc::<f32>(4).await?;
/// dev.layer_norm(Norm::new(1, 4), &x, &gamma, &beta, &y).await?;
/// let y = dev.download(&y).await?;
/// assert!((y[0] + 1.3416).abs() < 1e-3 && (y[3] - 1.3416).abs() < 1e-3);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Norm {
    /// Number of rows.
    pub rows: usize,
    /// Elements per row: the normalized axis.
    pub cols: usize,
    /// Added to the variance (or mean square) before the square root.
    pub eps: f64,
}

crate::wire::wire_struct!(Norm { rows, cols, eps });

impl Norm {
    /// `rows` rows of `cols`, with PyTorch's default epsilon (1e-5).
    pub fn new(rows: usize, cols: usize) -> Self {
        Norm { rows, cols, eps: 1e-5 }
    }

    /// Sets epsilon.
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }
}

/// The nonlinearity `bias_activation` applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Nonlinearity {
    /// None: the bias only.
    #[default]
    Identity,
    /// `max(x, 0)`.
    Relu,
    /// GELU in its tanh form (PyTorch's `approximate="tanh"`, cuBLASLt's epilogue):
    /// `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    Gelu,
    /// SiLU (swish): `x / (1 + e^(−x))`.
    Silu,
}

crate::wire::wire_enum!(Nonlinearity {
    Nonlinearity::Identity,
    Nonlinearity::Relu,
    Nonlinearity::Gelu,
    Nonlinearity::Silu
});

impl Nonlinearity {
    /// The kernel's code for it.
    #[cfg_attr(not(feature = "dnn"), allow(dead_code))]
    fn code(self) -> u32 {
        match self {
            Nonlinearity::Identity => 0,
            Nonlinearity::Relu => 1,
            Nonlinearity::Gelu => 2,
            Nonlinearity::Silu => 3,
        }
    }
}

/// Checks that `r` holds `need` elements.
#[cfg_attr(not(feature = "dnn"), allow(dead_code))]
fn holds<T: crate::dtype::DTypeBase>(op: &str, r: &GpuRef<T>, need: usize, what: &str) -> Result<(), GpuError> {
    if r.len() < need {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!("{op}: {what} must hold {need} elements, it has {}", r.len()))
                .arg(what)
                .mismatch(format_args!("≥ {need} elements"), format_args!("{} elements", r.len())),
        ));
    }
    Ok(())
}

/// Checks that the output `y` is apart from each input, or (in place) exactly `x`'s
/// window: every element is read and then written by the same thread, so a row op may
/// overwrite its input, but a shifted overlap would read what another row wrote.
#[cfg_attr(not(feature = "dnn"), allow(dead_code))]
fn apart<T: crate::dtype::DTypeBase>(op: &str, y: &GpuRef<T>, x: &GpuRef<T>, params: &[&GpuRef<T>]) -> Result<(), GpuError> {
    let same = y.same_buffer(x) && y.offset() == x.offset() && y.len() == x.len();
    if (y.overlaps(x) && !same) || params.iter().any(|p| y.overlaps(*p)) {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!(
                "{op}: the output y overlaps an input; give it its own buffer, or x's exact window to work in place"
            ))
            .arg("y")
            .mismatch("apart from the inputs, or x itself", "an overlapping window"),
        ));
    }
    Ok(())
}

/// Checks a row shape: at least one element per row, rows within a grid.
#[cfg_attr(not(feature = "dnn"), allow(dead_code))]
fn shape(op: &str, rows: usize, cols: usize) -> Result<usize, GpuError> {
    if cols == 0 {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!("{op}: rows need at least one element (cols = 0)"))
                .arg("cols")
                .mismatch("≥ 1", 0),
        ));
    }
    if rows > i32::MAX as usize {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!("{op}: {rows} rows is more than a grid holds (2³¹ − 1)"))
                .arg("rows")
                .mismatch("≤ 2³¹ − 1", rows),
        ));
    }
    rows.checked_mul(cols)
        .ok_or_else(|| GpuError::invalid(format!("{op}: {rows} × {cols} elements overflow")))
}

#[cfg(feature = "dnn")]
pub(crate) use core_impl::DnnCore;
#[cfg(not(feature = "dnn"))]
use crate::library::shell::Absent as DnnCore;

#[cfg(feature = "dnn")]
mod core_impl {
    use super::attention::{Attention, AttentionLayout};
    use super::attention_kernel::{attention_forward, ATTENTION_THREADS};
    use super::conv::Conv2d;
    use super::conv_kernels::{conv_backward_data, conv_backward_filter, conv_forward, ConvGeom};
    use super::cpu::{self, Direction};
    use super::cuda::CudaDnn;
    use super::pool::Pool2d;
    use super::kernels::{bias_act, norm_rows, norm_rows4, softmax_rows, softmax_warp_rows, softmax_warp_rows4, THREADS, WARP_ROW_MAX};
    use super::{apart, holds, shape, Acc, AttentionMethod, DnnFloat, Nonlinearity, Norm, Rows};
    use crate::actor::Deferred;
    use crate::error::{GpuError, Invalid};
    use crate::gpu_ref::GpuRef;
    use crate::launch::LaunchConfig;
    use crate::library::blas::{gemm_on, Batch, Gemm};
    use crate::library::engine::Kernels;
    use cudarc::cublas::CudaBlas;
    use crate::library::seed::LibrarySeed;
    use crate::library::shell::Core;

    /// The dnn library of one generation: its kernels on the actor's stream, and on a
    /// GPU its cuDNN handle, made by the first convolution or pooling (a device whose
    /// host lacks cuDNN still runs the row-wise kernels), and its cuBLAS handle, made by
    /// the first attention through GEMMs.
    pub(crate) struct DnnCore(Kernels, Option<CudaDnn>, Option<CudaBlas>);

    impl Core for DnnCore {
        const WHAT: &'static str = "dnn actor";

        fn build(seed: &LibrarySeed) -> Result<Self, GpuError> {
            Ok(DnnCore(Kernels::build(seed)?, None, None))
        }
    }

    /// The cuDNN handle of a core, made on first use.
    fn cudnn<'a>(slot: &'a mut Option<CudaDnn>, stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> Result<&'a mut CudaDnn, GpuError> {
        if slot.is_none() {
            *slot = Some(CudaDnn::new(stream)?);
        }
        Ok(slot.as_mut().expect("just made"))
    }

    /// The cuBLAS handle of a core on `stream`, made on first use.
    fn cublas<'a>(slot: &'a mut Option<CudaBlas>, stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> Result<&'a CudaBlas, GpuError> {
        if slot.is_none() {
            *slot = Some(CudaBlas::new(stream.clone())?);
        }
        Ok(slot.as_ref().expect("just made"))
    }

    /// Where one strided batch of attention's GEMMs finds its matrices: the offset of its
    /// first Q (and O) and K (and V) matrix, how many, and the strides between them.
    struct Group {
        q_at: usize,
        k_at: usize,
        count: usize,
        q_stride: usize,
        k_stride: usize,
    }

    /// The most bytes of scores one batch of attention's GEMMs writes, so that the
    /// temporary is at most this (or one head's scores, where larger) whatever the batch.
    /// Not smaller: batches sized for L2 (8–32 MiB) ran 3–50 % slower on an H100 than one
    /// batch of 256 MiB (BENCHMARKS.md) — more launches, smaller GEMMs.
    const SCORES_CHUNK: usize = 256 << 20;

    /// Attention's GEMM batches, each of at most `per` (batch item, head) matrices: runs
    /// over every (batch item, head) for `[b, h, s, d]`; for `[b, s, h, d]` runs over
    /// each batch item's heads (the heads of a batch item lie `d` apart, the batch items
    /// `s·h·d`: no single stride spans both). With the leading dimension of Q, K, V
    /// and O.
    fn groups(a: &Attention, per: usize) -> (Vec<Group>, usize) {
        let (h, lq, lk, d) = (a.heads, a.queries, a.keys, a.head_dim);
        let runs = |total: usize| (0..total).step_by(per).map(move |first| (first, per.min(total - first)));
        match a.layout {
            AttentionLayout::Bhsd => (
                runs(a.batch * h)
                    .map(|(first, count)| Group {
                        q_at: first * lq * d,
                        k_at: first * lk * d,
                        count,
                        q_stride: lq * d,
                        k_stride: lk * d,
                    })
                    .collect(),
                d,
            ),
            AttentionLayout::Bshd => (
                (0..a.batch)
                    .flat_map(|b| {
                        runs(h).map(move |(first, count)| Group {
                            q_at: b * lq * h * d + first * d,
                            k_at: b * lk * h * d + first * d,
                            count,
                            q_stride: d,
                            k_stride: d,
                        })
                    })
                    .collect(),
                h * d,
            ),
        }
    }

    /// One block per row.
    fn per_row(rows: usize) -> LaunchConfig {
        LaunchConfig {
            grid: (rows as u32, 1, 1),
            block: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    fn valid_eps(op: &str, eps: f64) -> Result<(), GpuError> {
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!("{op}: eps must be finite and ≥ 0, got {eps}"))
                    .arg("eps")
                    .mismatch("finite, ≥ 0", eps),
            ));
        }
        Ok(())
    }

    impl DnnCore {
        /// The input and output of a launch: `x` and `y`, or — in place (`y` is `x`'s
        /// window, which `apart` has let through) — a one-element stand-in for `x`
        /// and `from_y` 1, since a kernel's two parameters may not alias.
        fn source<T: DnnFloat>(&self, x: &GpuRef<T>, y: &GpuRef<T>) -> Result<(GpuRef<T>, u32, GpuRef<T>), GpuError> {
            if y.overlaps(x) {
                Ok((self.0.temp::<T>(1)?, 1, y.clone()))
            } else {
                Ok((x.clone(), 0, y.clone()))
            }
        }

        /// Softmax (`log` false) or log-softmax of each row.
        pub(crate) fn softmax<T: DnnFloat>(&self, op: &'static str, s: Rows, x: &GpuRef<T>, y: &GpuRef<T>, log: bool) -> Result<Deferred<()>, GpuError> {
            for r in [x, y] {
                self.0.check(r)?;
            }
            let n = shape(op, s.rows, s.cols)?;
            holds(op, x, n, "x")?;
            holds(op, y, n, "y")?;
            apart(op, y, x, &[])?;
            if s.rows == 0 {
                return Ok(Deferred::Now(()));
            }
            let (x, from_y, mut y) = self.source(x, y)?;
            let log = u32::from(log);
            let call = if s.cols <= WARP_ROW_MAX {
                let warps = (THREADS / 32) as usize;
                let cfg = LaunchConfig {
                    grid: (s.rows.div_ceil(warps) as u32, 1, 1),
                    ..per_row(1)
                };
                // 16-byte accesses where every row starts 16-byte aligned.
                if s.cols % 4 == 0 && x.offset() % 4 == 0 && y.offset() % 4 == 0 {
                    softmax_warp_rows4::call::<T, Acc<T>, 0>(cfg, &x, s.rows, s.cols, log, from_y, 1.0, 1, 0, &mut y)
                } else {
                    softmax_warp_rows::call::<T, Acc<T>>(cfg, &x, s.rows, s.cols, log, from_y, &mut y)
                }
            } else {
                softmax_rows::call::<T, Acc<T>>(per_row(s.rows), &x, s.cols, log, from_y, &mut y)
            };
            self.0.run("dnn", op, || self.0.launch(call))
        }

        /// Layer norm (with `beta`) or RMS norm (`beta` None) of each row.
        pub(crate) fn norm<T: DnnFloat>(&self, op: &'static str, s: Norm, x: &GpuRef<T>, gamma: &GpuRef<T>, beta: Option<&GpuRef<T>>, y: &GpuRef<T>) -> Result<Deferred<()>, GpuError> {
            for r in [x, gamma, y].into_iter().chain(beta) {
                self.0.check(r)?;
            }
            let n = shape(op, s.rows, s.cols)?;
            valid_eps(op, s.eps)?;
            holds(op, x, n, "x")?;
            holds(op, y, n, "y")?;
            holds(op, gamma, s.cols, "gamma")?;
            if let Some(b) = beta {
                holds(op, b, s.cols, "beta")?;
            }
            apart(op, y, x, &[gamma].into_iter().chain(beta).collect::<Vec<_>>())?;
            if s.rows == 0 {
                return Ok(Deferred::Now(()));
            }
            let (x, from_y, mut y) = self.source(x, y)?;
            // RMS norm reads no beta: gamma stands in for the parameter.
            let (b, rms) = match beta {
                Some(b) => (b, 0),
                None => (gamma, 1),
            };
            // 16-byte accesses where every row, γ and β start 16-byte aligned.
            let quads = s.cols % 4 == 0 && [x.offset(), y.offset(), gamma.offset(), b.offset()].iter().all(|o| o % 4 == 0);
            let call = if quads {
                norm_rows4::call::<T, Acc<T>>(per_row(s.rows), &x, gamma, b, s.cols, s.eps, rms, from_y, &mut y)
            } else {
                norm_rows::call::<T, Acc<T>>(per_row(s.rows), &x, gamma, b, s.cols, s.eps, rms, from_y, &mut y)
            };
            self.0.run("dnn", op, || self.0.launch(call))
        }

        /// The convolution `g` in direction `dir`: `a`, `b` its inputs (forward `x`,
        /// `w`; backward-data `dy`, `w`; backward-filter `x`, `dy`), `out` what it
        /// computes, overwritten.
        pub(crate) fn conv<T: DnnFloat>(&mut self, g: Conv2d, dir: Direction, a: &GpuRef<T>, b: &GpuRef<T>, out: &GpuRef<T>) -> Result<Deferred<()>, GpuError> {
            let op = dir.op();
            for r in [a, b, out] {
                self.0.check(r)?;
            }
            g.check(op)?;
            let (x, w, y) = (g.input_len(), g.filter_len(), g.output_len());
            let named = match dir {
                Direction::Forward => [(a, "x", x), (b, "w", w), (out, "y", y)],
                Direction::BackwardData => [(a, "dy", y), (b, "w", w), (out, "dx", x)],
                Direction::BackwardFilter => [(a, "x", x), (b, "dy", y), (out, "dw", w)],
            };
            for (r, what, need) in named {
                holds(op, r, need, what)?;
            }
            let named = named.map(|(r, what, _)| (r, what));
            crate::gpu_ref::check_apart(op, &named)?;
            let len = named[2].0.len().min(match dir {
                Direction::Forward => y,
                Direction::BackwardData => x,
                Direction::BackwardFilter => w,
            });
            let mut o = out.view(..len)?;
            let geom = ConvGeom::of(&g);
            let mut cfg = LaunchConfig::for_elements(len, THREADS);
            cfg.grid.0 = cfg.grid.0.min(65_536);
            let DnnCore(kernels, slot, _) = self;
            kernels.run("dnn", op, || {
                if let Some(stream) = kernels.stream() {
                    if cudnn(slot, stream)?.conv(&g, dir, named)? {
                        return Ok(());
                    }
                }
                kernels.launch(match dir {
                    Direction::Forward => conv_forward::call::<T, Acc<T>>(cfg, a, b, geom, &mut o),
                    Direction::BackwardData => conv_backward_data::call::<T, Acc<T>>(cfg, a, b, geom, &mut o),
                    Direction::BackwardFilter => conv_backward_filter::call::<T, Acc<T>>(cfg, a, b, geom, &mut o),
                })
            })
        }

        /// Scaled-dot-product attention of `q`, `k`, `v` into `o`.
        pub(crate) fn attention<T: DnnFloat>(&mut self, a: Attention, q: &GpuRef<T>, k: &GpuRef<T>, v: &GpuRef<T>, o: &GpuRef<T>) -> Result<Deferred<()>, GpuError> {
            let op = "attention";
            for r in [q, k, v, o] {
                self.0.check(r)?;
            }
            a.check(op)?;
            holds(op, q, a.query_len(), "q")?;
            holds(op, k, a.key_len(), "k")?;
            holds(op, v, a.key_len(), "v")?;
            holds(op, o, a.query_len(), "o")?;
            if [q, k, v].iter().any(|r| o.overlaps(r)) {
                return Err(GpuError::InvalidArgument(
                    Invalid::new(format!("{op}: the output o overlaps an input; give it its own buffer"))
                        .arg("o")
                        .mismatch("apart from q, k and v", "an overlapping window"),
                ));
            }
            if let Some(fused) = self.attention_cudnn(&a, [q, k, v, o])? {
                return Ok(fused);
            }
            if a.resolved(op, std::mem::size_of::<T>())? == AttentionMethod::Gemm {
                return self.attention_gemm(&a, q, k, v, o);
            }
            let (br, bc, bytes) = a.tiles(std::mem::size_of::<Acc<T>>());
            let cfg = LaunchConfig {
                grid: (a.queries.div_ceil(br) as u32, (a.batch * a.heads) as u32, 1),
                block: (ATTENTION_THREADS, 1, 1),
                shared_mem_bytes: bytes as u32,
            };
            let mut o = o.view(..a.query_len())?;
            let call = attention_forward::call::<T, Acc<T>>(
                cfg,
                q,
                k,
                v,
                a.heads,
                u32::from(a.layout == AttentionLayout::Bshd),
                a.queries,
                a.keys,
                a.head_dim,
                a.scale_factor(),
                u32::from(a.causal),
                br,
                bc,
                &mut o,
            );
            self.0.run("dnn", op, || self.0.launch(call))
        }

        /// [`AttentionMethod::Cudnn`] on a GPU, or `Auto`'s first try (shapes checked by
        /// the caller): the fused attention enqueued where cuDNN has an engine for the
        /// call; `None` where it has not and `Auto` asked (our paths take it), or on the
        /// CPU device; `Unsupported` where `Cudnn` was asked.
        fn attention_cudnn<T: DnnFloat>(&mut self, a: &Attention, [q, k, v, o]: [&GpuRef<T>; 4]) -> Result<Option<Deferred<()>>, GpuError> {
            let strict = match a.method {
                AttentionMethod::Cudnn => true,
                AttentionMethod::Auto => false,
                _ => return Ok(None),
            };
            let DnnCore(kernels, slot, _) = self;
            let Some(stream) = kernels.stream() else {
                return Ok(None);
            };
            let refuse = |why: String| match strict {
                true => Err(GpuError::Unsupported(format!(
                    "attention: AttentionMethod::Cudnn: {why}; use Auto, Gemm or Tiled"
                ))),
                false => Ok(None),
            };
            let elem = std::mem::size_of::<T>();
            if let Some((_, name)) = [(q, "q"), (k, "k"), (v, "v"), (o, "o")].into_iter().find(|(r, _)| r.window().start * elem % 16 != 0) {
                return refuse(format!("{name} does not start on a 16-byte boundary (a view's offset) as cuDNN's fused attention needs"));
            }
            let dnn = match cudnn(slot, stream) {
                Ok(dnn) => dnn,
                Err(e) if strict => return Err(e),
                Err(_) => return Ok(None),
            };
            if !dnn.plans_attention::<T>(a, strict)? {
                return refuse(format!(
                    "cuDNN has no fused attention engine for {}×{} heads × {} queries × {} keys, head_dim {}, {:?}{}, {} \
                     (it takes f16 and bf16, head_dim a multiple of 8 up to 256)",
                    a.batch,
                    a.heads,
                    a.queries,
                    a.keys,
                    a.head_dim,
                    a.layout,
                    if a.causal { ", causal" } else { "" },
                    T::NAME
                ));
            }
            let named = [(q, "q"), (k, "k"), (v, "v"), (o, "o")];
            kernels.run("dnn", "attention", || dnn.attend(a, named)).map(Some)
        }

        /// [`AttentionMethod::Gemm`] (shapes checked by the caller): for each batch of
        /// [`groups`], `S = Q·Kᵀ` into a temporary, the scaled and masked softmax of its
        /// rows in place, `O = P·V` — a batch's scores at most [`SCORES_CHUNK`] bytes
        /// (or one head's), so the temporary stays bounded. Row-major
        /// Q (`lq × d`, rows `ld` apart) is column-major Qᵀ, so the scores, row-major
        /// `lq × lk`, are the column-major `Sᵀ = K·Qᵀ` (A = K transposed, B = Q) and
        /// `Oᵀ = Vᵀ·Pᵀ` (A = V, B = P) — no transposes in memory.
        fn attention_gemm<T: DnnFloat>(&mut self, a: &Attention, q: &GpuRef<T>, k: &GpuRef<T>, v: &GpuRef<T>, o: &GpuRef<T>) -> Result<Deferred<()>, GpuError> {
            let (lq, lk, d) = (a.queries, a.keys, a.head_dim);
            let head = lq * lk;
            let per = (SCORES_CHUNK / head.saturating_mul(std::mem::size_of::<T>())).clamp(1, a.batch * a.heads);
            let (groups, ld) = groups(a, per);
            let most = groups.iter().map(|g| g.count).max().unwrap_or(1);
            // Every element a batch's softmax reads, its first product wrote.
            let scores = self.0.uninit::<T>(most * head)?;
            let standin = self.0.temp::<T>(1)?;
            let one = T::from_f64(1.0);
            let zero = T::from_f64(0.0);
            let product = Gemm::new(lk, lq, d).transposed(true, false).scaled(one, zero).leading(ld, ld, lk);
            let apply = Gemm::new(d, lq, lk).scaled(one, zero).leading(ld, lk, ld);
            // The softmax's rows of the largest batch: a count a grid holds, checked as a
            // row-wise op's.
            shape("attention", most * lq, lk)?;
            let warps = (THREADS / 32) as usize;
            let DnnCore(kernels, _, slot) = self;
            let blas = match kernels.stream() {
                Some(stream) => Some(cublas(slot, stream)?),
                None => None,
            };
            let kernels = &*kernels;
            kernels.run("dnn", "attention", || {
                // The extent of a group's matrices in each operand.
                let span = |at: usize, count: usize, stride: usize, rows: usize| at..at + (count - 1) * stride + (rows - 1) * ld + d;
                for g in &groups {
                    let mut sv = scores.view(..g.count * head)?;
                    let (kv, qv) = (k.view(span(g.k_at, g.count, g.k_stride, lk))?, q.view(span(g.q_at, g.count, g.q_stride, lq))?);
                    let scored = Batch {
                        count: g.count,
                        stride_a: g.k_stride,
                        stride_b: g.q_stride,
                        stride_c: head,
                    };
                    gemm_on(blas, &product, &scored, (&kv, &qv, &sv))?;
                    let rows = g.count * lq;
                    let cfg = LaunchConfig {
                        grid: (rows.div_ceil(warps) as u32, 1, 1),
                        ..per_row(1)
                    };
                    let (scale, causal) = (a.scale_factor(), u32::from(a.causal));
                    kernels.launch(softmax_warp_rows4::call::<T, Acc<T>, 1>(cfg, &standin, rows, lk, 0, 1, scale, lq, causal, &mut sv))?;
                    let (vv, ov) = (v.view(span(g.k_at, g.count, g.k_stride, lk))?, o.view(span(g.q_at, g.count, g.q_stride, lq))?);
                    let applied = Batch {
                        count: g.count,
                        stride_a: g.k_stride,
                        stride_b: head,
                        stride_c: g.q_stride,
                    };
                    gemm_on(blas, &apply, &applied, (&vv, &sv, &ov))?;
                }
                Ok(())
            })
        }

        /// Pools `x` into `y`.
        pub(crate) fn pool<T: DnnFloat>(&mut self, g: Pool2d, x: &GpuRef<T>, y: &GpuRef<T>) -> Result<Deferred<()>, GpuError> {
            let op = "pool2d";
            for r in [x, y] {
                self.0.check(r)?;
            }
            g.check(op)?;
            holds(op, x, g.input_len(), "x")?;
            holds(op, y, g.output_len(), "y")?;
            let named = [(x, "x"), (y, "y")];
            crate::gpu_ref::check_apart(op, &named)?;
            let DnnCore(kernels, slot, _) = self;
            kernels.run("dnn", op, || match kernels.stream() {
                None => crate::gpu_ref::with_parts(op, named, |[rx, ry]| {
                    cpu::pool(&g, rx.into_host()?, ry.into_host()?);
                    Ok(())
                })?,
                Some(stream) => cudnn(slot, stream)?.pool(&g, named),
            })
        }

        /// `y = act(x + bias[column])`.
        pub(crate) fn bias_activation<T: DnnFloat>(&self, s: Rows, act: Nonlinearity, x: &GpuRef<T>, bias: &GpuRef<T>, y: &GpuRef<T>) -> Result<Deferred<()>, GpuError> {
            let op = "bias_activation";
            for r in [x, bias, y] {
                self.0.check(r)?;
            }
            let n = shape(op, s.rows, s.cols)?;
            holds(op, x, n, "x")?;
            holds(op, bias, s.cols, "bias")?;
            holds(op, y, n, "y")?;
            apart(op, y, x, &[bias])?;
            if n == 0 {
                return Ok(Deferred::Now(()));
            }
            let (x, from_y, y) = self.source(x, y)?;
            let mut y = y.view(..n)?;
            let mut cfg = LaunchConfig::for_elements(n, THREADS);
            cfg.grid.0 = cfg.grid.0.min(65_536);
            self.0.run("dnn", op, || {
                self.0.launch(bias_act::call::<T, Acc<T>>(cfg, &x, bias, s.cols, act.code(), from_y, &mut y))
            })
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// Every (batch item, head) matrix lands in exactly one batch of at most `per`,
        /// at its own offsets, in both layouts.
        #[test]
        fn groups_cover_every_head_once() {
            for layout in [AttentionLayout::Bhsd, AttentionLayout::Bshd] {
                let a = Attention::new(3, 5, 7, 11, 4).layout(layout);
                let (h, lq, lk, d) = (5, 7, 11, 4);
                for per in [1, 2, 3, 5, 15] {
                    let (groups, ld) = groups(&a, per);
                    assert_eq!(ld, if layout == AttentionLayout::Bhsd { d } else { h * d });
                    let mut seen = vec![];
                    for g in &groups {
                        assert!((1..=per).contains(&g.count), "{layout:?} per {per}");
                        for i in 0..g.count {
                            seen.push((g.q_at + i * g.q_stride, g.k_at + i * g.k_stride));
                        }
                    }
                    let want: Vec<(usize, usize)> = (0..3)
                        .flat_map(|b| (0..h).map(move |x| (b, x)))
                        .map(|(b, x)| match layout {
                            AttentionLayout::Bhsd => ((b * h + x) * lq * d, (b * h + x) * lk * d),
                            AttentionLayout::Bshd => ((b * lq * h + x) * d, (b * lk * h + x) * d),
                        })
                        .collect();
                    assert_eq!(seen, want, "{layout:?} per {per}");
                }
            }
        }
    }
}

/// The dnn library of a device: row-wise kernels on its own stream.
pub struct DnnActor(pub(crate) Library<DnnCore>);

#[gpu_actor(crate = crate, wire, device, feature = "dnn")]
impl DnnActor {
    /// Builds the core on the actor's own stream.
    #[pre_start]
    async fn start(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.0.start()
    }

    /// `y = softmax(x)` over each row (the last axis): `exp(x − max) / Σ exp(x − max)`,
    /// computed in f32 (f64 for f64). `y` is apart from `x`, or `x` itself (in place).
    #[handler(dtypes(float), device)]
    fn softmax<T: DnnFloat>(&mut self, shape: Rows, x: GpuRef<T>, y: GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.softmax("softmax", shape, &x, &y, false)
    }

    /// `y = log_softmax(x)` over each row: `x − max − ln Σ exp(x − max)`.
    #[handler(dtypes(float), device)]
    fn log_softmax<T: DnnFloat>(&mut self, shape: Rows, x: GpuRef<T>, y: GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.softmax("log_softmax", shape, &x, &y, true)
    }

    /// Layer norm of each row: `(x − mean) / √(var + eps) · gamma + beta` (the biased
    /// variance, as PyTorch's `layer_norm`), `gamma` and `beta` one value per column.
    #[handler(dtypes(float), device)]
    fn layer_norm<T: DnnFloat>(
        &mut self,
        op: Norm,
        x: GpuRef<T>,
        gamma: GpuRef<T>,
        beta: GpuRef<T>,
        y: GpuRef<T>,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.norm("layer_norm", op, &x, &gamma, Some(&beta), &y)
    }

    /// RMS norm of each row: `x / √(mean(x²) + eps) · gamma`.
    #[handler(dtypes(float), device)]
    fn rms_norm<T: DnnFloat>(&mut self, op: Norm, x: GpuRef<T>, gamma: GpuRef<T>, y: GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.norm("rms_norm", op, &x, &gamma, None, &y)
    }

    /// `y = act(x + bias[column])` over each row (a linear layer's bias and activation);
    /// `y` is apart from the inputs, or `x` itself (in place).
    #[handler(dtypes(float), device)]
    fn bias_activation<T: DnnFloat>(
        &mut self,
        shape: Rows,
        act: Nonlinearity,
        x: GpuRef<T>,
        bias: GpuRef<T>,
        y: GpuRef<T>,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.bias_activation(shape, act, &x, &bias, &y)
    }

    /// `y = x ⋆ w`: the 2-D convolution (cross-correlation) `conv` of the images `x`
    /// with the filters `w` (see [`Conv2d`] for their layouts). cuDNN on a GPU, its
    /// algorithm from cuDNN's heuristics, planned once per shape; f32 stays f32 (no
    /// TF32), f16 and bf16 accumulate in f32. `y` lies apart from `x` and `w`.
    #[handler(dtypes(float), device)]
    fn conv2d<T: DnnFloat>(&mut self, conv: Conv2d, x: GpuRef<T>, w: GpuRef<T>, y: GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.conv(conv, cpu::Direction::Forward, &x, &w, &y)
    }

    /// `dx`: the gradient of `conv2d`'s input from the gradient `dy` of its output and
    /// the filters `w` (a transposed convolution), overwritten.
    #[handler(dtypes(float), device)]
    fn conv2d_backward_data<T: DnnFloat>(&mut self, conv: Conv2d, dy: GpuRef<T>, w: GpuRef<T>, dx: GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.conv(conv, cpu::Direction::BackwardData, &dy, &w, &dx)
    }

    /// `dw`: the gradient of `conv2d`'s filters from its input `x` and the gradient
    /// `dy` of its output, overwritten.
    #[handler(dtypes(float), device)]
    fn conv2d_backward_filter<T: DnnFloat>(&mut self, conv: Conv2d, x: GpuRef<T>, dy: GpuRef<T>, dw: GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.conv(conv, cpu::Direction::BackwardFilter, &x, &dy, &dw)
    }

    /// `o = softmax(q·kᵀ·scale [+ causal mask])·v`: scaled-dot-product attention (see
    /// [`Attention`] for the layouts) — two strided-batched GEMMs (cuBLAS on a GPU) with
    /// the softmax in place between them where the scores fit [`GEMM_SCORES_MAX`], else
    /// one tiled kernel of ours whose scores never reach memory ([`AttentionMethod`]
    /// chooses). The softmax computes in f32 (f64 for f64); with the GEMMs the scores
    /// and weights are stored in the element type, as PyTorch's math attention stores
    /// them. `o` lies apart from the inputs.
    #[handler(dtypes(float), device)]
    fn attention<T: DnnFloat>(&mut self, op: Attention, q: GpuRef<T>, k: GpuRef<T>, v: GpuRef<T>, o: GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.attention(op, &q, &k, &v, &o)
    }

    /// `y = pool(x)`: max or average pooling of each channel of each image (see
    /// [`Pool2d`]); cuDNN on a GPU. `y` lies apart from `x`.
    #[handler(dtypes(float), device)]
    fn pool2d<T: DnnFloat>(&mut self, pool: Pool2d, x: GpuRef<T>, y: GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.pool(pool, &x, &y)
    }
}

/// What `atomr_accel_cuda::prelude` takes from this library.
pub mod prelude {
    pub use super::{AlgoSearch, Attention, AttentionLayout, AttentionMethod, Conv2d, ImageLayout, Nonlinearity, Norm, Pool2d, PoolMode, Rows};
}
