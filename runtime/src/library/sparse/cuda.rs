//! The GPU side of the `SparseActor`: cuSPARSE's generic routines on the actor's stream,
//! each buffer's address taken in stream order (after its last writer on another
//! stream, the use recorded) for the length of the enqueue.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use super::matrix::CsrMatrix;
use super::SparseFloat;
use crate::actor::Deferred;
use crate::backend::state::DeviceShared;
use crate::completion::Completer;
use crate::error::GpuError;
use crate::gpu_ref::{lock4, lock5, GpuRef};
use crate::sys::cusparse::{CsrPtrs, DnMat, DnVec, SpMat, Sparse};

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
        (a, x, y): (&CsrMatrix<T>, &GpuRef<T>, &GpuRef<T>),
        (transpose, scale): (bool, (T, T)),
    ) -> Result<Deferred<()>, GpuError> {
        let stream = self.sparse.stream().clone();
        let (mut so, mut si, mut sv, mut sx, mut sy) = lock5(&a.offsets, &a.indices, &a.values, x, y);
        let (offsets, _o) = so.address(&stream, false)?;
        let (indices, _i) = si.address(&stream, false)?;
        let (values, _v) = sv.address(&stream, false)?;
        let (xp, _x) = sx.address(&stream, false)?;
        let (yp, _y) = sy.address(&stream, true)?;
        let m = SpMat::csr::<T>(ptrs(a, offsets, indices, values))?;
        let (in_len, out_len) = if transpose { (a.rows, a.cols) } else { (a.cols, a.rows) };
        let (vx, vy) = (DnVec::new::<T>(xp, in_len)?, DnVec::new::<T>(yp, out_len)?);
        self.sparse.spmv(transpose, scale, &m, &vx, &vy)?;
        Ok(self.done(shared))
    }

    pub(super) fn spmm<T: SparseFloat>(
        &mut self,
        shared: &Arc<DeviceShared>,
        (a, b, c): (&CsrMatrix<T>, &GpuRef<T>, &GpuRef<T>),
        (transpose, n): (bool, usize),
        scale: (T, T),
    ) -> Result<Deferred<()>, GpuError> {
        let stream = self.sparse.stream().clone();
        let (mut so, mut si, mut sv, mut sb, mut sc) = lock5(&a.offsets, &a.indices, &a.values, b, c);
        let (offsets, _o) = so.address(&stream, false)?;
        let (indices, _i) = si.address(&stream, false)?;
        let (values, _v) = sv.address(&stream, false)?;
        let (bp, _b) = sb.address(&stream, false)?;
        let (cp, _c) = sc.address(&stream, true)?;
        let m = SpMat::csr::<T>(ptrs(a, offsets, indices, values))?;
        let (inner, outer) = if transpose { (a.rows, a.cols) } else { (a.cols, a.rows) };
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
        a: &CsrMatrix<T>,
        dense: &GpuRef<T>,
    ) -> Result<Deferred<()>, GpuError> {
        let stream = self.sparse.stream().clone();
        let (mut so, mut si, mut sv, mut sd) = lock4(&a.offsets, &a.indices, &a.values, dense);
        let (offsets, _o) = so.address(&stream, false)?;
        let (indices, _i) = si.address(&stream, false)?;
        let (values, _v) = sv.address(&stream, false)?;
        let (dp, _d) = sd.address(&stream, true)?;
        let m = SpMat::csr::<T>(ptrs(a, offsets, indices, values))?;
        self.sparse.densify(&m, &DnMat::col_major::<T>(dp, a.rows, a.cols)?)?;
        Ok(self.done(shared))
    }
}

/// `a`'s shape with its buffers' addresses.
fn ptrs<T: SparseFloat>(a: &CsrMatrix<T>, offsets: u64, indices: u64, values: u64) -> CsrPtrs {
    CsrPtrs {
        rows: a.rows,
        cols: a.cols,
        nnz: a.nnz,
        offsets,
        indices,
        values,
    }
}
