//! `CsrMatrix<T>`: a sparse matrix on one device in compressed sparse row form, and the
//! structure checks that make one valid by construction.
//!
//! cuSPARSE trusts a matrix's structure — a column index past the matrix, or row
//! offsets that run backwards, would make it read outside the buffers: a sticky fault
//! on the GPU. So a `CsrMatrix` is only ever made from a structure checked here
//! (`Device::upload_csr`, `upload_coo`) or written by the library itself
//! (`Device::dense_to_csr`), and its structure buffers are not handed out: nothing can
//! write them afterwards. Its values may be read and rewritten freely (`values()`).

use crate::dtype::DTypeBase;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;

/// A `rows × cols` sparse matrix in CSR form on one device: 32-bit zero-based row
/// offsets (`rows + 1`) and column indices (strictly increasing within each row), and
/// `nnz` values. Cheap to clone (handles to the same buffers).
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// // [[1, 0, 2], [0, 3, 0]] from a dense column-major buffer.
/// let dense = dev.upload(vec![1.0f64, 0.0, 0.0, 3.0, 2.0, 0.0]).await?;
/// let a = dev.dense_to_csr(&dense, 2, 3).await?;
/// assert_eq!(a.nnz(), 3);
/// let x = dev.upload(vec![1.0f64; 3]).await?;
/// let y = dev.alloc::<f64>(2).await?;
/// dev.spmv(&a, &x, &y, SparseOp::new()).await?;
/// assert_eq!(dev.download(&y).await?, vec![3.0, 3.0]);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct CsrMatrix<T: DTypeBase> {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) nnz: usize,
    pub(crate) offsets: GpuRef<i32>,
    /// At least `nnz` (one, when `nnz` is zero: a buffer is never empty).
    pub(crate) indices: GpuRef<i32>,
    /// As `indices`.
    pub(crate) values: GpuRef<T>,
}

crate::wire::wire_struct!(CsrMatrix<T: DTypeBase> {
    rows,
    cols,
    nnz,
    offsets,
    indices,
    values
});

impl<T: DTypeBase> CsrMatrix<T> {
    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Stored elements.
    pub fn nnz(&self) -> usize {
        self.nnz
    }

    /// The stored values, row by row (the first `nnz` elements of the buffer): read or
    /// rewrite them as any buffer (same structure, new values).
    pub fn values(&self) -> &GpuRef<T> {
        &self.values
    }

    /// The device generation its buffers belong to.
    pub fn generation(&self) -> u64 {
        self.values.generation()
    }
}

/// How a sparse product scales and orients: `out = alpha·op(A)·in + beta·out`, with
/// `op(A)` = A, or Aᵀ once [`SparseOp::transposed`]. The default is `alpha = 1`, `beta
/// = 0` (the output's old contents ignored, NaNs included), A as it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SparseOp<T> {
    /// Scales the product.
    pub alpha: T,
    /// Scales the output's old contents (0: ignored).
    pub beta: T,
    /// Multiply by Aᵀ instead of A.
    pub transpose: bool,
}

crate::wire::wire_struct!(SparseOp<T: DTypeBase> { alpha, beta, transpose });

impl<T: DTypeBase> Default for SparseOp<T> {
    fn default() -> Self {
        SparseOp {
            alpha: T::from_f64(1.0),
            beta: T::default(),
            transpose: false,
        }
    }
}

impl<T: DTypeBase> SparseOp<T> {
    /// `out = op(A)·in`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Scales the product by `alpha`.
    pub fn alpha(mut self, alpha: T) -> Self {
        self.alpha = alpha;
        self
    }

    /// Adds `beta` times the output's old contents.
    pub fn beta(mut self, beta: T) -> Self {
        self.beta = beta;
        self
    }

    /// Multiplies by Aᵀ.
    pub fn transposed(mut self) -> Self {
        self.transpose = true;
        self
    }
}

/// The most rows, columns and stored elements a matrix may have: its indices are 32-bit.
pub const MAX_DIM: usize = i32::MAX as usize;

/// A CSR matrix on the host, as `Device::download_csr` returns it (and `upload_csr`
/// takes it apart): the structure a `CsrMatrix` was made from.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCsr<T> {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// `rows + 1` offsets into `indices` and `values`.
    pub offsets: Vec<i32>,
    /// Column of each stored element.
    pub indices: Vec<i32>,
    /// Each stored element.
    pub values: Vec<T>,
}

fn bad(msg: String, arg: &'static str, want: impl std::fmt::Display, got: impl std::fmt::Display) -> GpuError {
    GpuError::InvalidArgument(Invalid::new(msg).arg(arg).mismatch(want, got))
}

