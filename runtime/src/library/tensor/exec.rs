//! The tensor library's core: a contraction's plan (`einsum.rs`) carried out on the
//! kernel libraries' backend shape (`library/engine.rs`: temporaries and kernel launches
//! on the actor's stream, or emulated on the CPU device) plus the GEMM — cuBLAS on that
//! stream, or the host GEMM.

use cudarc::cublas::CudaBlas;

use super::einsum::{merge, Dim, Plan, Sink, Source, MAX_RANK};
use super::kernels::{gather, modes_binary, modes_reduce, modes_trinary, scatter, Dims8, Modes8};
use super::modes::{Elementwise, ElementwiseTrinary, ModeDim, TensorReduction};
use super::plans::{Planned, Plans};
use super::{Contraction, TensorFloat};
use crate::actor::Deferred;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;
use crate::launch::LaunchConfig;
use crate::library::blas::{gemm_on, Batch, Gemm};
use crate::library::engine::Kernels;
use crate::library::seed::LibrarySeed;
use crate::library::shell::Core;

/// The tensor library of one generation: our kernels and, on a GPU, a cuBLAS handle on
/// the same stream.
pub(crate) struct TensorCore {
    kernels: Kernels,
    blas: Option<CudaBlas>,
    /// The contractions planned so far, for their next call.
    plans: Plans,
}

impl Core for TensorCore {
    const WHAT: &'static str = "tensor actor";

    fn build(seed: &LibrarySeed) -> Result<Self, GpuError> {
        let kernels = Kernels::build(seed)?;
        let blas = match kernels.stream() {
            Some(stream) => Some(CudaBlas::new(stream.clone())?),
            None => None,
        };
        Ok(TensorCore {
            kernels,
            blas,
            plans: Plans::default(),
        })
    }
}

/// Threads per block of the gather and scatter kernels; blocks beyond what fills the
/// GPU loop over the rest (grid-stride).
const THREADS: u32 = 256;
const MAX_BLOCKS: usize = 65_536;

fn config(n: usize) -> LaunchConfig {
    let mut cfg = LaunchConfig::for_elements(n, THREADS);
    cfg.grid.0 = cfg.grid.0.min(MAX_BLOCKS as u32);
    cfg
}

/// The dimensions of a gather or scatter, merged, at most [`MAX_RANK`].
fn dims8(dims: &[Dim], what: &str) -> Result<Dims8, GpuError> {
    let merged = merge(dims);
    if merged.len() > MAX_RANK {
        return Err(GpuError::Unsupported(format!(
            "einsum: {what} needs a permutation of {} dimensions that do not merge; at most {MAX_RANK} are supported",
            merged.len()
        )));
    }
    Ok(Dims8::of(&merged))
}

/// The modes of a plan (slowest first) as a kernel takes them: at most [`MAX_RANK`].
fn modes8(dims: &[ModeDim], what: &str) -> Result<Modes8, GpuError> {
    // Unit modes change no offset: dropped, so more real ones fit.
    let dims: Vec<_> = dims.iter().filter(|d| d.size != 1).map(|d| (d.size, d.c, d.a, d.b)).collect();
    if dims.len() > MAX_RANK {
        return Err(GpuError::Unsupported(format!(
            "{what}: {} modes of more than one element; at most {MAX_RANK} are supported",
            dims.len()
        )));
    }
    Ok(Modes8::of(&dims))
}

/// Refuses an output that overlaps an input.
fn apart<T: crate::dtype::DTypeBase>(op: &str, out: &GpuRef<T>, inputs: &[&GpuRef<T>]) -> Result<(), GpuError> {
    if inputs.iter().any(|x| out.overlaps(x)) {
        let name = if inputs.len() == 3 { "D" } else { "C" };
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!("{op}: the output {name} must not overlap an input (disjoint views of one buffer may)"))
                .arg(name.to_lowercase())
                .mismatch("elements apart from the inputs'", "elements of an input"),
        ));
    }
    Ok(())
}

