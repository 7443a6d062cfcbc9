//! A sparse product's buffers, locked together: the matrix's three and the dense input
//! and output — which may be views of one buffer — each buffer once, in buffer-id order.
//!
//! Why: an iterative method keeps its vectors side by side in one buffer (a Krylov
//! basis: column j + 1 = A · column j). Locking the input and the output each would lock
//! that buffer twice (a deadlock), so a shared buffer is locked once, through the
//! output, and the input is read from the other part of it.

use std::borrow::Cow;

use cudarc::driver::{CudaStream, SyncOnDrop};

use super::coo::{self, SparseMatrix};
use super::cpu::CsrHost;
use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::gpu_ref::{lock4, lock5, GpuRef, Locked};

/// A product's buffers, locked.
pub(super) struct Product<'a, T: DTypeBase> {
    a: &'a SparseMatrix<T>,
    input: &'a GpuRef<T>,
    /// The matrix's row structure (CSR offsets or COO row indices) and column indices.
    structure: (Locked<'a, i32>, Locked<'a, i32>),
    values: Locked<'a, T>,
    dense: Dense<'a, T>,
}

/// The input and the output, locked.
enum Dense<'a, T> {
    /// In two buffers.
    Apart(Locked<'a, T>, Locked<'a, T>),
    /// Views of one buffer (lying apart: the caller checked), locked through the output.
    Shared(Locked<'a, T>),
}

impl<'a, T: DTypeBase> Product<'a, T> {
    /// Locks `a`'s buffers, `input` and `output`, each buffer once, in id order.
    pub(super) fn lock(a: &'a SparseMatrix<T>, input: &'a GpuRef<T>, output: &'a GpuRef<T>) -> Self {
        let (r, c, v) = a.buffers();
        let (so, si, values, dense) = if input.same_buffer(output) {
            let (so, si, sv, sy) = lock4(r, c, v, output);
            (so, si, sv, Dense::Shared(sy))
        } else {
            let (so, si, sv, sx, sy) = lock5(r, c, v, input, output);
            (so, si, sv, Dense::Apart(sx, sy))
        };
        Product {
            a,
            input,
            structure: (so, si),
            values,
            dense,
        }
    }

    /// On the CPU device: runs `f` on the matrix in host memory, the input to read and
    /// the output to write.
    pub(super) fn host<R>(
        &mut self,
        f: impl FnOnce(CsrHost<'_, T>, &[T], &mut [T]) -> Result<R, GpuError>,
    ) -> Result<R, GpuError> {
        let Product {
            a,
            input,
            structure,
            values,
            dense,
        } = self;
        let offsets = row_offsets(a, &structure.0)?;
        let m = host_matrix(a, (&offsets, &structure.1, values))?;
        match dense {
            Dense::Apart(x, y) => f(m, x.host()?, y.host_mut()?),
            Dense::Shared(y) => y.split([Some(input.window())], |out, [inp]| {
                f(m, inp.expect("the input is a part").into_host()?, out.into_host()?)
            })?,
        }
    }

    /// On a GPU: the addresses of the matrix's row structure, column indices and values,
    /// of the input and of the output, each ordered for a use on `stream` (the output
    /// written, the rest read); the guards record the uses when dropped, after the
    /// enqueue.
    pub(super) fn addresses<'b>(
        &'b mut self,
        stream: &'b CudaStream,
    ) -> Result<([u64; 5], Vec<SyncOnDrop<'b>>), GpuError> {
        let Product {
            input,
            structure: (so, si),
            values,
            dense,
            ..
        } = self;
        let (o, go) = so.address(stream, false)?;
        let (i, gi) = si.address(stream, false)?;
        let (v, gv) = values.address(stream, false)?;
        let mut guards = vec![go, gi, gv];
        let (x, y) = match dense {
            Dense::Apart(sx, sy) => {
                let (x, gx) = sx.address(stream, false)?;
                let (y, gy) = sy.address(stream, true)?;
                guards.extend([gx, gy]);
                (x, y)
            }
            Dense::Shared(sy) => {
                // Locked through the output: the input's window of the same buffer.
                let output_offset = sy.byte_offset();
                let (y, gy) = sy.address(stream, true)?;
                guards.push(gy);
                let input_offset = (input.offset() * std::mem::size_of::<T>()) as u64;
                (y - output_offset + input_offset, y)
            }
        };
        Ok(([o, i, v, x, y], guards))
    }
}

/// A locked matrix's row offsets on the host: a CSR matrix's own, or those of a COO
/// matrix's (sorted) row indices.
pub(super) fn row_offsets<'a, T: DTypeBase>(
    a: &SparseMatrix<T>,
    so: &'a Locked<'_, i32>,
) -> Result<Cow<'a, [i32]>, GpuError> {
    let (rows, _, nnz) = a.shape();
    Ok(match a {
        SparseMatrix::Csr(_) => Cow::Borrowed(so.host()?),
        SparseMatrix::Coo(_) => Cow::Owned(coo::offsets_of_rows(&so.host()?[..nnz], rows)),
    })
}

/// A locked matrix's host slices, with its row offsets.
pub(super) fn host_matrix<'a, T: DTypeBase>(
    a: &SparseMatrix<T>,
    (offsets, si, sv): (&'a [i32], &'a Locked<'_, i32>, &'a Locked<'_, T>),
) -> Result<CsrHost<'a, T>, GpuError> {
    let (rows, cols, _) = a.shape();
    Ok(CsrHost {
        rows,
        cols,
        offsets,
        indices: si.host()?,
        values: sv.host()?,
    })
}
