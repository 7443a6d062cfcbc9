//! `GraphActor`: captures graphs on a stream of its own and replays them. Written with
//! `#[gpu_actor]`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use atomr_accel_cuda_macros::gpu_actor;
use cudarc::driver::{CudaContext, CudaStream};

use super::blas_handles::BlasHandles;
use super::op::{Capture, GraphNode};
use super::{GraphBuilder, GraphRef};
use crate::actor::{Context, Deferred};
use crate::backend::state::DeviceShared;
use crate::completion::Completer;
use crate::error::GpuError;
use crate::launch::{order_on, KernelArgs};
use crate::library::seed::LibrarySeed;
use crate::library::shell::{Core, Library};
use crate::observability::{cpu_op, gpu_timed};
use crate::sys::graph::GraphExec;

static NEXT_GRAPH: AtomicU64 = AtomicU64::new(1);

/// The GPU side: a stream nobody else enqueues on (a capture must see only its own
/// work), the BLAS handles its GEMM and matmul nodes capture with, and the completer.
struct CudaEngine {
    stream: Arc<CudaStream>,
    blas: BlasHandles,
    completer: Completer,
}

/// One captured graph.
struct Stored {
    token: Weak<()>,
    nodes: Vec<Box<dyn GraphNode>>,
    exec: Option<GraphExec>,
}

impl Stored {
    fn args(&self) -> Vec<&KernelArgs> {
        self.nodes.iter().map(|n| n.args()).collect()
    }
}

/// What the CUDA engine is built from, on a GPU.
struct CudaParts {
    ctx: Arc<CudaContext>,
    completer: Completer,
}

/// The graphs of one generation.
pub(crate) struct GraphCore {
    shared: Arc<DeviceShared>,
    generation: u64,
    parts: Option<CudaParts>,
    /// Built at the first capture: a device that never uses graphs pays no stream,
    /// handle or workspace for them.
    cuda: Option<CudaEngine>,
    graphs: HashMap<u64, Stored>,
}

impl Core for GraphCore {
    const WHAT: &'static str = "graph actor";

    fn build(seed: &LibrarySeed) -> Result<Self, GpuError> {
        let parts = match (&seed.cuda, seed.cuda_stream()?) {
            (Some(c), Some((_, completer))) => Some(CudaParts {
                ctx: c.ctx.clone(),
                completer,
            }),
            _ => None,
        };
        Ok(GraphCore {
            shared: seed.shared.clone(),
            generation: seed.generation,
            parts,
            cuda: None,
            graphs: HashMap::new(),
        })
    }
}

impl CudaParts {
    fn engine(&self) -> Result<CudaEngine, GpuError> {
        let stream = crate::sys::graph::new_stream(&self.ctx)?;
        Ok(CudaEngine {
            blas: BlasHandles::new(&stream)?,
            stream,
            completer: self.completer.clone(),
        })
    }
}

impl GraphCore {
    /// Frees the graphs whose last `GraphRef` is gone.
    fn collect(&mut self) {
        self.graphs.retain(|_, g| g.token.strong_count() > 0);
    }

    fn validate(&self, nodes: &[Box<dyn GraphNode>]) -> Result<(), GpuError> {
        for (i, n) in nodes.iter().enumerate() {
            n.check()
                .and_then(|_| n.args().validate(self.shared.config.device_id, self.generation))
                .map_err(|e| match e {
                    GpuError::InvalidArgument(m) => GpuError::invalid(format!("graph operation {i}: {m}")),
                    other => other,
                })?;
        }
        Ok(())
    }