impl TensorCore {
    /// Carries out `spec` (see `TensorActor::elementwise`).
    pub(crate) fn elementwise<T: TensorFloat>(&self, spec: &Elementwise, a: &GpuRef<T>, b: &GpuRef<T>, c: &GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        for r in [a, b, c] {
            self.kernels.check(r)?;
        }
        let plan = spec.plan()?;
        spec.a.check(a.len(), "A", false)?;
        spec.b.check(b.len(), "B", false)?;
        plan.c.check(c.len(), "C", true)?;
        apart("elementwise", c, &[a, b])?;
        let total = plan.c.elements();
        let m = modes8(&plan.dims, "elementwise")?;
        self.kernels.run("tensor", "elementwise", || {
            if total == 0 {
                return Ok(());
            }
            let call = modes_binary::call::<T, T::Compute>(config(total), a, b, m, total, spec.op.code(), spec.alpha, spec.beta, &mut c.clone());
            self.kernels.launch(call)
        })
    }

    /// Carries out `spec` (see `TensorActor::elementwise_trinary`).
    pub(crate) fn elementwise_trinary<T: TensorFloat>(
        &self,
        spec: &ElementwiseTrinary,
        [a, b, x]: [&GpuRef<T>; 3],
        d: &GpuRef<T>,
    ) -> Result<Deferred<()>, GpuError> {
        for r in [a, b, x, d] {
            self.kernels.check(r)?;
        }
        let plan = spec.plan()?;
        spec.a.check(a.len(), "A", false)?;
        spec.b.check(b.len(), "B", false)?;
        spec.c.check(x.len(), "C", false)?;
        plan.c.check(d.len(), "D", true)?;
        apart("elementwise_trinary", d, &[a, b, x])?;
        let total = plan.c.elements();
        let m = modes8(&plan.dims, "elementwise_trinary")?;
        // The same modes (so the same order after unit ones are dropped), C's strides
        // where the kernel reads A's.
        let third: Vec<ModeDim> = plan.dims.iter().map(|dim| ModeDim { a: dim.x, ..*dim }).collect();
        let mx = modes8(&third, "elementwise_trinary")?;
        let ops = spec.op_ab.code() | spec.op_abc.code() << 2;
        self.kernels.run("tensor", "elementwise_trinary", || {
            if total == 0 {
                return Ok(());
            }
            let (alpha, beta, gamma) = (spec.alpha, spec.beta, spec.gamma);
            let call = modes_trinary::call::<T, T::Compute>(config(total), a, b, x, m, mx, total, ops, alpha, beta, gamma, &mut d.clone());
            self.kernels.launch(call)
        })
    }

    /// Carries out `spec` (see `TensorActor::reduce_modes`).
    pub(crate) fn reduce_modes<T: TensorFloat>(&self, spec: &TensorReduction, a: &GpuRef<T>, c: &GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        for r in [a, c] {
            self.kernels.check(r)?;
        }
        let plan = spec.plan()?;
        spec.a.check(a.len(), "A", false)?;
        plan.c.check(c.len(), "C", true)?;
        apart("reduce_modes", c, &[a])?;
        let total = plan.c.elements();
        let inner: usize = plan.reduced.iter().map(|d| d.size).product();
        let (m, r) = (modes8(&plan.dims, "reduce_modes")?, modes8(&plan.reduced, "reduce_modes")?);
        self.kernels.run("tensor", "reduce_modes", || {
            if total == 0 {
                return Ok(());
            }
            let call = modes_reduce::call::<T, T::Compute>(config(total), a, m, r, total, inner, spec.op.code(), spec.alpha, spec.beta, &mut c.clone());
            self.kernels.launch(call)
        })
    }

    /// Carries out `spec` (see `TensorActor::contract`), with its plan kept from an
    /// earlier call of the same equation and layouts when there was one.
    pub(crate) fn contract<T: TensorFloat>(
        &mut self,
        spec: &Contraction,
        a: &GpuRef<T>,
        b: &GpuRef<T>,
        c: &GpuRef<T>,
    ) -> Result<Deferred<()>, GpuError> {
        for r in [a, b, c] {
            self.kernels.check(r)?;
        }
        let Planned { plan, c_layout } = self.plans.of(spec)?;
        spec.a.check(a.len(), "A", false)?;
        spec.b.check(b.len(), "B", false)?;
        c_layout.check(c.len(), "C", true)?;
        if c.overlaps(a) || c.overlaps(b) {
            return Err(GpuError::InvalidArgument(
                Invalid::new("einsum: the output C must not overlap A or B (disjoint views of one buffer may)")
                    .arg("c")
                    .mismatch("elements apart from A's and B's", "elements of A or B"),
            ));
        }
        let steps = Steps {
            kernels: &self.kernels,
            blas: self.blas.as_ref(),
        };
        self.kernels.run("tensor", "contract", || steps.run(spec, plan, c_layout, (a, b, c)))
    }
}

