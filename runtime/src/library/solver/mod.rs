//! `SolverActor`: dense factorizations and solves — cuSOLVER on the GPU, `nalgebra` on
//! the CPU device.
//!
//! Conventions are LAPACK's, as in cuSOLVER: matrices are column-major with tight
//! leading dimensions (n×n: `lda = n`; m×n: `lda = m`), LU keeps L (unit diagonal, not
//! stored) and U in place with 1-based row swaps in the pivots, Cholesky and the
//! symmetric eigensolver read the lower triangle. `info > 0` — a singular matrix, one
//! that is not positive definite, an iteration that did not converge — comes back as
//! [`GpuError::Numerical`], and the actor keeps serving. After such an error the
//! contents of the outputs are unspecified.
//!
//! The GPU path never blocks the actor's thread: each request enqueues its routines and
//! replies once the stream completes (see `cuda.rs`). The CPU path computes in float64
//! (for f32 too) and writes the same layouts, so the signs of Q's, U's and V's columns
//! may differ between backends (each is a valid factorization); everything unique
//! (LU, Cholesky, singular values, eigenvalues) agrees to rounding.

#[cfg(feature = "solver")]
mod cpu;
#[cfg(feature = "solver")]
mod cuda;

use std::sync::Arc;

use atomr_accel_cuda_macros::gpu_actor;

use crate::actor::{Context, Deferred};
use crate::backend::state::DeviceShared;
use crate::dtype::DTypeBase;
use crate::error::{GpuError, Invalid, Lib, NumericalIssue};
use crate::gpu_ref::{check_apart, lock2, with_parts, with_parts_and, GpuRef};
use crate::library::seed::LibrarySeed;
use crate::library::shell::{Core, Library};
use crate::observability::{cpu_op, gpu_timed};

/// Float types of the dense solvers (f32, f64): the bound of the `SolverActor`'s
/// handlers (cuSOLVER's entry points, and the `#[kernel]` that extracts QR's R).
pub trait SolverFloat: crate::kernel::dsl::Float + crate::sys::CusolverFloat + crate::sys::CublasBatchedLu {}
impl SolverFloat for f32 {}
impl SolverFloat for f64 {}

/// A batched SVD's buffers: A, S, and U and V when the vectors are asked for.
pub(crate) type SvdOperands<'a, T> = (&'a GpuRef<T>, &'a GpuRef<T>, Option<(&'a GpuRef<T>, &'a GpuRef<T>)>);

/// Which triangle of a symmetric matrix a routine reads (the other is not touched).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Triangle {
    /// The lower triangle and the diagonal (LAPACK's 'L'). The default.
    #[default]
    Lower,
    /// The upper triangle and the diagonal (LAPACK's 'U').
    Upper,
}

crate::wire::wire_enum!(Triangle {
    Triangle::Lower,
    Triangle::Upper
});

/// How [`Device::eigh_into`](crate::Device::eigh_into) decomposes: the triangle it reads,
/// and whether it computes eigenvectors (into the matrix) or the eigenvalues only
/// (cheaper; the matrix's contents are then unspecified).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Eigh {
    /// The triangle read.
    pub triangle: Triangle,
    /// Eigenvectors into the columns of the matrix (else eigenvalues only).
    pub vectors: bool,
}

crate::wire::wire_struct!(Eigh { triangle, vectors });

impl Default for Eigh {
    /// Eigenvalues and eigenvectors, from the lower triangle.
    fn default() -> Self {
        Eigh {
            triangle: Triangle::Lower,
            vectors: true,
        }
    }
}

impl Eigh {
    /// Eigenvalues only, from the lower triangle.
    pub fn values_only() -> Self {
        Eigh {
            vectors: false,
            ..Eigh::default()
        }
    }

    /// Reads the upper triangle instead.
    pub fn upper(mut self) -> Self {
        self.triangle = Triangle::Upper;
        self
    }
}

