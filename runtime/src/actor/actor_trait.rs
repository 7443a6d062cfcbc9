//! The `Actor` trait: a message handler with lifecycle hooks.

use std::future::Future;

use super::context::Context;
use super::failure::Failure;
use crate::error::GpuError;

/// An actor: state plus a handler for messages of type [`Actor::Msg`], run one message
/// at a time.
///
/// Every method may fail by returning an error *or* by panicking; either way the failure
/// goes to the actor's parent, whose decider resumes, restarts, stops or escalates. The
/// hooks are supervised exactly like `handle`.
///
/// Write the methods as `async fn`; the futures must be `Send` because actors may run on
/// the shared work-stealing runtime.
pub trait Actor: Send + Sized + 'static {
    /// The messages this actor accepts.
    type Msg: Send + 'static;

    /// The message's name in traces (`#[gpu_actor]` gives the handler and dtype).
    fn message_name(_msg: &Self::Msg) -> &'static str {
        std::any::type_name::<Self::Msg>()
    }

    /// Handles one message.
    fn handle(&mut self, ctx: &mut Context<Self>, msg: Self::Msg) -> impl Future<Output = Result<(), GpuError>> + Send;

    /// Runs once before the first message of each instance (after a restart too, through
    /// the default [`post_restart`](Self::post_restart)). Spawn children here.
    fn pre_start(&mut self, _ctx: &mut Context<Self>) -> impl Future<Output = Result<(), GpuError>> + Send {
        async { Ok(()) }
    }

    /// Runs once after the actor stopped handling messages and its children stopped.
    fn post_stop(&mut self, _ctx: &mut Context<Self>) -> impl Future<Output = Result<(), GpuError>> + Send {
        async { Ok(()) }
    }

    /// Runs on the failed instance before it is dropped for a restart.
    fn pre_restart(
        &mut self,
        _ctx: &mut Context<Self>,
        _failure: &Failure,
    ) -> impl Future<Output = Result<(), GpuError>> + Send {
        async { Ok(()) }
    }

    /// Runs on the fresh instance after a restart; by default calls
    /// [`pre_start`](Self::pre_start).
    fn post_restart(
        &mut self,
        ctx: &mut Context<Self>,
        _failure: &Failure,
    ) -> impl Future<Output = Result<(), GpuError>> + Send {
        self.pre_start(ctx)
    }
}
