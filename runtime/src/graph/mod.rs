//! `graph`: record a sequence of device operations once — GEMMs, `#[kernel]` launches,
//! device-to-device copies — and replay it many times for the cost of one launch.
//!
//! ```ignore
//! let g = device
//!     .capture_graph(
//!         GraphBuilder::new()
//!             .gemm(Gemm::<f32>::new(n, n, n), &a, &b, &c)
//!             .kernel(relu::call::<f32>(LaunchConfig::for_elements(n * n, 256), &mut c))
//!             .copy(&c, &out),
//!     )
//!     .await?;
//! device.replay(&g, 100).await?; // 100 back-to-back replays, one reply
//! ```
//!
//! On a GPU the device's `GraphActor` captures the operations on a stream of its own
//! into a CUDA graph (`cuStreamBeginCapture` … `cuGraphInstantiate`, uploaded once), with
//! its own cuBLAS handle and workspace. Buffers are captured by address: the graph keeps
//! every buffer it uses alive, and each replay checks them against the device's
//! generation (`Stale` after a rebuild) and orders itself after their last writers and
//! before their next users on other streams. On the CPU device the graph is the list of
//! operations, run in order on each replay — the same results, no speed-up.
//!
//! A graph is freed when its last `GraphRef` is dropped.

mod graph_actor;
mod node;
mod raw;

use std::sync::Arc;

pub use graph_actor::{GraphActor, GraphActorMsg, GraphActorRef};

use crate::dtype::{BlasBase, DTypeBase};
use crate::gpu_ref::GpuRef;
use crate::kernel::dsl::KernelCall;
use crate::library::blas::{Batch, Gemm};
use node::{CopyNode, GemmNode, GraphNode, KernelNode};

/// The operations of a graph, in order. Nothing is checked until
/// `Device::capture_graph`, which reports the first bad operation with its index.
#[derive(Default)]
pub struct GraphBuilder {
    nodes: Vec<Box<dyn GraphNode>>,
}

impl std::fmt::Debug for GraphBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GraphBuilder({} operations)", self.nodes.len())
    }
}

impl GraphBuilder {
    /// An empty graph.
    pub fn new() -> Self {
        GraphBuilder::default()
    }

    /// Adds `C = alpha·op(A)·op(B) + beta·C` (column-major, as `Device::gemm`).
    pub fn gemm<T: BlasBase>(self, g: Gemm<T>, a: &GpuRef<T>, b: &GpuRef<T>, c: &GpuRef<T>) -> Self {
        self.gemm_strided_batched(g, Batch::one(), a, b, c)
    }

    /// Adds a strided-batched GEMM (as `Device::gemm_strided_batched`).
    pub fn gemm_strided_batched<T: BlasBase>(
        mut self,
        g: Gemm<T>,
        batch: Batch,
        a: &GpuRef<T>,
        b: &GpuRef<T>,
        c: &GpuRef<T>,
    ) -> Self {
        self.nodes.push(Box::new(GemmNode::new(g, batch, a, b, c)));
        self
    }

    /// Adds a `#[kernel]` launch, built by the kernel's generated `call` function.
    pub fn kernel(mut self, call: KernelCall) -> Self {
        self.nodes.push(Box::new(KernelNode { call }));
        self
    }

    /// Adds a device-to-device copy (equal lengths).
    pub fn copy<T: DTypeBase>(mut self, src: &GpuRef<T>, dst: &GpuRef<T>) -> Self {
        self.nodes.push(Box::new(CopyNode::new(src, dst)));
        self
    }

    /// The number of operations.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True before the first operation.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

/// A captured graph on one device generation. Cheap to clone; the graph (and the
/// buffers it uses) is freed when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct GraphRef {
    pub(crate) id: u64,
    pub(crate) device_id: usize,
    pub(crate) generation: u64,
    operations: usize,
    /// Held, never read: the graph actor keeps a weak reference, and a dead token frees
    /// the graph.
    pub(crate) _token: Arc<()>,
}

impl GraphRef {
    /// The number of operations captured.
    pub fn operations(&self) -> usize {
        self.operations
    }

    /// The device generation it was captured in.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}
