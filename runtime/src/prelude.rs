//! The names most programs need, in one `use`.

pub use crate::actor::{
    Actor, ActorRef, ActorSystem, Context, Directive, Failure, Props, Reply, StopMode, SupervisorStrategy, Terminated,
};
pub use crate::dispatcher::{Dispatcher, GpuDispatcher};
pub use crate::error::GpuError;
