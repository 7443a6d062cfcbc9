//! `SparseActor`: sparse matrices in CSR or COO form — products with dense vectors (SpMV)
//! and matrices (SpMM), and conversions between dense and CSR — cuSPARSE's generic API
//! on the GPU, `sprs` on the CPU device.
//!
//! Conventions are cuSPARSE's: 32-bit zero-based indices, dense matrices column-major
//! with tight leading dimensions, `op(A)` = A or Aᵀ. A [`CsrMatrix`] is valid by
//! construction (`matrix.rs`), so the routines trust its structure; every other
//! argument is checked here first, each fault a typed error naming the argument.

mod coo;
pub(crate) mod dense_to_csr;
#[cfg(feature = "sparse")]
mod cpu;
#[cfg(feature = "sparse")]
mod cuda;
mod matrix;
#[cfg(feature = "sparse")]
mod product;

use std::sync::Arc;

use atomr_accel_cuda_macros::gpu_actor;

pub(crate) use self::coo::coo_to_csr;
pub use self::coo::{CooMatrix, SparseMatrix};
pub(crate) use self::matrix::check_structure;
pub use self::matrix::{CsrMatrix, HostCsr, SparseOp, MAX_DIM};

#[cfg(feature = "sparse")]
use self::product::{host_matrix, row_offsets, Product};
use crate::actor::{Context, Deferred};
use crate::backend::state::DeviceShared;
use crate::dtype::DTypeBase;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::{check_apart, lock4, GpuRef};
use crate::library::seed::LibrarySeed;
use crate::library::shell::{Core, Library};
use crate::observability::{cpu_op, gpu_timed};

/// Float types of the sparse routines (f32, f64): the bound of the `SparseActor`'s
/// handlers.
pub trait SparseFloat: DTypeBase + crate::sys::CusparseFloat {}
impl SparseFloat for f32 {}
impl SparseFloat for f64 {}

#[cfg(feature = "sparse")]
enum SparseEngine {
    Cpu,
    Cuda(Box<cuda::CudaSparse>),
}

/// The sparse routines of one generation.
#[cfg(feature = "sparse")]
pub(crate) struct SparseCore {
    shared: Arc<DeviceShared>,
    generation: u64,
    engine: SparseEngine,
}

#[cfg(feature = "sparse")]
impl Core for SparseCore {
    const WHAT: &'static str = "sparse actor";

    fn build(seed: &LibrarySeed) -> Result<Self, GpuError> {
        let engine = match seed.cuda_stream()? {
            None => SparseEngine::Cpu,
            Some((stream, completer)) => SparseEngine::Cuda(Box::new(cuda::CudaSparse::new(stream, completer)?)),
        };
        Ok(SparseCore {
            shared: seed.shared.clone(),
            generation: seed.generation,
            engine,
        })
    }
}

/// Checks that `r` holds at least `need` elements.
fn holds<T: DTypeBase>(r: &GpuRef<T>, need: usize, what: &'static str, op: &str) -> Result<(), GpuError> {
    if r.len() < need {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!(
                "{op}: {what} must hold {need} elements, the buffer has {}",
                r.len()
            ))
            .arg(what)
            .mismatch(format_args!("≥ {need} elements"), format_args!("{} elements", r.len())),
        ));
    }
    Ok(())
}

/// Refuses an output that is one of the inputs' buffers (views of one buffer count as
/// it): the routine reads them while it writes it.
fn apart(out: u64, out_name: &'static str, inputs: &[(u64, &str)], op: &str) -> Result<(), GpuError> {
    if let Some((_, name)) = inputs.iter().find(|(id, _)| *id == out) {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!(
                "{op}: {out_name} must be a buffer other than {name} (not a view of it)"
            ))
            .arg(out_name)
            .mismatch(
                format_args!("a buffer other than {name}"),
                format_args!("{name} itself"),
            ),
        ));
    }
    Ok(())
}

