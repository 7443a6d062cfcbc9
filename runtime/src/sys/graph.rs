//! What CUDA graphs need beyond cudarc's safe layer: a `Send` owner for an instantiated
//! graph, a cuBLAS workspace fixed before capture, and captures kept apart from the
//! context-wide synchronisation that would break them.
//!
//! Why the last: CUDA forbids synchronising a context while any of its streams is
//! capturing — the synchronising call fails and the capture is invalidated (its next
//! library call reports `CUBLAS_STATUS_EXECUTION_FAILED`). cudarc synchronises the
//! context when a `CudaContext` makes its first stream (turning its event tracking on),
//! and every `Device` has a `CudaContext` of its own over the GPU's one primary context,
//! so a device starting while another captured broke both (found on an H100 with tests
//! running in parallel, 2026-12-05). Captures hold [`GATE`] shared — several may run at
//! once, each thread-local — and making a stream holds it exclusively.

use std::sync::{Arc, RwLock};

use cudarc::cublas::CudaBlas;
use cudarc::driver::{sys as ds, CudaContext, CudaGraph, CudaSlice, CudaStream, DevicePtrMut};

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

/// Held shared by every capture in the process, exclusively while a stream is made.
static GATE: RwLock<()> = RwLock::new(());

/// Captures what `enqueue` puts on `stream` into an instantiated, uploaded graph. The
/// capture is thread-local (other threads' CUDA calls are not affected) and holds
/// [`GATE`], so no stream is made — no context synchronised — meanwhile. Whatever fails,
/// the stream leaves capture mode before this returns.
pub(crate) fn capture(
    stream: &Arc<CudaStream>,
    enqueue: impl FnOnce() -> Result<(), GpuError>,
) -> Result<GraphExec, GpuError> {
    let _captures = GATE.read().unwrap_or_else(|p| p.into_inner());
    stream.begin_capture(ds::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let enqueued = enqueue();
    // Always ended, even when the enqueue failed: the stream must not stay capturing.
    let ended = GraphExec::end_capture(stream);
    enqueued?;
    ended
}

/// A new stream of `ctx` (cudarc's non-blocking one), made while no capture runs: the
/// first stream of a `CudaContext` synchronises the whole context.
pub(crate) fn new_stream(ctx: &Arc<CudaContext>) -> Result<Arc<CudaStream>, GpuError> {
    let _alone = GATE.write().unwrap_or_else(|p| p.into_inner());
    Ok(ctx.new_stream()?)
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
