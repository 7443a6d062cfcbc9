//! The GPU side of the `SparseActor`: cuSPARSE's generic routines on the actor's stream,
//! each buffer's address taken in stream order (after its last writer on another
//! stream, the use recorded) for the length of the enqueue.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use super::coo::SparseMatrix;
use super::product::Product;
use super::SparseFloat;
use crate::actor::Deferred;
use crate::backend::state::DeviceShared;
use crate::completion::Completer;
use crate::error::GpuError;
use crate::gpu_ref::{lock4, GpuRef};
use crate::sys::cusparse::{DnMat, DnVec, SpMat, Sparse, SparsePtrs};

/// The cuSPARSE handle of one generation and how its work is waited for.
pub(super) struct CudaSparse {
    sparse: Sparse,
    completer: Completer,
}

impl CudaSparse {
    pub(super) fn new(stream: Arc<CudaStream>, completer: Completer) -> Result<Self, GpuError> {
        Ok(CudaSparse {
            sparse: Sparse::new(stream)?,
            completer,
        })
    }

    /// The stream its routines run on.
    pub(super) fn stream(&self) -> &Arc<CudaStream> {
        self.sparse.stream()
    }

    /// Resolves once the stream has run what was enqueued.
    fn done(&self, shared: &Arc<DeviceShared>) -> Deferred<()> {
        shared.deferred(self.completer.done(self.sparse.stream()))
    }

    pub(super) fn spmv<T: SparseFloat>(
        &mut self,
        shared: &Arc<DeviceShared>,
        (a, x, y): (&SparseMatrix<T>, &GpuRef<T>, &GpuRef<T>),
        (transpose, scale): (bool, (T, T)),
    ) -> Result<Deferred<()>, GpuError> {
        let stream = self.sparse.stream().clone();
        let mut held = Product::lock(a, x, y);
        let ([offsets, indices, values, xp, yp], _recorded_on_drop) = held.addresses(&stream)?;
        let m = descriptor(a, offsets, indices, values)?;
        let (rows, cols, _) = a.shape();
        let (in_len, out_len) = if transpose { (rows, cols) } else { (cols, rows) };
        let (vx, vy) = (DnVec::new::<T>(xp, in_len)?, DnVec::new::<T>(yp, out_len)?);
        self.sparse.spmv(transpose, scale, &m, &vx, &vy)?;
        Ok(self.done(shared))
    }

    pub(super) fn spmm<T: SparseFloat>(
        &mut self,
        shared: &Arc<DeviceShared>,
        (a, b, c): (&SparseMatrix<T>, &GpuRef<T>, &GpuRef<T>),
        (transpose, n): (bool, usize),
        scale: (T, T),
    ) -> Result<Deferred<()>, GpuError> {
        let stream = self.sparse.stream().clone();
        let mut held = Product::lock(a, b, c);
        let ([offsets, indices, values, bp, cp], _recorded_on_drop) = held.addresses(&stream)?;
        let m = descriptor(a, offsets, indices, values)?;
        let (rows, cols, _) = a.shape();
        let (inner, outer) = if transpose { (rows, cols) } else { (cols, rows) };
        let (mb, mc) = (
            DnMat::col_major::<T>(bp, inner, n)?,
            DnMat::col_major::<T>(cp, outer, n)?,
        );
        self.sparse.spmm(transpose, scale, &m, &mb, &mc)?;
        Ok(self.done(shared))
    }

    pub(super) fn densify<T: SparseFloat>(
        &mut self,
        shared: &Arc<DeviceShared>,
        a: &SparseMatrix<T>,
        dense: &GpuRef<T>,
    ) -> Result<Deferred<()>, GpuError> {
        let stream = self.sparse.stream().clone();
        let (mut so, mut si, mut sv, mut sd) = {
            let (r, i, v) = a.buffers();
            lock4(r, i, v, dense)
        };
        let (offsets, _o) = so.address(&stream, false)?;
        let (indices, _i) = si.address(&stream, false)?;
        let (values, _v) = sv.address(&stream, false)?;
        let (dp, _d) = sd.address(&stream, true)?;
        let m = descriptor(a, offsets, indices, values)?;
        let (rows, cols, _) = a.shape();
        self.sparse.densify(&m, &DnMat::col_major::<T>(dp, rows, cols)?)?;
        Ok(self.done(shared))
    }
}

/// `a`'s descriptor — CSR or COO — from its shape and its buffers' addresses.
fn descriptor<T: SparseFloat>(
    a: &SparseMatrix<T>,
    row_structure: u64,
    indices: u64,
    values: u64,
) -> Result<SpMat, GpuError> {
    let (rows, cols, nnz) = a.shape();
    let p = SparsePtrs {
        rows,
        cols,
        nnz,
        row_structure,
        indices,
        values,
    };
    match a {
        SparseMatrix::Csr(_) => SpMat::csr::<T>(p),
        SparseMatrix::Coo(_) => SpMat::coo::<T>(p),
    }
}
