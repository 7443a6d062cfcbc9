//! What CUDA graphs need beyond cudarc's safe layer: a `Send` owner for an instantiated
//! graph, and a cuBLAS workspace fixed before capture.

use std::sync::Arc;

use cudarc::cublas::CudaBlas;
use cudarc::driver::{sys as ds, CudaGraph, CudaSlice, CudaStream, DevicePtrMut};

use crate::error::GpuError;

/// An instantiated graph owned by one actor.
pub(crate) struct GraphExec(CudaGraph);

// SAFETY: CUDA forbids concurrent use of one graph from several threads, which is why
// cudarc's `CudaGraph` is not `Send`. A `GraphExec` lives inside one `GraphActor`,
// whose handlers run one at a time on the actor's own thread: every use is serialised,
// and moving it between threads (the actor's start) is allowed by CUDA.
unsafe impl Send for GraphExec {}

impl GraphExec {
    /// Ends the capture on `stream`, instantiates and uploads the graph.
    pub(crate) fn end_capture(stream: &Arc<CudaStream>) -> Result<GraphExec, GpuError> {
        let g = stream
            .end_capture(ds::CUgraphInstantiate_flags(0))?
            .ok_or_else(|| GpuError::invalid("a graph needs at least one operation"))?;
        g.upload()?;
        Ok(GraphExec(g))
    }

    /// Enqueues one replay on the stream it was captured on.
    pub(crate) fn launch(&self) -> Result<(), GpuError> {
        Ok(self.0.launch()?)
    }
}

/// Gives `blas` a workspace of its own, so a captured cuBLAS call allocates nothing
/// during capture (NVIDIA's advice for graph capture). `workspace` must outlive `blas`'s
/// use.
pub(crate) fn set_cublas_workspace(blas: &CudaBlas, workspace: &mut CudaSlice<u8>) -> Result<(), GpuError> {
    let bytes = workspace.len();
    let stream = workspace.stream().clone();
    let (ptr, _guard) = workspace.device_ptr_mut(&stream);
    // SAFETY: `ptr` is a live device allocation of `bytes` bytes in the handle's context;
    // the caller keeps it alive as long as the handle is used.
    unsafe { cudarc::cublas::sys::cublasSetWorkspace_v2(*blas.handle(), ptr as *mut std::ffi::c_void, bytes) }
        .result()
        .map_err(GpuError::from)
}