/// A planned contraction's steps on a tensor core's kernels and cuBLAS handle (borrowed
/// apart from its plans, one of which they carry out).
struct Steps<'a> {
    kernels: &'a Kernels,
    blas: Option<&'a CudaBlas>,
}

impl Steps<'_> {
    /// Enqueues (or, on the CPU device, runs) the plan's steps.
    fn run<T: TensorFloat>(
        &self,
        spec: &Contraction,
        plan: &Plan,
        c_layout: &super::TensorLayout,
        (a, b, c): (&GpuRef<T>, &GpuRef<T>, &GpuRef<T>),
    ) -> Result<(), GpuError> {
        if plan.out_len == 0 {
            return Ok(());
        }
        if plan.k == 0 {
            // Nothing to sum: C = beta · C, through a zeroed temporary.
            let zeros = self.kernels.temp::<T>(plan.out_len)?;
            let dims: Vec<Dim> = c_layout.shape.iter().copied().zip(c_layout.strides.iter().copied()).rev().collect();
            return self.kernels.launch(scatter::call::<T>(config(plan.out_len), &zeros, dims8(&dims, "C")?, spec.beta, &mut c.clone()));
        }
        let (x1, x2) = if plan.swapped { (b, a) } else { (a, b) };
        let (m, n, k, count) = (plan.m, plan.n, plan.k, plan.batch);
        let first = self.source(x1, &plan.first, elements([m, k, count])?, "the first operand")?;
        let second = self.source(x2, &plan.second, elements([k, n, count])?, "the second operand")?;
        let (out, beta, ldc, stride_c) = match &plan.sink {
            Sink::Direct { ld, batch_stride } => (c.clone(), spec.beta, *ld, *batch_stride),
            Sink::Scatter(_) => (self.kernels.temp::<T>(elements([m, n, count])?)?, 0.0, m, m * n),
        };
        let (transa, lda, stride_a) = shape_of(&plan.first, m);
        let (transb, ldb, stride_b) = shape_of(&plan.second, k);
        let g = Gemm {
            transa,
            transb,
            m,
            n,
            k,
            alpha: T::from_f64(spec.alpha),
            beta: T::from_f64(beta),
            lda,
            ldb,
            ldc,
        };
        let batch = Batch {
            count,
            stride_a: stride_a.unwrap_or(m * k),
            stride_b: stride_b.unwrap_or(k * n),
            stride_c,
        };
        gemm_on(self.blas, &g, &batch, (&first, &second, &out))?;
        if let Sink::Scatter(dims) = &plan.sink {
            self.kernels.launch(scatter::call::<T>(config(out.len()), &out, dims8(dims, "C")?, spec.beta, &mut c.clone()))?;
        }
        Ok(())
    }

    /// The operand as the GEMM reads it: itself, or gathered into a tight temporary.
    fn source<T: TensorFloat>(
        &self,
        x: &GpuRef<T>,
        how: &Source,
        len: usize,
        what: &str,
    ) -> Result<GpuRef<T>, GpuError> {
        match how {
            Source::Direct { .. } => Ok(x.clone()),
            Source::Gather(dims) => {
                let mut t = self.kernels.temp::<T>(len)?;
                self.kernels.launch(gather::call::<T>(config(len), x, dims8(dims, what)?, &mut t))?;
                Ok(t)
            }
        }
    }
}

/// The elements of a temporary of these extents; an error where they overflow (a
/// broadcast mode can make a temporary far larger than its operand).
fn elements<const N: usize>(extents: [usize; N]) -> Result<usize, GpuError> {
    extents
        .iter()
        .try_fold(1usize, |acc, &e| acc.checked_mul(e))
        .ok_or_else(|| GpuError::invalid(format!("einsum: a temporary of {extents:?} elements overflows")))
}

/// A GEMM operand's transpose flag, leading dimension and batch stride (`None`: a
/// gathered temporary, tight: `rows` is its leading dimension).
fn shape_of(how: &Source, rows: usize) -> (bool, usize, Option<usize>) {
    match how {
        Source::Direct {
            trans,
            ld,
            batch_stride,
        } => (*trans, *ld, Some(*batch_stride)),
        Source::Gather(_) => (false, rows, None),
    }
}
