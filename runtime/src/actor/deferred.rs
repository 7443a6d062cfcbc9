//! `Deferred<T>`: a handler result that is ready now or completes later.

use std::future::Future;

use futures::future::BoxFuture;
use futures::FutureExt;
use tracing::Instrument;

use super::{Context, Reply};
use crate::error::GpuError;

/// What a handler produces when its work may still be running on the GPU: the value now,
/// or a future that yields it.
///
/// `#[gpu_actor]` replies at once to `Now`, and spawns `Later` on the actor's own
/// dispatcher, replying when it resolves — so the actor goes on to its next message while
/// the GPU works.
pub enum Deferred<T> {
    /// Ready.
    Now(T),
    /// Completes later (a GPU completion, usually).
    Later(BoxFuture<'static, Result<T, GpuError>>),
}

impl<T: Send + 'static> Deferred<T> {
    /// Wraps a future.
    pub fn later(fut: impl Future<Output = Result<T, GpuError>> + Send + 'static) -> Self {
        Deferred::Later(fut.boxed())
    }

    /// Maps the eventual value.
    pub fn map<U: Send + 'static>(self, f: impl FnOnce(T) -> U + Send + 'static) -> Deferred<U> {
        match self {
            Deferred::Now(v) => Deferred::Now(f(v)),
            Deferred::Later(fut) => Deferred::later(async move { fut.await.map(f) }),
        }
    }

    /// Waits for the value.
    pub async fn resolve(self) -> Result<T, GpuError> {
        match self {
            Deferred::Now(v) => Ok(v),
            Deferred::Later(fut) => fut.await,
        }
    }
}

/// What `#[gpu_actor]` does with a `Deferred::Later`: replies with the future's result
/// from a task on the actor's own dispatcher, so the actor takes its next message
/// meanwhile. The task runs in a `tracing` span `completion` (the actor's path), so a
/// trace shows each message's GPU wait next to its `message` span.
#[doc(hidden)]
pub fn reply_when_done<A: super::Actor, T: Send + 'static>(
    ctx: &Context<A>,
    reply: Reply<Result<T, GpuError>>,
    fut: BoxFuture<'static, Result<T, GpuError>>,
) {
    let span = tracing::debug_span!("completion", actor = %ctx.path());
    ctx.dispatcher().spawn(
        async move {
            reply.send(fut.await);
        }
        .instrument(span),
    );
}

impl<T> std::fmt::Debug for Deferred<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Deferred::Now(_) => "Deferred::Now",
            Deferred::Later(_) => "Deferred::Later",
        })
    }
}