/// Checks a CSR structure: dimensions within 32-bit indices, `rows + 1` offsets from 0,
/// never decreasing, ending at the number of indices and values; in each row, column
/// indices in `0..cols`, strictly increasing. The first violation is the error, naming
/// the argument and where.
pub(crate) fn check_structure(
    rows: usize,
    cols: usize,
    offsets: &[i32],
    indices: &[i32],
    values: usize,
) -> Result<(), GpuError> {
    for (v, what) in [(rows, "rows"), (cols, "cols"), (indices.len(), "col_indices")] {
        if v > MAX_DIM {
            return Err(bad(
                format!("{what} = {v} exceeds the 32-bit indices of a CSR matrix"),
                what,
                format_args!("≤ {MAX_DIM}"),
                v,
            ));
        }
    }
    if rows == 0 || cols == 0 {
        return Err(bad(
            format!("a {rows}×{cols} sparse matrix: both dimensions must be at least 1"),
            if rows == 0 { "rows" } else { "cols" },
            "≥ 1",
            0,
        ));
    }
    if offsets.len() != rows + 1 {
        return Err(bad(
            format!(
                "{} row offsets for {rows} rows: a CSR matrix has rows + 1",
                offsets.len()
            ),
            "row_offsets",
            format_args!("{} offsets", rows + 1),
            format_args!("{} offsets", offsets.len()),
        ));
    }
    if values != indices.len() {
        return Err(bad(
            format!(
                "{values} values for {} column indices: one value per stored element",
                indices.len()
            ),
            "values",
            format_args!("{} values", indices.len()),
            format_args!("{values} values"),
        ));
    }
    if offsets[0] != 0 {
        return Err(bad(
            format!("row offsets start at {}, not 0 (indices are zero-based)", offsets[0]),
            "row_offsets",
            "row_offsets[0] = 0",
            offsets[0],
        ));
    }
    if offsets[rows] as i64 != indices.len() as i64 {
        return Err(bad(
            format!(
                "the last row offset is {}, but there are {} stored elements",
                offsets[rows],
                indices.len()
            ),
            "row_offsets",
            format_args!("row_offsets[{rows}] = {}", indices.len()),
            offsets[rows],
        ));
    }
    for r in 0..rows {
        let (start, end) = (offsets[r], offsets[r + 1]);
        if end < start {
            return Err(bad(
                format!("row offsets decrease at row {r}: {start} then {end}"),
                "row_offsets",
                format_args!("row_offsets[{}] ≥ {start}", r + 1),
                end,
            ));
        }
        let row = &indices[start as usize..end as usize];
        for (k, &c) in row.iter().enumerate() {
            if c < 0 || c as usize >= cols {
                return Err(bad(
                    format!("column index {c} in row {r} is outside 0..{cols}"),
                    "col_indices",
                    format_args!("0 ≤ index < {cols}"),
                    c,
                ));
            }
            if k > 0 && c <= row[k - 1] {
                return Err(bad(
                    format!(
                        "row {r}'s column indices are not strictly increasing ({} then {c}): sort each row and sum \
                         duplicates (upload_coo does)",
                        row[k - 1]
                    ),
                    "col_indices",
                    format_args!("> {}", row[k - 1]),
                    c,
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structures_are_checked_and_each_fault_named() {
        // [[1, 0, 2], [0, 0, 0], [0, 3, 0]]
        let ok = check_structure(3, 3, &[0, 2, 2, 3], &[0, 2, 1], 3);
        assert!(ok.is_ok(), "{ok:?}");
        let cases: [(&[i32], &[i32], usize, &str); 7] = [
            (&[0, 2, 2], &[0, 2, 1], 3, "row_offsets"),
            (&[1, 2, 2, 3], &[0, 2, 1], 3, "row_offsets"),
            (&[0, 2, 2, 4], &[0, 2, 1], 3, "row_offsets"),
            (&[0, 2, 1, 3], &[0, 2, 1], 3, "row_offsets"),
            (&[0, 2, 2, 3], &[0, 3, 1], 3, "col_indices"),
            (&[0, 2, 2, 3], &[2, 0, 1], 3, "col_indices"),
            (&[0, 2, 2, 3], &[0, 2, 1], 2, "values"),
        ];
        for (offsets, indices, values, arg) in cases {
            match check_structure(3, 3, offsets, indices, values) {
                Err(GpuError::InvalidArgument(e)) => assert_eq!(e.arg.as_deref(), Some(arg), "{e}"),
                other => panic!("{offsets:?} {indices:?}: {other:?}"),
            }
        }
        assert!(check_structure(0, 3, &[0], &[], 0).is_err());
        assert!(check_structure(1, 3, &[0, 1], &[-1], 1).is_err());
    }
}