/// Refuses a product's dense input or output that is one of the matrix's buffers, and an
/// output overlapping its input. The input and the output may be views of one buffer
/// that lie apart (vectors side by side: a Krylov basis).
fn dense_apart<T: DTypeBase>(
    a: &SparseMatrix<T>,
    (input, input_name): (&GpuRef<T>, &'static str),
    (output, output_name): (&GpuRef<T>, &'static str),
    op: &str,
) -> Result<(), GpuError> {
    let matrix = parts(a);
    apart(input.id(), input_name, &matrix, op)?;
    apart(output.id(), output_name, &matrix, op)?;
    check_apart(op, &[(input, input_name), (output, output_name)])
}

/// A matrix's buffers, for [`apart`].
fn parts<T: DTypeBase>(a: &SparseMatrix<T>) -> [(u64, &'static str); 3] {
    let (rows, cols, values) = a.buffers();
    [
        (
            rows.id(),
            if a.is_coo() {
                "the matrix's row indices"
            } else {
                "the matrix's row offsets"
            },
        ),
        (cols.id(), "the matrix's column indices"),
        (values.id(), "the matrix's values"),
    ]
}

#[cfg(feature = "sparse")]
impl SparseCore {
    fn check<T: DTypeBase>(&self, r: &GpuRef<T>) -> Result<(), GpuError> {
        r.validate(self.shared.config.device_id, self.generation)
    }

    fn check_matrix<T: DTypeBase>(&self, a: &SparseMatrix<T>) -> Result<(), GpuError> {
        let (rows, cols, values) = a.buffers();
        self.check(rows)?;
        self.check(cols)?;
        self.check(values)
    }

    /// Runs `what` — `cpu` on the CPU device, `gpu` on a GPU (its failures classified:
    /// a sticky fault marks the device lost) — timed on the timeline.
    fn run<R>(
        &mut self,
        what: &str,
        cpu: impl FnOnce() -> Result<R, GpuError>,
        gpu: impl FnOnce(&mut cuda::CudaSparse) -> Result<R, GpuError>,
    ) -> Result<R, GpuError> {
        let device = self.shared.config.device_id;
        match &mut self.engine {
            SparseEngine::Cpu => {
                let _timed = cpu_op(device, "sparse", what);
                cpu()
            }
            SparseEngine::Cuda(c) => {
                let stream = c.stream().clone();
                gpu_timed(&stream, device, "sparse", what, || gpu(c)).map_err(|e| self.shared.observe(e))
            }
        }
    }

    fn spmv<T: SparseFloat>(
        &mut self,
        (a, x, y): (&SparseMatrix<T>, &GpuRef<T>, &GpuRef<T>),
        how: SparseOp<T>,
    ) -> Result<Deferred<()>, GpuError> {
        let (transpose, scale) = (how.transpose, (how.alpha, how.beta));
        let op = "spmv";
        self.check_matrix(a)?;
        self.check(x)?;
        self.check(y)?;
        let (rows, cols, _) = a.shape();
        let (in_len, out_len) = if transpose { (rows, cols) } else { (cols, rows) };
        holds(x, in_len, "x", op)?;
        holds(y, out_len, "y", op)?;
        dense_apart(a, (x, "x"), (y, "y"), op)?;
        let shared = self.shared.clone();
        self.run(
            op,
            || {
                Product::lock(a, x, y)
                    .host(|m, x, y| cpu::spmv(&m, transpose, scale, &x[..in_len], &mut y[..out_len]))?;
                Ok(Deferred::Now(()))
            },
            |c| c.spmv(&shared, (a, x, y), (transpose, scale)),
        )
    }

    fn spmm<T: SparseFloat>(
        &mut self,
        (a, b, c): (&SparseMatrix<T>, &GpuRef<T>, &GpuRef<T>),
        n: usize,
        how: SparseOp<T>,
    ) -> Result<Deferred<()>, GpuError> {
        let (transpose, scale) = (how.transpose, (how.alpha, how.beta));
        let op = "spmm";
        self.check_matrix(a)?;
        self.check(b)?;
        self.check(c)?;
        if n == 0 {
            return Err(GpuError::InvalidArgument(
                Invalid::new("spmm: n (the columns of B and C) must be at least 1")
                    .arg("n")
                    .mismatch("≥ 1", 0),
            ));
        }
        let (rows, cols, _) = a.shape();
        let (inner, outer) = if transpose { (rows, cols) } else { (cols, rows) };
        let size = |rows: usize, what: &str| {
            rows.checked_mul(n)
                .ok_or_else(|| GpuError::invalid(format!("spmm: {what} of {rows}×{n} overflows")))
        };
        holds(b, size(inner, "B")?, "b", op)?;
        holds(c, size(outer, "C")?, "c", op)?;
        dense_apart(a, (b, "b"), (c, "c"), op)?;
        let shared = self.shared.clone();
        self.run(
            op,
            || {
                Product::lock(a, b, c).host(|m, b, c| cpu::spmm(&m, transpose, scale, (b, c), n))?;
                Ok(Deferred::Now(()))
            },
            |cu| cu.spmm(&shared, (a, b, c), (transpose, n), scale),
        )
    }

    fn densify<T: SparseFloat>(&mut self, a: &SparseMatrix<T>, dense: &GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        let op = "csr_to_dense";
        self.check_matrix(a)?;
        self.check(dense)?;
        let (rows, cols, _) = a.shape();
        holds(dense, rows * cols, "dense", op)?;
        apart(dense.id(), "dense", &parts(a), op)?;
        let shared = self.shared.clone();
        self.run(
            op,
            || {
                let (ar, ac, av) = a.buffers();
                let (so, si, sv, mut sd) = lock4(ar, ac, av, dense);
                let rows_of = row_offsets(a, &so)?;
                let m = host_matrix(a, (&rows_of, &si, &sv))?;
                cpu::densify(&m, sd.host_mut()?);
                Ok(Deferred::Now(()))
            },
            |c| c.densify(&shared, a, dense),
        )
    }
}

/// The sparse actor of a device. Written with `#[gpu_actor]`: one generic handler per
/// routine, expanded to f32 and f64.
pub struct SparseActor(pub(crate) Library<SparseCore>);

#[cfg(not(feature = "sparse"))]
use crate::library::shell::Absent as SparseCore;

#[gpu_actor(crate = crate, wire, device, feature = "sparse")]
impl SparseActor {
    /// Creates the cuSPARSE handle on the actor's own stream.
    #[pre_start]
    async fn start(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.0.start()
    }

    /// `y = alpha·op(A)·x + beta·y` for the sparse `a` (CSR or COO: `&csr`, `&coo`), as
    /// `how` says (`SparseOp::new().alpha(2.0).transposed()`): `x` holds op(A)'s
    /// columns, `y` its rows. `x` and `y` may be views of one buffer lying apart (vectors
    /// side by side); `y` overlapping `x`, or one of the matrix's buffers, is an
    /// `InvalidArgument`.
    #[handler(dtypes(blas1), device(into(a)))]
    fn spmv<T: SparseFloat>(
        &mut self,
        a: SparseMatrix<T>,
        x: GpuRef<T>,
        y: GpuRef<T>,
        how: SparseOp<T>,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.spmv((&a, &x, &y), how)
    }

    /// `C = alpha·op(A)·B + beta·C` for the sparse `a` and dense column-major `b`
    /// (op(A)'s columns × `n`) and `c` (op(A)'s rows × `n`), as `how` says; `a` CSR or
    /// COO. `b` and `c` may be panels of one buffer lying apart.
    #[handler(dtypes(blas1), device(into(a)))]
    fn spmm<T: SparseFloat>(
        &mut self,
        a: SparseMatrix<T>,
        b: GpuRef<T>,
        c: GpuRef<T>,
        n: usize,
        how: SparseOp<T>,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.spmm((&a, &b, &c), n, how)
    }

    /// Writes `a` (CSR or COO) as a dense column-major `rows × cols` matrix into `dense`.
    #[handler(dtypes(blas1), device(into(a)))]
    fn csr_to_dense<T: SparseFloat>(&mut self, a: SparseMatrix<T>, dense: GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.densify(&a, &dense)
    }
}

/// What `atomr_accel_cuda::prelude` takes from this library.
pub mod prelude {
    pub use super::{CooMatrix, CsrMatrix, HostCsr, SparseMatrix, SparseOp};
}