/// The routines, for messages and for classifying `info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    LuFactor,
    LuFactorBatched,
    LuSolve,
    LuSolveBatched,
    Cholesky,
    CholeskyBatched,
    CholeskySolve,
    CholeskySolveBatched,
    Qr,
    Svd,
    SvdValues,
    SvdBatched,
    Eigh,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::LuFactor => "lu_factor",
            Op::LuFactorBatched => "lu_factor_batched",
            Op::CholeskyBatched => "cholesky_batched",
            Op::LuSolve => "lu_solve",
            Op::LuSolveBatched => "lu_solve_batched",
            Op::CholeskySolveBatched => "cholesky_solve_batched",
            Op::Cholesky => "cholesky",
            Op::CholeskySolve => "cholesky_solve",
            Op::Qr => "qr",
            Op::Svd => "svd",
            Op::SvdValues => "svd_values",
            Op::SvdBatched => "svd_batched",
            Op::Eigh => "eigh",
        }
    }

    /// What a positive `info` means for this routine (`None`: it never reports one).
    fn issue(self) -> Option<NumericalIssue> {
        match self {
            Op::LuFactor | Op::LuFactorBatched => Some(NumericalIssue::Singular),
            Op::Cholesky | Op::CholeskyBatched => Some(NumericalIssue::NotPositiveDefinite),
            Op::Svd | Op::SvdValues | Op::SvdBatched | Op::Eigh => Some(NumericalIssue::NoConvergence),
            Op::LuSolve | Op::LuSolveBatched | Op::CholeskySolve | Op::CholeskySolveBatched | Op::Qr => None,
        }
    }
}

/// Turns LAPACK's `info` into the reply. A negative `info` names a bad parameter: the
/// arguments were validated before the call, so it is reported as a library error.
pub(crate) fn numerical(op: Op, info: i32) -> Result<(), GpuError> {
    match (info, op.issue()) {
        (0, _) => Ok(()),
        (i, Some(issue)) if i > 0 => Err(GpuError::Numerical {
            op: op.name().into(),
            issue,
            info: i,
        }),
        (i, _) => Err(GpuError::Library {
            lib: Lib::Cusolver,
            code: i,
            msg: format!("{}: LAPACK info {i}", op.name()),
        }),
    }
}

/// The reply of a batched routine from its matrices' `info`s: the first matrix that
/// failed, named in the error's operation (`"cholesky_batched (matrix 17 of the
/// batch)"`); the others were factored.
pub(crate) fn first_failure(op: Op, infos: &[i32]) -> Result<(), GpuError> {
    match infos.iter().position(|&i| i != 0) {
        None => Ok(()),
        Some(k) => numerical(op, infos[k]).map_err(|e| match e {
            GpuError::Numerical { op, issue, info } => GpuError::Numerical {
                op: format!("{op} (matrix {k} of the batch)"),
                issue,
                info,
            },
            other => other,
        }),
    }
}

fn invalid(m: String) -> GpuError {
    GpuError::invalid(m)
}

/// Checks that a dimension is positive.
fn positive(v: usize, what: &str, op: Op) -> Result<(), GpuError> {
    if v == 0 {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!("{}: {what} must be at least 1", op.name()))
                .arg(what)
                .mismatch("≥ 1", 0),
        ));
    }
    Ok(())
}

/// Checks that `r` holds a `rows × cols` matrix (or vector, cols = 1).
fn holds<T: DTypeBase>(r: &GpuRef<T>, rows: usize, cols: usize, what: &str, op: Op) -> Result<(), GpuError> {
    let need = rows
        .checked_mul(cols)
        .ok_or_else(|| invalid(format!("{}: {what} of {rows}×{cols} overflows", op.name())))?;
    if r.len() < need {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!(
                "{}: {what} must hold {rows}×{cols} = {need} elements, the buffer has {}",
                op.name(),
                r.len()
            ))
            .arg(what)
            .mismatch(format_args!("≥ {need} elements"), format_args!("{} elements", r.len())),
        ));
    }
    Ok(())
}

/// Checks `m ≥ n ≥ 1`, which cuSOLVER's QR-based routines (`gesvd`) require.
fn tall(m: usize, n: usize, op: Op) -> Result<(), GpuError> {
    positive(n, "n", op)?;
    if m < n {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!(
                "{}: needs m ≥ n (got {m}×{n}); factor the transpose instead",
                op.name()
            ))
            .arg("m")
            .mismatch(format_args!("≥ n = {n}"), m),
        ));
    }
    Ok(())
}

#[cfg(feature = "solver")]
enum SolverEngine {
    Cpu,
    Cuda(Box<cuda::CudaSolver>),
}

#[cfg(feature = "solver")]
/// The solver of one generation.
pub(crate) struct SolverCore {
    shared: Arc<DeviceShared>,
    generation: u64,
    engine: SolverEngine,
}

#[cfg(feature = "solver")]
impl Core for SolverCore {
    const WHAT: &'static str = "solver actor";

