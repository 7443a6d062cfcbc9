//! The CPU device's sparse products and conversions, through `sprs` in float64 (for f32
//! too: one rounding per output element), in the layouts cuSPARSE uses (CSR with 32-bit
//! zero-based indices, dense matrices column-major), so a program reads the same
//! results on either backend. The caller has validated every length and the structure.

use sprs::CsMatViewI;

use crate::dtype::DTypeBase;
use crate::error::GpuError;

/// A CSR matrix's structure and values, as host slices.
pub(super) struct CsrHost<'a, T> {
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) offsets: &'a [i32],
    pub(super) indices: &'a [i32],
    pub(super) values: &'a [T],
}

impl<T: DTypeBase> CsrHost<'_, T> {
    /// The matrix in float64 as `sprs` holds it, handed to `f`.
    fn with_view<R>(&self, f: impl FnOnce(CsMatViewI<'_, f64, i32, i32>) -> R) -> Result<R, GpuError> {
        let nnz = self.offsets[self.rows] as usize;
        let values: Vec<f64> = self.values[..nnz].iter().map(|v| v.to_f64()).collect();
        let view = CsMatViewI::try_new((self.rows, self.cols), self.offsets, &self.indices[..nnz], &values[..])
            .map_err(|(_, _, _, e)| GpuError::Internal(format!("a checked CSR structure refused by sprs: {e}")))?;
        Ok(f(view))
    }

    /// `op(A)·x` in float64 (`x` has `op(A)`'s column count).
    fn times(&self, transpose: bool, x: &[f64]) -> Result<Vec<f64>, GpuError> {
        let out_len = if transpose { self.cols } else { self.rows };
        let mut out = vec![0.0f64; out_len];
        self.with_view(|a| {
            if transpose {
                // Aᵀ of a CSR matrix is the CSC matrix of the same arrays.
                sprs::prod::mul_acc_mat_vec_csc(a.transpose_view(), x, &mut out[..]);
            } else {
                sprs::prod::mul_acc_mat_vec_csr(a, x, &mut out[..]);
            }
        })?;
        Ok(out)
    }
}

/// `y = alpha·op(A)·x + beta·y` (beta = 0 ignores y's old contents, NaNs included).
pub(super) fn spmv<T: DTypeBase>(
    a: &CsrHost<'_, T>,
    transpose: bool,
    (alpha, beta): (T, T),
    x: &[T],
    y: &mut [T],
) -> Result<(), GpuError> {
    let x64: Vec<f64> = x.iter().map(|v| v.to_f64()).collect();
    let ax = a.times(transpose, &x64)?;
    combine(&ax, (alpha, beta), y);
    Ok(())
}

/// `C = alpha·op(A)·B + beta·C` for `n` columns of B and C (column-major, tight).
pub(super) fn spmm<T: DTypeBase>(
    a: &CsrHost<'_, T>,
    transpose: bool,
    (alpha, beta): (T, T),
    (b, c): (&[T], &mut [T]),
    n: usize,
) -> Result<(), GpuError> {
    let (inner, outer) = if transpose { (a.rows, a.cols) } else { (a.cols, a.rows) };
    for j in 0..n {
        let col: Vec<f64> = b[j * inner..(j + 1) * inner].iter().map(|v| v.to_f64()).collect();
        let ax = a.times(transpose, &col)?;
        combine(&ax, (alpha, beta), &mut c[j * outer..(j + 1) * outer]);
    }
    Ok(())
}

/// `out = alpha·ax + beta·out`, rounded once to `T`.
fn combine<T: DTypeBase>(ax: &[f64], (alpha, beta): (T, T), out: &mut [T]) {
    let (alpha, beta) = (alpha.to_f64(), beta.to_f64());
    for (o, &v) in out.iter_mut().zip(ax) {
        let old = if beta == 0.0 { 0.0 } else { beta * o.to_f64() };
        *o = T::from_f64(alpha * v + old);
    }
}

/// Writes `a` as a dense column-major `rows × cols` matrix into `dense`.
pub(super) fn densify<T: DTypeBase>(a: &CsrHost<'_, T>, dense: &mut [T]) {
    dense[..a.rows * a.cols].fill(T::default());
    for r in 0..a.rows {
        for k in a.offsets[r] as usize..a.offsets[r + 1] as usize {
            dense[a.indices[k] as usize * a.rows + r] = a.values[k];
        }
    }
}
