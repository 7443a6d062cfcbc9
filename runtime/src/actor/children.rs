//! The parent's side of supervision: its children and the decisions about them.

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::time::Instant;

use super::actor_ref::Control;
use super::failure::Failure;
use super::supervision::RestartWindow;
use super::supervision::{Directive, Exhausted, StrategyKind, SupervisorStrategy};
use super::system_msg::SystemMsg;
use super::terminated::{StopMode, Terminated};

/// One live child.
pub(crate) struct ChildRecord {
    /// Unique per spawn, so a late notice about a stopped child never touches a newer
    /// child of the same name.
    pub(crate) id: u64,
    pub(crate) control: Control,
    /// The typed `ActorRef<M>`, for `Context::child::<M>(name)`.
    pub(crate) typed: Box<dyn Any + Send + Sync>,
    restarts: RestartWindow,
    /// The child is suspended behind a failure this parent escalated.
    escalated: bool,
    /// The child's own spec (`Props::supervised_by`), applied instead of the parent's.
    spec: Option<SupervisorStrategy>,
}

impl ChildRecord {
    pub(crate) fn new(
        id: u64,
        control: Control,
        typed: Box<dyn Any + Send + Sync>,
        spec: Option<SupervisorStrategy>,
    ) -> Self {
        ChildRecord {
            id,
            control,
            typed,
            restarts: RestartWindow::default(),
            escalated: false,
            spec,
        }
    }

    fn send(&self, msg: SystemMsg) {
        let _ = self.control.sys.send(msg);
    }
}

/// The children of one parent (an actor, or the system's guardian) and the strategy
/// applied to them.
pub(crate) struct Children {
    pub(crate) strategy: SupervisorStrategy,
    pub(crate) map: HashMap<String, ChildRecord>,
}

impl Children {
    pub(crate) fn new(strategy: SupervisorStrategy) -> Self {
        Children {
            strategy,
            map: HashMap::new(),
        }
    }

    /// Forgets a child that has stopped (only if `id` is the current holder of `name`).
    pub(crate) fn remove(&mut self, name: &str, id: u64) {
        if self.map.get(name).is_some_and(|c| c.id == id) {
            self.map.remove(name);
        }
    }

    /// Decides about a failed child. Returns the failure to escalate, if the decision (or
    /// an exhausted budget) says so; the parent then fails with it.
    pub(crate) fn on_child_failed(
        &mut self,
        name: &str,
        id: u64,
        failure: Failure,
        awaits_directive: bool,
    ) -> Option<Failure> {
        let record = self.map.get_mut(name).filter(|c| c.id == id)?;
        // The child's own spec decides and budgets; the parent's kind (one-for-one or
        // all-for-one) says whom the decision touches.
        let kind = self.strategy.kind;
        let strategy = record.spec.clone().unwrap_or_else(|| self.strategy.clone());
        let mut directive = strategy.decide(&failure);
        if directive == Directive::Restart && !record.restarts.try_restart(&strategy.budget, Instant::now()) {
            tracing::warn!(child = %record.control.path, "restart budget spent");
            directive = match strategy.budget.then {
                Exhausted::Stop => Directive::Stop,
                Exhausted::Escalate => Directive::Escalate,
            };
        }
        tracing::debug!(child = %record.control.path, ?directive, %failure, "child failed");
        let escalate = || Failure::Escalated {
            child: record.control.path.clone(),
            cause: Box::new(failure.clone()),
        };
        if !awaits_directive {
            return (directive == Directive::Escalate).then(escalate);
        }
        match directive {
            Directive::Resume => record.send(SystemMsg::Supervise(Directive::Resume)),
            Directive::Escalate => {
                record.escalated = true;
                return Some(escalate());
            }
            Directive::Restart | Directive::Stop => {
                record.send(SystemMsg::Supervise(directive));
                if kind == StrategyKind::AllForOne {
                    for (other, rec) in &self.map {
                        if other != name {
                            rec.send(if directive == Directive::Restart {
                                SystemMsg::RestartBySibling(failure.clone())
                            } else {
                                SystemMsg::Stop(StopMode::DeadLetter)
                            });
                        }
                    }
                }
            }
        }
        None
    }

    /// After this parent was resumed over an escalated failure, its suspended children
    /// resume too.
    pub(crate) fn resume_escalated(&mut self) {
        for rec in self.map.values_mut().filter(|r| r.escalated) {
            rec.escalated = false;
            rec.send(SystemMsg::Supervise(Directive::Resume));
        }
    }

    /// Stops every child; the returned future resolves once all have stopped. The names
    /// are released at once, so re-created children cannot clash with them.
    pub(crate) fn stop_all(&mut self) -> impl Future<Output = Vec<Terminated>> + Send + 'static {
        let waits: Vec<_> = self
            .map
            .drain()
            .map(|(_, rec)| {
                rec.control.stop(StopMode::DeadLetter);
                rec.control.terminated()
            })
            .collect();
        futures::future::join_all(waits)
    }
}
