//! Stream strategies: which CUDA stream each of a device's actors enqueues on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

use crate::completion::Completer;
use crate::error::GpuError;
use crate::sys::graph::new_stream;

/// A stream of a device's context outside its actors, with a completer waiting on it:
/// what a world's NCCL communicator of the device enqueues on (a collective's kernels
/// wait for peers, so they get a stream no library actor queues behind). Buffers order
/// themselves with it through cudarc's events like with any other stream. Opaque: only
/// the runtime makes and uses one.
pub struct Lane {
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) completer: Completer,
    /// The device generation it belongs to: a rebuild makes it (and its communicator)
    /// obsolete.
    pub(crate) generation: u64,
}

/// A stream lives in its process: an isolated device's stays in its worker.
impl crate::wire::Wire for Lane {
    fn put(&self, _: &mut crate::wire::Writer<'_>) -> Result<(), GpuError> {
        Err(lane_unsupported())
    }
    fn take(_: &mut crate::wire::Reader<'_>) -> Result<Self, GpuError> {
        Err(lane_unsupported())
    }
}

fn lane_unsupported() -> GpuError {
    GpuError::Unsupported("a CUDA stream of an isolated device (it lives in the worker process)".into())
}

/// How a device hands streams to its actors.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// use atomr_accel_cuda_runtime::StreamStrategy;
/// // Every library actor on one stream: work is serialised, no cross-stream events.
/// let dev = Device::open(&system, DeviceConfig { streams: StreamStrategy::Single, ..DeviceConfig::cpu() }).await?;
/// assert_eq!(dev.config().streams, StreamStrategy::Single);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum StreamStrategy {
    /// Each actor gets a stream of its own: independent actors overlap on the GPU.
    #[default]
    PerActor,
    /// Actors take streams round-robin from a pool of this many.
    Pool(usize),
    /// Every actor shares one stream: everything is serialised, nothing needs events.
    Single,
}

/// Hands out streams of one context according to a [`StreamStrategy`].
pub(crate) struct StreamSource {
    ctx: Arc<CudaContext>,
    strategy: StreamStrategy,
    shared: Vec<Arc<CudaStream>>,
    next: AtomicUsize,
}

impl StreamSource {
    pub(crate) fn new(ctx: Arc<CudaContext>, strategy: StreamStrategy) -> Result<Self, GpuError> {
        let shared = match strategy {
            StreamStrategy::PerActor => vec![],
            StreamStrategy::Single => vec![new_stream(&ctx)?],
            StreamStrategy::Pool(n) => {
                if n == 0 {
                    return Err(GpuError::invalid("a stream pool needs at least one stream"));
                }
                (0..n).map(|_| new_stream(&ctx)).collect::<Result<_, _>>()?
            }
        };
        Ok(StreamSource {
            ctx,
            strategy,
            shared,
            next: AtomicUsize::new(0),
        })
    }

    /// A stream for one more actor.
    pub(crate) fn take(&self) -> Result<Arc<CudaStream>, GpuError> {
        match self.strategy {
            StreamStrategy::PerActor => new_stream(&self.ctx),
            _ => {
                let i = self.next.fetch_add(1, Ordering::Relaxed) % self.shared.len();
                Ok(self.shared[i].clone())
            }
        }
    }
}
