//! Jobs: requests that carry their own typed reply, run by the actor that owns a core.
//!
//! A job is built by the typed client (`Device::upload::<T>`, `Blas::gemm::<T>`), so the
//! actor needs no per-dtype message variants: it hands its core to the closure, which
//! validates, enqueues and replies. Work that completes later returns a future that the
//! actor spawns on its own thread, so the actor keeps enqueueing while the GPU works.
//! A job that cannot run (the device is lost or stopping) is called with the error and
//! answers its asker with it: no request is dropped silently.

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::oneshot;

use crate::actor::Reply;
use crate::error::GpuError;

/// What an op produced: a value now, or a future (GPU completion) that yields it.
pub(crate) enum Flow<R> {
    Ready(R),
    Pending(BoxFuture<'static, Result<R, GpuError>>),
}

type JobFn<C> = dyn FnOnce(Result<&mut C, GpuError>) -> Option<BoxFuture<'static, ()>> + Send;

/// A request for the actor owning a core of type `C`.
pub struct Job<C>(Box<JobFn<C>>);

impl<C> Job<C> {
    /// Runs the job against the core (or fails it with the error).
    pub(crate) fn run(self, core: Result<&mut C, GpuError>) -> Option<BoxFuture<'static, ()>> {
        (self.0)(core)
    }
}

/// Builds a job from an op and returns the receiver of its reply.
pub(crate) fn make_job<C: 'static, R: Send + 'static>(
    op: impl FnOnce(&mut C) -> Result<Flow<R>, GpuError> + Send + 'static,
) -> (Job<C>, oneshot::Receiver<Result<R, GpuError>>) {
    let (reply, rx) = Reply::pair();
    let job = Job(Box::new(move |core: Result<&mut C, GpuError>| {
        match core.and_then(op) {
            Ok(Flow::Ready(v)) => {
                reply.send(Ok(v));
                None
            }
            Ok(Flow::Pending(fut)) => Some(
                async move {
                    reply.send(fut.await);
                }
                .boxed(),
            ),
            Err(e) => {
                reply.send(Err(e));
                None
            }
        }
    }));
    (job, rx)
}

/// Runs `job` in the actor that owns `core`: a lost device or a core that never started
/// fails the job with the reason; pending completions are spawned on the actor's own
/// dispatcher so the actor goes on to the next request.
pub(crate) fn run_job<A: crate::actor::Actor, C>(
    ctx: &crate::actor::Context<A>,
    shared: &super::state::DeviceShared,
    core: Option<&mut C>,
    job: Job<C>,
) {
    let input = match (shared.lost(), core) {
        (Some(e), _) => Err(GpuError::DeviceLost(format!(
            "device {} is lost: {e}",
            shared.config.device_id
        ))),
        (None, Some(c)) => Ok(c),
        (None, None) => Err(GpuError::DeviceLost("the actor's core failed to start".into())),
    };
    if let Some(fut) = job.run(input) {
        ctx.dispatcher().spawn(fut);
    }
}
