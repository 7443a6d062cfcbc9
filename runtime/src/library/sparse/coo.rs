//! `CooMatrix<T>`: a sparse matrix on one device in coordinate form — one row index, one
//! column index and one value per stored element — and [`SparseMatrix`], either form,
//! which the products and the conversion to dense take.
//!
//! Like a [`CsrMatrix`] it is valid by construction: cuSPARSE's COO convention (sorted by
//! row, then column, each position once, indices in range) holds because a `CooMatrix`
//! is only made from a `CsrMatrix` (`Device::csr_to_coo`) — whose structure was checked
//! or written by the library — and its structure buffers are never handed out.

use super::matrix::{CsrMatrix, HostCsr};
use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;
use crate::wire::{Reader, Wire, Writer};

/// A `rows × cols` sparse matrix in COO form on one device: 32-bit zero-based row and
/// column indices of its `nnz` stored elements, sorted by row, then column, and their
/// values. Cheap to clone (handles to the same buffers). Made by `Device::csr_to_coo`;
/// `Device::coo_to_csr` goes back.
#[derive(Debug, Clone)]
pub struct CooMatrix<T: DTypeBase> {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) nnz: usize,
    /// At least `nnz` (one, when `nnz` is zero: a buffer is never empty).
    pub(crate) row_indices: GpuRef<i32>,
    /// As `row_indices`.
    pub(crate) col_indices: GpuRef<i32>,
    /// As `row_indices`.
    pub(crate) values: GpuRef<T>,
}

crate::wire::wire_struct!(CooMatrix<T: DTypeBase> {
    rows,
    cols,
    nnz,
    row_indices,
    col_indices,
    values
});

impl<T: DTypeBase> CooMatrix<T> {
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

    /// The stored values, in the matrix's order (the first `nnz` elements of the
    /// buffer): read or rewrite them as any buffer.
    pub fn values(&self) -> &GpuRef<T> {
        &self.values
    }
}

/// A sparse matrix in either form, as the products (`spmv`, `spmm`) and `csr_to_dense`
/// take it: pass `&csr` or `&coo` (the handles are cloned, not the data).
#[derive(Debug, Clone)]
pub enum SparseMatrix<T: DTypeBase> {
    /// Compressed sparse rows.
    Csr(CsrMatrix<T>),
    /// Coordinates.
    Coo(CooMatrix<T>),
}

impl<T: DTypeBase> From<CsrMatrix<T>> for SparseMatrix<T> {
    fn from(a: CsrMatrix<T>) -> Self {
        SparseMatrix::Csr(a)
    }
}

impl<T: DTypeBase> From<&CsrMatrix<T>> for SparseMatrix<T> {
    fn from(a: &CsrMatrix<T>) -> Self {
        SparseMatrix::Csr(a.clone())
    }
}

impl<T: DTypeBase> From<CooMatrix<T>> for SparseMatrix<T> {
    fn from(a: CooMatrix<T>) -> Self {
        SparseMatrix::Coo(a)
    }
}

impl<T: DTypeBase> From<&CooMatrix<T>> for SparseMatrix<T> {
    fn from(a: &CooMatrix<T>) -> Self {
        SparseMatrix::Coo(a.clone())
    }
}

impl<T: DTypeBase> Wire for SparseMatrix<T> {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        match self {
            SparseMatrix::Csr(a) => {
                w.put_u8(0);
                a.put(w)
            }
            SparseMatrix::Coo(a) => {
                w.put_u8(1);
                a.put(w)
            }
        }
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        match r.take_u8()? {
            0 => Ok(SparseMatrix::Csr(CsrMatrix::take(r)?)),
            1 => Ok(SparseMatrix::Coo(CooMatrix::take(r)?)),
            t => Err(GpuError::invalid(format!("{t} is not a sparse matrix form"))),
        }
    }
}

impl<T: DTypeBase> SparseMatrix<T> {
    /// Rows, columns and stored elements.
    pub(crate) fn shape(&self) -> (usize, usize, usize) {
        match self {
            SparseMatrix::Csr(a) => (a.rows, a.cols, a.nnz),
            SparseMatrix::Coo(a) => (a.rows, a.cols, a.nnz),
        }
    }

    /// Its three buffers: the row structure (CSR offsets or COO row indices), the
    /// column indices and the values.
    pub(crate) fn buffers(&self) -> (&GpuRef<i32>, &GpuRef<i32>, &GpuRef<T>) {
        match self {
            SparseMatrix::Csr(a) => (&a.offsets, &a.indices, &a.values),
            SparseMatrix::Coo(a) => (&a.row_indices, &a.col_indices, &a.values),
        }
    }

    /// Whether it is in COO form.
    pub(crate) fn is_coo(&self) -> bool {
        matches!(self, SparseMatrix::Coo(_))
    }
}

/// The row offsets (`rows + 1`) of the sorted row indices `rows_of` — the CSR form of a
/// COO structure, on the host.
pub(crate) fn offsets_of_rows(rows_of: &[i32], rows: usize) -> Vec<i32> {
    let mut offsets = vec![0i32; rows + 1];
    for &r in rows_of {
        offsets[r as usize + 1] += 1;
    }
    for r in 0..rows {
        offsets[r + 1] += offsets[r];
    }
    offsets
}

/// Triplets (row, column, value) as a CSR matrix: sorted by row then column, duplicates
/// summed in float64 (as cuSPARSE's `coo2csr` after a sort and a reduce by key). The
/// indices must lie inside `rows × cols` (checked by the caller). Plain host code, so
/// a build without the `sparse` feature uploads COO data too.
pub(crate) fn coo_to_csr<T: DTypeBase>(
    (rows, cols): (usize, usize),
    row_indices: &[i32],
    col_indices: &[i32],
    values: &[T],
) -> HostCsr<T> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by_key(|&k| (row_indices[k], col_indices[k]));
    let mut offsets = vec![0i32; rows + 1];
    let (mut indices, mut sums) = (Vec::new(), Vec::<f64>::new());
    let mut last = None;
    for k in order {
        let at = (row_indices[k], col_indices[k]);
        if last == Some(at) {
            *sums.last_mut().expect("a previous element") += values[k].to_f64();
        } else {
            indices.push(at.1);
            sums.push(values[k].to_f64());
            offsets[at.0 as usize + 1] += 1;
            last = Some(at);
        }
    }
    for r in 0..rows {
        offsets[r + 1] += offsets[r];
    }
    HostCsr {
        rows,
        cols,
        offsets,
        indices,
        values: sums.into_iter().map(T::from_f64).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::offsets_of_rows;

    #[test]
    fn row_offsets_of_sorted_rows() {
        assert_eq!(offsets_of_rows(&[0, 0, 2, 3, 3, 3], 5), vec![0, 2, 2, 3, 6, 6]);
        assert_eq!(offsets_of_rows(&[], 2), vec![0, 0, 0]);
    }
}