    fn build(seed: &LibrarySeed) -> Result<Self, GpuError> {
        // Factorizations run for milliseconds: wait off the actor's thread, so it keeps
        // enqueuing the next requests meanwhile.
        let engine = match (seed.cuda_stream_off_thread()?, &seed.cuda) {
            (Some((stream, completer)), Some(c)) => {
                SolverEngine::Cuda(Box::new(cuda::CudaSolver::new(stream, completer, c.pivots.clone())?))
            }
            _ => SolverEngine::Cpu,
        };
        Ok(SolverCore {
            shared: seed.shared.clone(),
            generation: seed.generation,
            engine,
        })
    }
}

#[cfg(feature = "solver")]
impl SolverCore {
    fn check<T: DTypeBase>(&self, r: &GpuRef<T>) -> Result<(), GpuError> {
        r.validate(self.shared.config.device_id, self.generation)
    }

    /// Runs `op` on the engine — `cpu` on the CPU device, `gpu` on a GPU (its failures
    /// classified: a sticky fault marks the device lost) — timed on the timeline.
    fn run(
        &self,
        op: Op,
        cpu: impl FnOnce() -> Result<Deferred<()>, GpuError>,
        gpu: impl FnOnce(&cuda::CudaSolver) -> Result<Deferred<()>, GpuError>,
    ) -> Result<Deferred<()>, GpuError> {
        let device = self.shared.config.device_id;
        match &self.engine {
            SolverEngine::Cpu => {
                let _timed = cpu_op(device, "solver", op.name());
                cpu()
            }
            SolverEngine::Cuda(c) => {
                gpu_timed(c.stream(), device, "solver", op.name(), || gpu(c)).map_err(|e| self.shared.observe(e))
            }
        }
    }

    fn lu_factor<T: SolverFloat>(
        &self,
        a: &GpuRef<T>,
        pivots: &GpuRef<i32>,
        n: usize,
    ) -> Result<Deferred<()>, GpuError> {
        let op = Op::LuFactor;
        self.check(a)?;
        self.check(pivots)?;
        positive(n, "n", op)?;
        holds(a, n, n, "A", op)?;
        holds(pivots, n, 1, "the pivots", op)?;
        self.run(
            op,
            || {
                let (mut sa, mut sp) = lock2(a, pivots);
                let info = cpu::lu_factor(sa.host_mut()?, sp.host_mut()?, n);
                numerical(op, info).map(Deferred::Now)
            },
            |c| c.lu_factor(&self.shared, a, pivots, n),
        )
    }

    fn lu_solve<T: SolverFloat>(
        &self,
        lu: &GpuRef<T>,
        pivots: &GpuRef<i32>,
        b: &GpuRef<T>,
        (n, nrhs): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let op = Op::LuSolve;
        for r in [lu, b] {
            self.check(r)?;
        }
        self.check(pivots)?;
        positive(n, "n", op)?;
        positive(nrhs, "nrhs", op)?;
        holds(lu, n, n, "the LU factors", op)?;
        holds(pivots, n, 1, "the pivots", op)?;
        holds(b, n, nrhs, "B", op)?;
        check_apart(op.name(), &[(lu, "the LU factors"), (b, "B")])?;
        self.run(
            op,
            || {
                with_parts_and(
                    op.name(),
                    [(lu, "the LU factors"), (b, "B")],
                    Some(pivots),
                    |[l, b], p| {
                        let pv = p.expect("the pivots are locked").host()?;
                        if let Some((k, p)) = pv[..n].iter().enumerate().find(|(_, &p)| p < 1 || p as usize > n) {
                            return Err(invalid(format!(
                                "lu_solve: pivot {k} is {p}, outside 1..={n}: pass lu_factor's pivots"
                            )));
                        }
                        cpu::lu_solve(l.into_host()?, pv, b.into_host()?, n, nrhs);
                        Ok(Deferred::Now(()))
                    },
                )?
            },
            |c| c.lu_solve(&self.shared, lu, pivots, b, (n, nrhs)),
        )
    }

    fn cholesky_batched<T: SolverFloat>(
        &self,
        a: &GpuRef<T>,
        (n, count): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let op = Op::CholeskyBatched;
        self.check(a)?;
        positive(n, "n", op)?;
        positive(count, "count", op)?;
        holds(a, n * n, count, "A", op)?;
        self.run(
            op,
            || {
                let mut sa = a.lock();
                let infos: Vec<i32> = sa
                    .host_mut()?
                    .chunks_mut(n * n)
                    .take(count)
                    .map(|m| cpu::cholesky(m, n))
                    .collect();
                first_failure(op, &infos).map(Deferred::Now)
            },
            |c| c.cholesky_batched(&self.shared, a, (n, count)),
        )
    }

