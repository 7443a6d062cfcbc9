//! The sparse part of the `Device` client that is more than one request: making a
//! `CsrMatrix` from host data (checked here: cuSPARSE trusts a structure), reading one
//! back, and moving between the CSR and COO forms (`#[kernel]`s: a row's offsets spread
//! into its elements' row indices, and back by a binary search per row). Products and
//! the conversion to dense are single requests, generated from the `SparseActor`'s
//! handlers; the conversion from dense is `dense_to_csr.rs`.

use super::bounds::SparseScalar;
use super::Device;
use crate::error::GpuError;
use crate::launch::LaunchConfig;
use crate::library::sparse::{check_structure, coo_to_csr, CooMatrix, CsrMatrix, HostCsr, MAX_DIM};

/// Row `r`'s elements get row index `r`: `row_indices[offsets[r]..offsets[r + 1]] = r`.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn rows_of_offsets(offsets: &[i32], row_indices: &mut [i32]) {
    let r = global_index();
    if r + 1 < offsets.len() {
        let mut k = offsets[r] as usize;
        let end = offsets[r + 1] as usize;
        while k < end {
            row_indices[k] = r as i32;
            k += 1;
        }
    }
}

/// `offsets[r]` = the first of the `nnz` sorted row indices that is `r` or more (a
/// binary search per row; `offsets[rows] = nnz`).
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn offsets_of_rows(row_indices: &[i32], nnz: u32, offsets: &mut [i32]) {
    let r = global_index();
    if r < offsets.len() {
        let mut lo: usize = 0;
        let mut hi = nnz as usize;
        while lo < hi {
            let mid = (lo + hi) / 2;
            if (row_indices[mid] as usize) < r {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        offsets[r] = lo as i32;
    }
}

impl Device {
    /// A `rows × cols` CSR matrix on the device from its host arrays: `row_offsets`
    /// (`rows + 1`, from 0, never decreasing), `col_indices` (in `0..cols`, strictly
    /// increasing within each row) and one value per index. The structure is checked
    /// before anything is uploaded; the first fault is an `InvalidArgument` naming it.
    pub async fn upload_csr<T: SparseScalar>(
        &self,
        rows: usize,
        cols: usize,
        row_offsets: &[i32],
        col_indices: &[i32],
        values: &[T],
    ) -> Result<CsrMatrix<T>, GpuError> {
        check_structure(rows, cols, row_offsets, col_indices, values.len())?;
        let nnz = values.len();
        // A buffer is never empty: a matrix without stored elements keeps one unused.
        let (indices, vals) = if nnz == 0 {
            (self.alloc::<i32>(1).await?, self.alloc::<T>(1).await?)
        } else {
            (self.upload(col_indices).await?, self.upload(values).await?)
        };
        Ok(CsrMatrix {
            rows,
            cols,
            nnz,
            offsets: self.upload(row_offsets).await?,
            indices,
            values: vals,
        })
    }

    /// A CSR matrix from coordinates: element `k` is `values[k]` at (`row_indices[k]`,
    /// `col_indices[k]`), in any order; duplicates are summed (in float64). Converted on
    /// the host (`sprs`), then uploaded as [`Device::upload_csr`].
    pub async fn upload_coo<T: SparseScalar>(
        &self,
        (rows, cols): (usize, usize),
        row_indices: &[i32],
        col_indices: &[i32],
        values: &[T],
    ) -> Result<CsrMatrix<T>, GpuError> {
        if row_indices.len() != values.len() || col_indices.len() != values.len() {
            return Err(GpuError::invalid(format!(
                "upload_coo: {} row indices, {} column indices and {} values: one of each per element",
                row_indices.len(),
                col_indices.len(),
                values.len()
            )));
        }
        let inside = |v: i32, n: usize| v >= 0 && (v as usize) < n;
        if let Some(k) = (0..values.len()).find(|&k| !inside(row_indices[k], rows) || !inside(col_indices[k], cols)) {
            return Err(GpuError::invalid(format!(
                "upload_coo: element {k} at ({}, {}) lies outside the {rows}×{cols} matrix",
                row_indices[k], col_indices[k]
            )));
        }
        if rows > MAX_DIM || cols > MAX_DIM {
            check_structure(rows, cols, &[], &[], 0)?; // names the dimension at fault
        }
        let csr = coo_to_csr((rows, cols), row_indices, col_indices, values);
        self.upload_csr(rows, cols, &csr.offsets, &csr.indices, &csr.values)
            .await
    }

    /// The matrix's structure and values, read back to the host.
    pub async fn download_csr<T: SparseScalar>(&self, a: &CsrMatrix<T>) -> Result<HostCsr<T>, GpuError> {
        let (offsets, mut indices, mut values) = futures::try_join!(
            self.download(&a.offsets),
            self.download(&a.indices),
            self.download(&a.values)
        )?;
        indices.truncate(a.nnz);
        values.truncate(a.nnz);
        Ok(HostCsr {
            rows: a.rows,
            cols: a.cols,
            offsets,
            indices,
            values,
        })
    }

    /// The same matrix in COO form: its row offsets spread into one row index per
    /// stored element (a `#[kernel]`), its column indices and values copied — the two
    /// matrices share no buffer. The COO form keeps the CSR's order (by row, then
    /// column), as cuSPARSE's COO routines expect.
    pub async fn csr_to_coo<T: SparseScalar>(&self, a: &CsrMatrix<T>) -> Result<CooMatrix<T>, GpuError> {
        let len = a.nnz.max(1);
        let (mut row_indices, col_indices, values) = (
            self.alloc::<i32>(len).await?,
            self.alloc::<i32>(len).await?,
            self.alloc::<T>(len).await?,
        );
        if a.nnz > 0 {
            let cfg = LaunchConfig::for_elements(a.rows, 128);
            rows_of_offsets::launch(self, cfg, &a.offsets, &mut row_indices).await?;
        }
        self.copy(&a.indices.view(0..len)?, &col_indices).await?;
        self.copy(&a.values.view(0..len)?, &values).await?;
        Ok(CooMatrix {
            rows: a.rows,
            cols: a.cols,
            nnz: a.nnz,
            row_indices,
            col_indices,
            values,
        })
    }

    /// The same matrix in CSR form: row offsets found from the sorted row indices (a
    /// `#[kernel]`: one binary search per row), column indices and values copied.
    pub async fn coo_to_csr<T: SparseScalar>(&self, a: &CooMatrix<T>) -> Result<CsrMatrix<T>, GpuError> {
        let len = a.nnz.max(1);
        let (mut offsets, indices, values) = (
            self.alloc::<i32>(a.rows + 1).await?,
            self.alloc::<i32>(len).await?,
            self.alloc::<T>(len).await?,
        );
        let cfg = LaunchConfig::for_elements(a.rows + 1, 256);
        offsets_of_rows::launch(self, cfg, &a.row_indices, a.nnz as u32, &mut offsets).await?;
        self.copy(&a.col_indices.view(0..len)?, &indices).await?;
        self.copy(&a.values.view(0..len)?, &values).await?;
        Ok(CsrMatrix {
            rows: a.rows,
            cols: a.cols,
            nnz: a.nnz,
            offsets,
            indices,
            values,
        })
    }

    /// A COO matrix read back to the host as `(row_indices, col_indices, values)` of its
    /// stored elements, in its order.
    pub async fn download_coo<T: SparseScalar>(
        &self,
        a: &CooMatrix<T>,
    ) -> Result<(Vec<i32>, Vec<i32>, Vec<T>), GpuError> {
        let (mut r, mut c, mut v) = futures::try_join!(
            self.download(&a.row_indices),
            self.download(&a.col_indices),
            self.download(&a.values)
        )?;
        r.truncate(a.nnz);
        c.truncate(a.nnz);
        v.truncate(a.nnz);
        Ok((r, c, v))
    }
}
