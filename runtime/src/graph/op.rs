//! What a graph operation is: the `GraphNode` trait every kind implements, what a
//! capture hands it (`Capture`), and the kinds' tags on the wire. The kinds themselves
//! live in `node.rs` (GEMM, `#[kernel]`, copy) and `matmul_node.rs`.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::CudaStream;

use super::blas_handles::BlasHandles;
use super::raw::RawDevice;
use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;
use crate::launch::KernelArgs;
use crate::wire::Writer;

/// What a node captures with: the capturing stream, the graph's BLAS handles (the
/// cuBLASLt one made once a matmul needed it), and the address of every buffer (by id),
/// resolved before the capture began.
pub(crate) struct Capture<'a> {
    pub(crate) stream: &'a Arc<CudaStream>,
    pub(crate) blas: &'a BlasHandles,
    pub(crate) addresses: &'a HashMap<u64, u64>,
}

impl Capture<'_> {
    /// `r`'s window at its buffer's resolved address, as a raw device slice for a
    /// library call inside the capture.
    pub(crate) fn view<T: DTypeBase>(&self, r: &GpuRef<T>) -> Result<RawDevice<T>, GpuError> {
        let ptr = self
            .addresses
            .get(&r.id())
            .ok_or_else(|| GpuError::Internal(format!("graph: buffer #{} was not resolved before capture", r.id())))?;
        let at = *ptr + (r.offset() * std::mem::size_of::<T>()) as u64;
        Ok(RawDevice::new(at, r.len(), self.stream))
    }
}

/// One operation of a graph.
pub(crate) trait GraphNode: Send {
    /// Its buffers, as a launch's arguments.
    fn args(&self) -> &KernelArgs;
    /// Shape checks, before anything is captured or run.
    fn check(&self) -> Result<(), GpuError>;
    /// Work that must not happen inside a capture (compiling, loading a module).
    fn prepare(&self, _stream: &Arc<CudaStream>) -> Result<(), GpuError> {
        Ok(())
    }
    /// Whether it captures a cuBLASLt matmul (the graph then makes its handle first).
    fn uses_matmul(&self) -> bool {
        false
    }
    /// Enqueues the operation on the capturing stream.
    fn capture(&self, cx: &Capture<'_>) -> Result<(), GpuError>;
    /// Runs the operation on the CPU device.
    fn run_cpu(&self) -> Result<(), GpuError>;
    /// Writes the operation for an isolated device's worker (`node::take_node` reads it).
    fn put_wire(&self, w: &mut Writer<'_>) -> Result<(), GpuError>;
}

/// What kind of operation follows on the wire.
pub(crate) const GEMM: u8 = 0;
pub(crate) const KERNEL: u8 = 1;
pub(crate) const MATMUL: u8 = 3;
pub(crate) const COPY: u8 = 2;
