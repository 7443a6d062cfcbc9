//! `graph`: record a sequence of device operations once — GEMMs, cuBLASLt matmuls, `#[kernel]` launches,
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

mod blas_handles;
mod graph_actor;
mod matmul_node;
mod node;
mod op;
mod raw;

use std::sync::Arc;

pub use graph_actor::{GraphActor, GraphActorMsg, GraphActorRef};

use crate::dtype::{BlasBase, DTypeBase};
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;
use crate::kernel::dsl::KernelCall;
use crate::library::blas::matmul::{Epilogue, Matmul, MatmulBuffer};
use crate::library::blas::{Batch, Gemm};
use crate::wire::{put_remote_object, Reader, RemoteObject, Side, Wire, Writer};
use matmul_node::MatmulNode;
use node::{CopyNode, GemmNode, KernelNode};
use op::GraphNode;

/// The operations of a graph, in order. Nothing is checked until
/// `Device::capture_graph`, which reports the first bad operation with its index.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// let a = dev.upload(vec![1.0f32; 4]).await?;
/// let c = dev.alloc::<f32>(4).await?;
/// let graph = dev.capture_graph(GraphBuilder::new().gemm(Gemm::new(2, 2, 2), &a, &a, &c)).await?;
/// dev.replay(&graph, 3).await?; // one request, three runs of the captured work
/// assert_eq!(dev.download(&c).await?, vec![2.0; 4]);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
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

    /// Adds a cuBLASLt matmul (as `Device::matmul`: `C = act(alpha·op(A)·op(B) + beta·C
    /// + bias)`, element types mixed as it allows).
    pub fn matmul(
        mut self,
        op: Matmul,
        epilogue: Epilogue,
        a: impl Into<MatmulBuffer>,
        b: impl Into<MatmulBuffer>,
        c: impl Into<MatmulBuffer>,
    ) -> Self {
        self.nodes
            .push(Box::new(MatmulNode::new(op, epilogue, a.into(), b.into(), c.into())));
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
/// buffers it uses) is freed when the last clone is dropped — in an isolated device's
/// worker too.
#[derive(Debug, Clone)]
pub struct GraphRef {
    pub(crate) id: u64,
    pub(crate) device_id: usize,
    pub(crate) generation: u64,
    operations: usize,
    /// Held, never read: the graph actor keeps a weak reference, and a dead token frees
    /// the graph.
    pub(crate) _token: Arc<()>,
    /// An isolated device's graph: the worker holds it while this handle lives.
    pub(crate) remote: Option<Arc<RemoteObject>>,
}

/// A builder crosses to an isolated device's worker operation by operation (buffers as
/// the worker's, kernels by registered name). Graphs are not journalled: a replay
/// stops at a capture with `Unsupported`.
impl Wire for GraphBuilder {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        if let Side::Journal(_) = w.side {
            return Err(GpuError::Unsupported("CUDA graphs are not journalled".into()));
        }
        self.nodes.len().put(w)?;
        self.nodes.iter().try_for_each(|n| n.put_wire(w))
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        let n = usize::take(r)?;
        let nodes = (0..n).map(|_| node::take_node(r)).collect::<Result<_, _>>()?;
        Ok(GraphBuilder { nodes })
    }
}

/// A graph crosses as the worker's number for it (and its operation count).
impl Wire for GraphRef {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        match w.side {
            Side::Client(c) => {
                let what = format_args!("graph #{}", self.id);
                put_remote_object(
                    w,
                    c,
                    (self.remote.as_deref(), self.generation),
                    &what,
                    Box::new(self.clone()),
                )?;
            }
            Side::Worker(wc) => {
                wc.export_graph(self.id, self);
                w.put_u64(self.id);
            }
            Side::Journal(_) => return Err(GpuError::Unsupported("CUDA graphs are not journalled".into())),
        }
        self.operations.put(w)
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        let id = r.take_u64()?;
        let operations = usize::take(r)?;
        match r.side {
            Side::Worker(wc) => wc.lookup_graph(id),
            Side::Client(c) => Ok(GraphRef {
                id,
                device_id: c.device_id,
                generation: c.generation(),
                operations,
                _token: Arc::new(()),
                remote: Some(Arc::new(RemoteObject::new(c, id, |link, id| link.free_graph(id)))),
            }),
            Side::Journal(_) => Err(GpuError::Unsupported("CUDA graphs are not journalled".into())),
        }
    }
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
