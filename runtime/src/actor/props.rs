//! `Props`: how to build, house and supervise an actor.

use std::sync::Arc;

use super::actor_trait::Actor;
use super::supervision::SupervisorStrategy;
use crate::dispatcher::Dispatcher;

/// Which dispatcher an actor runs on.
#[derive(Clone, Debug, Default)]
pub enum DispatcherChoice {
    /// The system's shared runtime.
    #[default]
    Shared,
    /// This dispatcher (usually a `GpuDispatcher`).
    On(Dispatcher),
    /// The same dispatcher as the parent (for children of an actor pinned to a GPU thread).
    Parent,
    /// A new dedicated thread (a `GpuDispatcher` named after the actor), kept across
    /// restarts and ended with the actor.
    DedicatedThread,
}

/// The recipe for an actor: a factory (called again on every restart, on the actor's own
/// dispatcher), its mailbox capacity, its dispatcher, and the strategy it applies to *its*
/// children.
pub struct Props<A: Actor> {
    pub(crate) factory: Arc<dyn Fn() -> A + Send + Sync>,
    pub(crate) mailbox_capacity: usize,
    pub(crate) dispatcher: DispatcherChoice,
    pub(crate) child_strategy: SupervisorStrategy,
    /// How this actor asks its parent to supervise it (the parent applies it; without
    /// it the parent's own strategy decides).
    pub(crate) own_strategy: Option<SupervisorStrategy>,
}

impl<A: Actor> Clone for Props<A> {
    fn clone(&self) -> Self {
        Props {
            factory: self.factory.clone(),
            mailbox_capacity: self.mailbox_capacity,
            dispatcher: self.dispatcher.clone(),
            child_strategy: self.child_strategy.clone(),
            own_strategy: self.own_strategy.clone(),
        }
    }
}

/// The default mailbox capacity.
pub const DEFAULT_MAILBOX: usize = 1024;

impl<A: Actor> Props<A> {
    /// Props building each instance with `factory`.
    pub fn new(factory: impl Fn() -> A + Send + Sync + 'static) -> Self {
        Props {
            factory: Arc::new(factory),
            mailbox_capacity: DEFAULT_MAILBOX,
            dispatcher: DispatcherChoice::Shared,
            child_strategy: SupervisorStrategy::default(),
            own_strategy: None,
        }
    }

    /// Sets the bounded mailbox's capacity (at least 1).
    pub fn mailbox(mut self, capacity: usize) -> Self {
        self.mailbox_capacity = capacity.max(1);
        self
    }

    /// Runs the actor on `dispatcher`.
    pub fn dispatcher(mut self, dispatcher: impl Into<Dispatcher>) -> Self {
        self.dispatcher = DispatcherChoice::On(dispatcher.into());
        self
    }

    /// Runs the actor on its parent's dispatcher.
    pub fn on_parent_dispatcher(mut self) -> Self {
        self.dispatcher = DispatcherChoice::Parent;
        self
    }

    /// Runs the actor on a new thread of its own (see [`DispatcherChoice::DedicatedThread`]).
    pub fn dedicated_thread(mut self) -> Self {
        self.dispatcher = DispatcherChoice::DedicatedThread;
        self
    }

    /// The strategy this actor's parent applies to it — a child spec, like an Erlang
    /// supervisor's: the decider and restart budget travel with the actor, the parent
    /// still makes (and may escalate) every decision.
    pub fn supervised_by(mut self, strategy: SupervisorStrategy) -> Self {
        self.own_strategy = Some(strategy);
        self
    }

    /// The strategy this actor applies to its children.
    pub fn supervise_children(mut self, strategy: SupervisorStrategy) -> Self {
        self.child_strategy = strategy;
        self
    }
}