    /// `count` m×n matrices' SVDs (m, n ≤ 32); U (m×m) and V (n×n) when `vectors` holds
    /// them.
    fn svd_batched<T: SolverFloat>(
        &self,
        (a, s, vectors): SvdOperands<'_, T>,
        (m, n, count): (usize, usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let op = Op::SvdBatched;
        for x in [Some(a), Some(s), vectors.map(|v| v.0), vectors.map(|v| v.1)]
            .into_iter()
            .flatten()
        {
            self.check(x)?;
        }
        positive(m, "m", op)?;
        positive(n, "n", op)?;
        positive(count, "count", op)?;
        for (v, what) in [(m, "m"), (n, "n")] {
            if v > 32 {
                return Err(GpuError::InvalidArgument(
                    Invalid::new(format!(
                        "svd_batched: {what} = {v}; the batched (Jacobi) SVD takes matrices of at most 32 rows and \
                         columns — use svd per matrix"
                    ))
                    .arg(what)
                    .mismatch("≤ 32", v),
                ));
            }
        }
        holds(a, m * n, count, "A", op)?;
        holds(s, m.min(n), count, "S", op)?;
        let mut named = vec![(a, "A"), (s, "S")];
        if let Some((u, v)) = vectors {
            holds(u, m * m, count, "U", op)?;
            holds(v, n * n, count, "V", op)?;
            named.extend([(u, "U"), (v, "V")]);
        }
        check_apart(op.name(), &named)?;
        self.run(
            op,
            || {
                let infos: Vec<i32> = match vectors {
                    Some((u, v)) => with_parts(op.name(), [(a, "A"), (s, "S"), (u, "U"), (v, "V")], |[a, s, u, v]| {
                        let (ha, hs, hu, hv) = (a.into_host()?, s.into_host()?, u.into_host()?, v.into_host()?);
                        let k_min = m.min(n);
                        Ok::<_, GpuError>(
                            (0..count)
                                .map(|k| {
                                    cpu::svd_full(
                                        &ha[k * m * n..(k + 1) * m * n],
                                        &mut hs[k * k_min..(k + 1) * k_min],
                                        &mut hu[k * m * m..(k + 1) * m * m],
                                        &mut hv[k * n * n..(k + 1) * n * n],
                                        m,
                                        n,
                                    )
                                })
                                .collect(),
                        )
                    })??,
                    None => with_parts(op.name(), [(a, "A"), (s, "S")], |[a, s]| {
                        let (ha, hs) = (a.into_host()?, s.into_host()?);
                        let k_min = m.min(n);
                        Ok::<_, GpuError>(
                            (0..count)
                                .map(|k| {
                                    let mat = &ha[k * m * n..(k + 1) * m * n];
                                    let out = &mut hs[k * k_min..(k + 1) * k_min];
                                    if m >= n {
                                        cpu::svd_values(mat, out, m, n)
                                    } else {
                                        // A wide matrix's values are its transpose's.
                                        let at: Vec<T> = (0..m * n).map(|i| mat[(i % n) * m + i / n]).collect();
                                        cpu::svd_values(&at, out, n, m)
                                    }
                                })
                                .collect(),
                        )
                    })??,
                };
                first_failure(op, &infos).map(Deferred::Now)
            },
            |c| c.svd_batched(&self.shared, (a, s, vectors), (m, n, count)),
        )
    }

    fn lu_factor_batched<T: SolverFloat>(
        &self,
        a: &GpuRef<T>,
        pivots: &GpuRef<i32>,
        (n, count): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let op = Op::LuFactorBatched;
        self.check(a)?;
        self.check(pivots)?;
        positive(n, "n", op)?;
        positive(count, "count", op)?;
        holds(a, n * n, count, "A", op)?;
        holds(pivots, n, count, "the pivots", op)?;
        self.run(
            op,
            || {
                let (mut sa, mut sp) = lock2(a, pivots);
                let (ha, hp) = (sa.host_mut()?, sp.host_mut()?);
                let infos: Vec<i32> = ha
                    .chunks_mut(n * n)
                    .zip(hp.chunks_mut(n))
                    .take(count)
                    .map(|(m, p)| cpu::lu_factor(m, p, n))
                    .collect();
                first_failure(op, &infos).map(Deferred::Now)
            },
            |c| c.lu_factor_batched(&self.shared, a, pivots, (n, count)),
        )
    }

    fn lu_solve_batched<T: SolverFloat>(
        &self,
        (lu, pivots, b): (&GpuRef<T>, &GpuRef<i32>, &GpuRef<T>),
        (n, nrhs, count): (usize, usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let op = Op::LuSolveBatched;
        for r in [lu, b] {
            self.check(r)?;
        }
        self.check(pivots)?;
        positive(n, "n", op)?;
        positive(nrhs, "nrhs", op)?;
        positive(count, "count", op)?;
        holds(lu, n * n, count, "the LU factors", op)?;
        holds(pivots, n, count, "the pivots", op)?;
        holds(b, n * nrhs, count, "B", op)?;
        check_apart(op.name(), &[(lu, "the LU factors"), (b, "B")])?;
        self.run(
            op,
            || {
                with_parts_and(
                    op.name(),
                    [(lu, "the LU factors"), (b, "B")],
                    Some(pivots),
                    |[l, b], p| {
                        let (hl, hp, hb) = (
                            l.into_host()?,
                            p.expect("the pivots are locked").host()?,
                            b.into_host()?,
                        );
                        if let Some((k, p)) = hp[..n * count]
                            .iter()
                            .enumerate()
                            .find(|(_, &p)| p < 1 || p as usize > n)
                        {
                            return Err(invalid(format!(
                                "lu_solve_batched: pivot {k} is {p}, outside 1..={n}: pass lu_factor_batched's pivots"
                            )));
                        }
                        for k in 0..count {
                            cpu::lu_solve(
                                &hl[k * n * n..(k + 1) * n * n],
                                &hp[k * n..(k + 1) * n],
                                &mut hb[k * n * nrhs..(k + 1) * n * nrhs],
                                n,
                                nrhs,
                            );
                        }
                        Ok(Deferred::Now(()))
                    },
                )?
            },
            |c| c.lu_solve_batched(&self.shared, (lu, pivots, b), (n, nrhs, count)),
        )
    }

    fn cholesky_solve_batched<T: SolverFloat>(
        &self,
        l: &GpuRef<T>,
        b: &GpuRef<T>,
        (n, count): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let op = Op::CholeskySolveBatched;
        for r in [l, b] {
            self.check(r)?;
        }
        positive(n, "n", op)?;
        positive(count, "count", op)?;
        holds(l, n * n, count, "L", op)?;
        holds(b, n, count, "B", op)?;
        check_apart(op.name(), &[(l, "L"), (b, "B")])?;
        self.run(
            op,
            || {
                with_parts(op.name(), [(l, "L"), (b, "B")], |[l, b]| {
                    let (hl, hb) = (l.into_host()?, b.into_host()?);
                    for k in 0..count {
                        cpu::cholesky_solve(&hl[k * n * n..(k + 1) * n * n], &mut hb[k * n..(k + 1) * n], n, 1);
                    }
                    Ok(Deferred::Now(()))
                })?
            },
            |c| c.cholesky_solve_batched(&self.shared, (l, b), (n, count)),
        )
    }

    fn cholesky<T: SolverFloat>(&self, a: &GpuRef<T>, n: usize) -> Result<Deferred<()>, GpuError> {
        let op = Op::Cholesky;
        self.check(a)?;
        positive(n, "n", op)?;
        holds(a, n, n, "A", op)?;
        self.run(
            op,
            || numerical(op, cpu::cholesky(a.lock().host_mut()?, n)).map(Deferred::Now),
            |c| c.cholesky(&self.shared, a, n),
        )
    }

    fn cholesky_solve<T: SolverFloat>(
        &self,
        l: &GpuRef<T>,
        b: &GpuRef<T>,
        (n, nrhs): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let op = Op::CholeskySolve;
        for r in [l, b] {
            self.check(r)?;
        }
        positive(n, "n", op)?;
        positive(nrhs, "nrhs", op)?;
        holds(l, n, n, "L", op)?;
        holds(b, n, nrhs, "B", op)?;
        check_apart(op.name(), &[(l, "L"), (b, "B")])?;
        self.run(
            op,
            || {
                with_parts(op.name(), [(l, "L"), (b, "B")], |[l, b]| {
                    cpu::cholesky_solve(l.into_host()?, b.into_host()?, n, nrhs);
                    Ok(Deferred::Now(()))
                })?
            },
            |c| c.cholesky_solve(&self.shared, l, b, (n, nrhs)),
        )
    }

    fn qr<T: SolverFloat>(
        &self,
        a: &GpuRef<T>,
        q: &GpuRef<T>,
        r: &GpuRef<T>,
        (m, n): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let op = Op::Qr;
        for x in [a, q, r] {
            self.check(x)?;
        }
        tall(m, n, op)?;
        holds(a, m, n, "A", op)?;
        holds(q, m, n, "Q", op)?;
        holds(r, n, n, "R", op)?;
        check_apart(op.name(), &[(a, "A"), (q, "Q"), (r, "R")])?;
        self.run(
            op,
            || {
                with_parts(op.name(), [(a, "A"), (q, "Q"), (r, "R")], |[a, q, r]| {
                    cpu::qr(a.into_host()?, q.into_host()?, r.into_host()?, m, n);
                    Ok(Deferred::Now(()))
                })?
            },
            |c| c.qr(&self.shared, (a, q, r), (m, n)),
        )
    }

    fn svd<T: SolverFloat>(
        &self,
        (a, u, s, vt): (&GpuRef<T>, &GpuRef<T>, &GpuRef<T>, &GpuRef<T>),
        (m, n): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let op = Op::Svd;
        for x in [a, u, s, vt] {
            self.check(x)?;
        }
        tall(m, n, op)?;
        holds(a, m, n, "A", op)?;
        holds(u, m, n, "U", op)?;
        holds(s, n, 1, "S", op)?;
        holds(vt, n, n, "Vᵀ", op)?;
        check_apart(op.name(), &[(a, "A"), (u, "U"), (s, "S"), (vt, "Vᵀ")])?;
        self.run(
            op,
            || {
                with_parts(
                    op.name(),
                    [(a, "A"), (u, "U"), (s, "S"), (vt, "Vᵀ")],
                    |[a, u, s, vt]| {
                        let info = cpu::svd(a.into_host()?, u.into_host()?, s.into_host()?, vt.into_host()?, m, n);
                        numerical(op, info).map(Deferred::Now)
                    },
                )?
            },
            |c| c.svd(&self.shared, (a, u, s, vt), (m, n)),
        )
    }

    fn svd_values<T: SolverFloat>(
        &self,
        a: &GpuRef<T>,
        s: &GpuRef<T>,
        (m, n): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let op = Op::SvdValues;
        for x in [a, s] {
            self.check(x)?;
        }
        tall(m, n, op)?;
        holds(a, m, n, "A", op)?;
        holds(s, n, 1, "S", op)?;
        check_apart(op.name(), &[(a, "A"), (s, "S")])?;
        self.run(
            op,
            || {
                with_parts(op.name(), [(a, "A"), (s, "S")], |[a, s]| {
                    numerical(op, cpu::svd_values(a.into_host()?, s.into_host()?, m, n)).map(Deferred::Now)
                })?
            },
            |c| c.svd_values(&self.shared, a, s, (m, n)),
        )
    }

    fn eigh<T: SolverFloat>(
        &self,
        a: &GpuRef<T>,
        w: &GpuRef<T>,
        n: usize,
        how: Eigh,
    ) -> Result<Deferred<()>, GpuError> {
        let op = Op::Eigh;
        for x in [a, w] {
            self.check(x)?;
        }
        positive(n, "n", op)?;
        holds(a, n, n, "A", op)?;
        holds(w, n, 1, "W", op)?;
        check_apart(op.name(), &[(a, "A"), (w, "W")])?;
        self.run(
            op,
            || {
                with_parts(op.name(), [(a, "A"), (w, "W")], |[a, w]| {
                    numerical(op, cpu::eigh(a.into_host()?, w.into_host()?, n, how)).map(Deferred::Now)
                })?
            },
            |c| c.eigh(&self.shared, a, w, n, how),
        )
    }
}

/// The dense-solver actor of a device. Written with `#[gpu_actor]`: one generic handler
/// per routine, expanded to f32 and f64.
pub struct SolverActor(pub(crate) Library<SolverCore>);

#[cfg(not(feature = "solver"))]
use crate::library::shell::Absent as SolverCore;

#[gpu_actor(crate = crate, wire, device, feature = "solver")]
impl SolverActor {
    /// Creates the cuSOLVER handle on the actor's own stream.
    #[pre_start]
    async fn start(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.0.start()
    }

    /// [`Device::lu_factor`](crate::Device::lu_factor) with the caller's pivot buffer (n
    /// elements): LU with partial pivoting of the n×n `a`, in place; `pivots` gets
    /// LAPACK's 1-based row swaps. A zero pivot is `Numerical { issue: Singular, .. }`.
    #[handler(dtypes(blas1), device(name = lu_factor_into))]
    fn lu_factor<T: SolverFloat>(
        &mut self,
        a: GpuRef<T>,
        pivots: GpuRef<i32>,
        n: usize,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.lu_factor(&a, &pivots, n)
    }

    /// Solves `A·X = B` from `lu_factor`'s factors and pivots; `b` (n×nrhs) becomes X.
    /// Pivots out of range are an `InvalidArgument` (on a GPU, pivots that an order-n
    /// `lu_factor` of this device did not write: cuSOLVER trusts them).
    #[handler(dtypes(blas1), device)]
    fn lu_solve<T: SolverFloat>(
        &mut self,
        lu: GpuRef<T>,
        pivots: GpuRef<i32>,
        b: GpuRef<T>,
        n: usize,
        nrhs: usize,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.lu_solve(&lu, &pivots, &b, (n, nrhs))
    }

    /// Cholesky `A = L·Lᵀ` of the symmetric positive definite n×n `a`, read from and
    /// written to its lower triangle (the strict upper triangle is not touched). Not
    /// positive definite is `GpuError::Numerical` (`NotPositiveDefinite`, with the order
    /// of the first failing leading minor).
    #[handler(dtypes(blas1), device)]
    fn cholesky<T: SolverFloat>(&mut self, a: GpuRef<T>, n: usize) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.cholesky(&a, n)
    }

    /// Cholesky of `count` symmetric positive definite n×n matrices stored one after
    /// another in `a` (n·n elements each, column-major), each from its lower triangle, in
    /// place — many small matrices in one call (`potrfBatched`). A matrix that is not
    /// positive definite is `Numerical` naming it (`"cholesky_batched (matrix 17 of the
    /// batch)"`); the others are factored.
    #[handler(dtypes(blas1), device)]
    fn cholesky_batched<T: SolverFloat>(
        &mut self,
        a: GpuRef<T>,
        n: usize,
        count: usize,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.cholesky_batched(&a, (n, count))
    }

    /// LU with partial pivoting of `count` n×n matrices one after another in `a`, in place
    /// (cuBLAS `getrfBatched`); `pivots` (count·n) gets each matrix's 1-based row swaps
    /// — a window `pivots.view(i·n..(i+1)·n)` with the matrix's view is what `lu_solve`
    /// takes. A singular matrix is `Numerical` naming it; the others are factored.
    #[handler(dtypes(blas1), device)]
    fn lu_factor_batched<T: SolverFloat>(
        &mut self,
        a: GpuRef<T>,
        pivots: GpuRef<i32>,
        n: usize,
        count: usize,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.lu_factor_batched(&a, &pivots, (n, count))
    }

    /// Full SVDs `A = U·S·Vᵀ` of `count` m×n matrices (m, n ≤ 32; tall, wide or square;
    /// column-major, m·n elements each) stored one after another in `a` (left intact), by
    /// Jacobi rotations (`gesvdjBatched`): `s` gets each matrix's singular values
    /// (min(m, n), descending), `u` its U (m·m: all m columns, orthonormal) and `v` its V
    /// (n·n — V, not Vᵀ as `svd` gives). Columns past min(m, n) complete the basis (any
    /// orthonormal completion, as LAPACK's). No convergence is `Numerical` naming the
    /// matrix.
    #[handler(dtypes(blas1), device)]
    #[allow(clippy::too_many_arguments)]
    fn svd_batched<T: SolverFloat>(
        &mut self,
        a: GpuRef<T>,
        s: GpuRef<T>,
        u: GpuRef<T>,
        v: GpuRef<T>,
        m: usize,
        n: usize,
        count: usize,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.svd_batched((&a, &s, Some((&u, &v))), (m, n, count))
    }

    /// The singular values only (descending, min(m, n) per matrix into `s`) of `count`
    /// m×n matrices (m, n ≤ 32; column-major, m·n elements each) one after another in
    /// `a` (left intact).
    #[handler(dtypes(blas1), device)]
    fn svd_values_batched<T: SolverFloat>(
        &mut self,
        a: GpuRef<T>,
        s: GpuRef<T>,
        m: usize,
        n: usize,
        count: usize,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.svd_batched((&a, &s, None), (m, n, count))
    }

    /// Solves `count` systems `A_i·X_i = B_i` at once from `lu_factor_batched`'s factors
    /// (`lu`: count n×n matrices one after another) and pivots (count·n); `b` holds the
    /// count n×nrhs right-hand sides one after another and becomes the solutions (cuBLAS
    /// `getrsBatched`). Pivots that are not a batched LU's of order n on this device are
    /// an `InvalidArgument` (cuBLAS trusts them).
    #[handler(dtypes(blas1), device)]
    fn lu_solve_batched<T: SolverFloat>(
        &mut self,
        lu: GpuRef<T>,
        pivots: GpuRef<i32>,
        b: GpuRef<T>,
        n: usize,
        nrhs: usize,
        count: usize,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.lu_solve_batched((&lu, &pivots, &b), (n, nrhs, count))
    }

    /// Solves `count` systems `A_i·x_i = b_i` at once from `cholesky_batched`'s factors
    /// (`l`: count n×n lower factors one after another); `b` holds one n-vector per
    /// system, one after another, and becomes the solutions (`potrsBatched`, which takes
    /// one right-hand side per matrix: for several, solve per column or per matrix).
    #[handler(dtypes(blas1), device)]
    fn cholesky_solve_batched<T: SolverFloat>(
        &mut self,
        l: GpuRef<T>,
        b: GpuRef<T>,
        n: usize,
        count: usize,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.cholesky_solve_batched(&l, &b, (n, count))
    }

    /// Solves `A·X = B` from `cholesky`'s L; `b` (n×nrhs) becomes X.
    #[handler(dtypes(blas1), device)]
    fn cholesky_solve<T: SolverFloat>(
        &mut self,
        l: GpuRef<T>,
        b: GpuRef<T>,
        n: usize,
        nrhs: usize,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.cholesky_solve(&l, &b, (n, nrhs))
    }

    /// [`Device::qr`](crate::Device::qr) into the caller's buffers: thin QR of the m×n
    /// `a` (m ≥ n, left intact) into `q` (m×n, orthonormal columns) and `r` (n×n, upper
    /// triangular).
    #[handler(dtypes(blas1), device(name = qr_into))]
    fn qr<T: SolverFloat>(
        &mut self,
        a: GpuRef<T>,
        q: GpuRef<T>,
        r: GpuRef<T>,
        m: usize,
        n: usize,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.qr(&a, &q, &r, (m, n))
    }

    /// Thin SVD `A = U·diag(S)·Vᵀ` of the m×n `a` (m ≥ n, left intact): `u` m×n, `s` n
    /// (descending), `vt` n×n.
    #[handler(dtypes(blas1))]
    #[allow(clippy::too_many_arguments)]
    fn svd<T: SolverFloat>(
        &mut self,
        a: GpuRef<T>,
        u: GpuRef<T>,
        s: GpuRef<T>,
        vt: GpuRef<T>,
        m: usize,
        n: usize,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.svd((&a, &u, &s, &vt), (m, n))
    }

    /// [`Device::eigh`](crate::Device::eigh) into the caller's `w` (n elements), as `how`
    /// says: eigen-decomposition of the symmetric n×n `a` read from one triangle
    /// ([`Eigh::upper`]; the lower by default), eigenvalues ascending into `w`,
    /// orthonormal eigenvectors into the columns of `a` — or the eigenvalues only
    /// ([`Eigh::values_only`]; `a`'s contents are then unspecified).
    #[handler(dtypes(blas1), device(name = eigh_into))]
    fn eigh<T: SolverFloat>(
        &mut self,
        a: GpuRef<T>,
        w: GpuRef<T>,
        n: usize,
        how: Eigh,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.eigh(&a, &w, n, how)
    }

    /// The singular values of the m×n `a` (m ≥ n, left intact), descending, into `s` (n
    /// elements): no U or Vᵀ computed (`gesvd` with jobu = jobvt = 'N').
    #[handler(dtypes(blas1), device)]
    fn svd_values<T: SolverFloat>(
        &mut self,
        a: GpuRef<T>,
        s: GpuRef<T>,
        m: usize,
        n: usize,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.svd_values(&a, &s, (m, n))
    }
}

/// What `atomr_accel_cuda::prelude` takes from this library.
pub mod prelude {
    pub use super::{Eigh, Triangle};
}
