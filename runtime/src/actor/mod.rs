//! The actor core: a small, strict actor layer on tokio.
//!
//! Bounded mailboxes with explicit back-pressure, asks with deadlines that fail promptly
//! when the actor fails, parent-decided supervision (one-for-one, all-for-one, restart
//! budgets, escalation), death watch, dead letters, and dispatchers that pin an actor to
//! one OS thread. See DESIGN.md, "The actor core", for why it is our own.

mod actor_ref;
mod actor_trait;
mod cell;
mod children;
mod context;
mod dead_letters;
pub(crate) mod deadline;
mod deferred;
mod failure;
mod path;
mod props;
mod supervision;
mod system;
mod system_msg;
mod terminated;

pub use actor_ref::{ActorRef, Rejected, Reply};
pub use actor_trait::Actor;
pub use context::Context;
pub use dead_letters::{DeadLetter, DeadLetterReason, DeadLetters};
pub use deferred::{reply_when_done, Deferred};
pub use failure::Failure;
pub use path::ActorPath;
pub use props::{DispatcherChoice, Props, DEFAULT_MAILBOX};
pub use supervision::{
    default_decider, Decider, Directive, Exhausted, RestartBudget, StrategyKind, SupervisorStrategy,
};
pub use system::ActorSystem;
pub use terminated::{StopMode, StopReason, Terminated};
