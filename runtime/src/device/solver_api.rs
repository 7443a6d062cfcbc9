//! The dense-solver part of the `Device` client: each call goes to the device's
//! `SolverActor` (see `kernel::solver` for the conventions: column-major, LAPACK's
//! pivots, lower triangles, `Numerical` errors).
//!
//! The `*_into` forms write into buffers the caller owns (for loops that factor many
//! matrices of one shape); the others allocate their outputs.

use super::bounds::SolverScalar;
use super::Device;
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;
use crate::library::solver::SolverActorSvdDType;

/// The outputs of a thin SVD `A = U·diag(S)·Vᵀ` of an m×n matrix (m ≥ n).
#[derive(Debug, Clone)]
pub struct Svd<T: SolverScalar> {
    /// m×n, orthonormal columns (column-major).
    pub u: GpuRef<T>,
    /// n singular values, descending.
    pub s: GpuRef<T>,
    /// n×n, orthonormal rows.
    pub vt: GpuRef<T>,
}

/// `rows·cols` elements for an output buffer: at least one (a zero dimension is refused
/// by the solver with its own message), and an overflow refused here.
fn elements(rows: usize, cols: usize) -> Result<usize, GpuError> {
    rows.checked_mul(cols)
        .map(|n| n.max(1))
        .ok_or_else(|| GpuError::invalid(format!("a {rows}×{cols} matrix overflows usize")))
}

impl Device {
    /// LU with partial pivoting of the n×n `a`, in place (L below the diagonal, unit
    /// diagonal not stored; U on and above). Returns the n pivots (LAPACK's 1-based row
    /// swaps). An exactly zero pivot is `GpuError::Numerical` (`Singular`).
    pub async fn lu_factor<T: SolverScalar>(&self, a: &GpuRef<T>, n: usize) -> Result<GpuRef<i32>, GpuError> {
        let pivots = self.alloc::<i32>(elements(n, 1)?).await?;
        self.lu_factor_into(a, &pivots, n).await?;
        Ok(pivots)
    }

    /// Thin QR of the m×n `a` (m ≥ n; left intact): returns Q (m×n, orthonormal
    /// columns) and R (n×n, upper triangular).
    pub async fn qr<T: SolverScalar>(
        &self,
        a: &GpuRef<T>,
        m: usize,
        n: usize,
    ) -> Result<(GpuRef<T>, GpuRef<T>), GpuError> {
        let q = self.alloc::<T>(elements(m, n)?).await?;
        let r = self.alloc::<T>(elements(n, n)?).await?;
        self.qr_into(a, &q, &r, m, n).await?;
        Ok((q, r))
    }

    /// Thin SVD of the m×n `a` (m ≥ n; left intact). No convergence is
    /// `GpuError::Numerical` (`NoConvergence`).
    pub async fn svd<T: SolverScalar>(&self, a: &GpuRef<T>, m: usize, n: usize) -> Result<Svd<T>, GpuError> {
        let out = Svd {
            u: self.alloc::<T>(elements(m, n)?).await?,
            s: self.alloc::<T>(elements(n, 1)?).await?,
            vt: self.alloc::<T>(elements(n, n)?).await?,
        };
        self.svd_into(a, &out, m, n).await?;
        Ok(out)
    }

    /// [`Device::svd`] into the caller's buffers.
    pub async fn svd_into<T: SolverScalar>(
        &self,
        a: &GpuRef<T>,
        out: &Svd<T>,
        m: usize,
        n: usize,
    ) -> Result<(), GpuError> {
        let (a, u, s, vt) = (a.clone(), out.u.clone(), out.s.clone(), out.vt.clone());
        self.call(|reply| <T as SolverActorSvdDType>::__into_msg(a, u, s, vt, m, n, reply))
            .await
    }

    /// Eigen-decomposition of the symmetric n×n `a` (read from its lower triangle):
    /// returns the eigenvalues, ascending; `a` becomes the eigenvectors (column k for
    /// eigenvalue k).
    pub async fn eigh<T: SolverScalar>(&self, a: &GpuRef<T>, n: usize) -> Result<GpuRef<T>, GpuError> {
        let w = self.alloc::<T>(elements(n, 1)?).await?;
        self.eigh_into(a, &w, n, crate::library::solver::Eigh::default())
            .await?;
        Ok(w)
    }
}
