//! `Device::dense_to_csr`: the non-zeros of a dense column-major matrix as a CSR matrix,
//! converted on the device. The kernels (count, scan, fill; one block for a tiny
//! matrix), how the work is split and why not cuSPARSE are in
//! `library/sparse/dense_to_csr.rs`; here the buffers are found, the passes sent and the
//! count read back.

use super::bounds::SparseScalar;
use super::Device;
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;
use crate::library::kernels::scan::{int_scan_calls, scan_tiles};
use crate::library::sparse::dense_to_csr::{check_shape, csr_matrix, Conversion, CsrBuffers, ONE_REQUEST};
use crate::library::sparse::{CsrMatrix, MAX_DIM};

impl Device {
    /// The non-zeros of the dense column-major `rows × cols` matrix `dense` (a buffer or
    /// view holding at least `rows·cols` elements; a NaN is stored, −0 is not) as a CSR
    /// matrix, column indices increasing within each row — converted on the device:
    /// non-zeros counted per (row, run of columns), the counts scanned, then written in
    /// place (`#[kernel]`s; one count read back, to size the matrix — of a matrix of up
    /// to 2^20 elements, with the rest in one request, its buffers sized for them all).
    pub async fn dense_to_csr<T: SparseScalar>(
        &self,
        dense: &GpuRef<T>,
        rows: usize,
        cols: usize,
    ) -> Result<CsrMatrix<T>, GpuError> {
        check_shape(dense, rows, cols)?;
        if let Some(tiny) = Conversion::one_block(rows, cols) {
            return self.dense_to_csr_one_block(dense, tiny).await;
        }
        let plan = Conversion::new(rows, cols);
        let pairs = plan.pairs();
        // A small matrix's CSR buffers are sized for every element up front (a CSR
        // matrix's indices and values hold at least its non-zeros), so that count, scan
        // and fill are one request; a larger one's wait for the count.
        let early = async {
            match rows * cols <= ONE_REQUEST {
                true => self.csr_buffers::<T>(rows, rows * cols).await.map(Some),
                false => Ok(None),
            }
        };
        let (mut counts, ends, mut totals, mut early) = futures::try_join!(
            self.alloc::<i32>(pairs),
            self.alloc::<i64>(pairs),
            self.scratch::<i64>(scan_tiles(pairs)),
            early
        )?;
        // Count, scan the counts (and fill, for a small matrix), read the total back:
        // one request.
        let count = plan.count(dense, &mut counts);
        let [totals_pass, offsets_pass, scan_pass] = int_scan_calls(&counts, &ends, false, &mut totals);
        let mut launches = vec![count, totals_pass, offsets_pass, scan_pass];
        launches.extend(early.as_mut().map(|buffers| plan.fill(dense, &ends, buffers)));
        let last = ends.view(pairs - 1..pairs)?;
        let nnz = self.launch_then_read(launches, &last).await?[0];
        if nnz > MAX_DIM as i64 {
            return Err(GpuError::invalid(format!(
                "dense_to_csr: {nnz} non-zeros exceed the 32-bit indices of a CSR matrix"
            )));
        }
        let nnz = nnz as usize;
        let buffers = match early {
            Some(buffers) => buffers,
            None => {
                let mut buffers = self.csr_buffers::<T>(rows, nnz).await?;
                self.launch_kernel(plan.fill(dense, &ends, &mut buffers)).await?;
                buffers
            }
        };
        Ok(csr_matrix(rows, cols, nnz, buffers))
    }

    /// [`Device::dense_to_csr`] of a tiny matrix: one launch, its total read back.
    async fn dense_to_csr_one_block<T: SparseScalar>(
        &self,
        dense: &GpuRef<T>,
        plan: Conversion,
    ) -> Result<CsrMatrix<T>, GpuError> {
        let (rows, cols) = plan.size();
        let (mut buffers, mut nnz) =
            futures::try_join!(self.csr_buffers::<T>(rows, rows * cols), self.scratch::<i64>(1))?;
        let call = plan.in_one_block(dense, &mut buffers, &mut nnz);
        let nnz = self.launch_then_read([call], &nnz).await?[0] as usize;
        Ok(csr_matrix(rows, cols, nnz, buffers))
    }

    /// A CSR matrix's offsets (`rows + 1`), indices and values (room for `nnz`; one
    /// element at least: a buffer is never empty), asked for together.
    async fn csr_buffers<T: SparseScalar>(&self, rows: usize, nnz: usize) -> Result<CsrBuffers<T>, GpuError> {
        futures::try_join!(
            self.alloc::<i32>(rows + 1),
            self.alloc::<i32>(nnz.max(1)),
            self.alloc::<T>(nnz.max(1))
        )
    }
}