    fn capture(&mut self, builder: GraphBuilder) -> Result<GraphRef, GpuError> {
        self.collect();
        let nodes = builder.nodes;
        if nodes.is_empty() {
            return Err(GpuError::invalid("a graph needs at least one operation"));
        }
        self.validate(&nodes)?;
        if let (Some(p), None) = (&self.parts, &self.cuda) {
            self.cuda = Some(p.engine().map_err(|e| self.shared.observe(e))?);
        }
        let exec = match &self.cuda {
            None => None,
            Some(c) => Some(capture_on(c, &nodes).map_err(|e| self.shared.observe(e))?),
        };
        let token = Arc::new(());
        let g = GraphRef {
            id: NEXT_GRAPH.fetch_add(1, Ordering::Relaxed),
            device_id: self.shared.config.device_id,
            generation: self.generation,
            operations: nodes.len(),
            _token: token.clone(),
            remote: None,
        };
        self.graphs.insert(
            g.id,
            Stored {
                token: Arc::downgrade(&token),
                nodes,
                exec,
            },
        );
        Ok(g)
    }

    fn replay(&mut self, g: &GraphRef, times: u32) -> Result<Deferred<()>, GpuError> {
        let device_id = self.shared.config.device_id;
        if g.device_id != device_id {
            return Err(GpuError::invalid(format!(
                "graph of device {} replayed on device {device_id}",
                g.device_id
            )));
        }
        if g.generation != self.generation {
            return Err(GpuError::Stale {
                buffer_generation: g.generation,
                device_generation: self.generation,
            });
        }
        if times == 0 {
            return Err(GpuError::InvalidArgument(
                crate::error::Invalid::new("replay at least once (times = 0)")
                    .arg("times")
                    .mismatch("≥ 1", 0),
            ));
        }
        let stored = self
            .graphs
            .get(&g.id)
            .ok_or_else(|| GpuError::invalid(format!("graph #{} is not on this device", g.id)))?;
        self.validate(&stored.nodes)?;
        match (&self.cuda, &stored.exec) {
            (None, _) => {
                let _timed = cpu_op(self.shared.config.device_id, "graph", format!("replay x{times}"));
                for _ in 0..times {
                    for n in &stored.nodes {
                        n.run_cpu()?;
                    }
                }
                Ok(Deferred::Now(()))
            }
            (Some(c), Some(exec)) => {
                let args = stored.args();
                let r = (|| {
                    // After every buffer's last writer; then recorded as used after the
                    // last replay, so later users on other streams wait for it.
                    order_on(&args, &c.stream)?;
                    let device = self.shared.config.device_id;
                    gpu_timed(&c.stream, device, "graph", format!("replay x{times}"), || {
                        (0..times).try_for_each(|_| exec.launch())
                    })?;
                    order_on(&args, &c.stream).map(|_| ())
                })();
                r.map_err(|e| self.shared.observe(e))?;
                Ok(self.shared.deferred(c.completer.done(&c.stream)))
            }
            (Some(_), None) => Err(GpuError::Internal("graph captured without an executable".into())),
        }
    }
}

/// Captures `nodes` into an instantiated graph on the engine's stream.
fn capture_on(c: &CudaEngine, nodes: &[Box<dyn GraphNode>]) -> Result<GraphExec, GpuError> {
    for n in nodes {
        n.prepare(&c.stream)?;
    }
    if nodes.iter().any(|n| n.uses_matmul()) {
        c.blas.ready_for_matmul(&c.stream)?;
    }
    let args: Vec<&KernelArgs> = nodes.iter().map(|n| n.args()).collect();
    let addresses = order_on(&args, &c.stream)?;
    let cx = Capture {
        stream: &c.stream,
        blas: &c.blas,
        addresses: &addresses,
    };
    crate::sys::graph::capture(&c.stream, || nodes.iter().try_for_each(|n| n.capture(&cx)))
}

/// The graph actor of a device.
pub struct GraphActor(pub(crate) Library<GraphCore>);

#[gpu_actor(crate = crate, wire)]
impl GraphActor {
    /// Prepares the generation's graph state (the CUDA side is built at first capture).
    #[pre_start]
    async fn start(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.0.start()
    }

    /// Checks and captures the builder's operations.
    #[handler]
    fn capture(&mut self, builder: GraphBuilder) -> Result<GraphRef, GpuError> {
        self.0.core()?.capture(builder)
    }

    /// Replays a graph `times` times back to back; resolves when the last has finished.
    #[handler]
    fn replay(&mut self, graph: GraphRef, times: u32) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.replay(&graph, times)
    }
}
