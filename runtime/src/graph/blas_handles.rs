//! The library handles a graph's GEMM and matmul nodes capture with: a cuBLAS handle
//! with a fixed workspace, and a cuBLASLt handle made at the first matmul. With the
//! `blas` feature off there are none, and those nodes fail their check (`check`), so a
//! graph of kernels and copies still captures.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use crate::error::GpuError;

/// The cuBLAS workspace of captured GEMMs (NVIDIA's recommendation for Hopper).
#[cfg(feature = "blas")]
const CUBLAS_WORKSPACE: usize = 32 << 20;

/// A graph engine's BLAS handles, on its capture stream.
#[cfg(feature = "blas")]
pub(crate) struct BlasHandles {
    pub(crate) blas: cudarc::cublas::CudaBlas,
    /// Made at the first capture of a matmul (with its 32 MiB workspace, which the
    /// graphs' matmuls then use at every replay: they all replay on one stream, in order).
    pub(crate) lt: std::cell::RefCell<Option<crate::sys::cublaslt::LtHandle>>,
    _workspace: cudarc::driver::CudaSlice<u8>,
}

/// A graph engine's BLAS handles: none in a build without the `blas` feature.
#[cfg(not(feature = "blas"))]
pub(crate) struct BlasHandles;

impl BlasHandles {
    /// The cuBLAS handle on `stream`, with a workspace of its own so that a captured
    /// GEMM allocates nothing during capture.
    pub(crate) fn new(stream: &Arc<CudaStream>) -> Result<Self, GpuError> {
        #[cfg(feature = "blas")]
        {
            let blas = cudarc::cublas::CudaBlas::new(stream.clone())?;
            let mut workspace = stream.alloc_zeros::<u8>(CUBLAS_WORKSPACE)?;
            crate::sys::graph::set_cublas_workspace(&blas, &mut workspace)?;
            Ok(BlasHandles {
                blas,
                lt: std::cell::RefCell::new(None),
                _workspace: workspace,
            })
        }
        #[cfg(not(feature = "blas"))]
        {
            let _ = stream;
            Ok(BlasHandles)
        }
    }

    /// Makes the cuBLASLt handle if a matmul is about to be captured (outside the
    /// capture: the handle allocates its workspace).
    pub(crate) fn ready_for_matmul(&self, stream: &Arc<CudaStream>) -> Result<(), GpuError> {
        #[cfg(feature = "blas")]
        if self.lt.borrow().is_none() {
            *self.lt.borrow_mut() = Some(crate::sys::cublaslt::LtHandle::new(stream.clone())?);
        }
        let _ = stream;
        Ok(())
    }
}

/// What a GEMM or matmul node's check answers in a build without cuBLAS.
pub(crate) fn without_blas() -> Result<(), GpuError> {
    if cfg!(feature = "blas") {
        Ok(())
    } else {
        Err(GpuError::without_feature(
            "a graph's GEMM or matmul",
            "blas",
            crate::CRATE,
        ))
    }
}
