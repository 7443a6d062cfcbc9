//! `ActorSystem`: the root of the tree, its guardian and its dead-letter office.

use std::sync::{Arc, Mutex};

use tokio::runtime::Handle;
use tokio::sync::mpsc;

use super::actor_ref::ActorRef;
use super::actor_trait::Actor;
use super::cell::ParentLink;
use super::children::Children;
use super::context::{spawn_cell, validate_name};
use super::dead_letters::DeadLetters;
use super::deadline::Deadlines;
use super::path::ActorPath;
use super::props::Props;
use super::supervision::SupervisorStrategy;
use super::system_msg::SystemMsg;
use super::terminated::Terminated;
use crate::dispatcher::Dispatcher;
use crate::error::GpuError;

struct SystemInner {
    name: String,
    handle: Handle,
    dead_letters: DeadLetters,
    deadlines: Deadlines,
    root: ActorPath,
    /// The guardian's children: the top-level actors. Shared with the guardian task,
    /// which supervises them.
    top: Arc<Mutex<Children>>,
    guardian: mpsc::UnboundedSender<SystemMsg>,
}

/// A tree of actors on one tokio runtime. Cheap to clone.
///
/// Top-level actors are supervised by the system's guardian with the strategy given at
/// construction; a failure escalated to the guardian stops that top-level actor.
#[derive(Clone)]
pub struct ActorSystem {
    inner: Arc<SystemInner>,
}

impl std::fmt::Debug for ActorSystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ActorSystem({})", self.inner.name)
    }
}

impl ActorSystem {
    /// A system whose top-level actors are supervised one-for-one with the default
    /// decider. Must be called inside a tokio runtime (it becomes the shared dispatcher).
    pub fn new(name: &str) -> ActorSystem {
        Self::with_guardian_strategy(name, SupervisorStrategy::default())
    }

    /// A system whose guardian supervises top-level actors with `strategy`.
    pub fn with_guardian_strategy(name: &str, strategy: SupervisorStrategy) -> ActorSystem {
        crate::process_role::refuse_unentered_worker();
        let handle = Handle::current();
        let top = Arc::new(Mutex::new(Children::new(strategy)));
        let (guardian, rx) = mpsc::unbounded_channel();
        handle.spawn(run_guardian(top.clone(), rx));
        ActorSystem {
            inner: Arc::new(SystemInner {
                name: name.to_string(),
                handle: handle.clone(),
                dead_letters: DeadLetters::default(),
                deadlines: Deadlines::start(&handle),
                root: ActorPath::user_root(),
                top,
                guardian,
            }),
        }
    }

    /// The system's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The dead-letter office: an exact count and observers.
    pub fn dead_letters(&self) -> &DeadLetters {
        &self.inner.dead_letters
    }

    pub(crate) fn deadlines(&self) -> &Deadlines {
        &self.inner.deadlines
    }

    pub(crate) fn shared_dispatcher(&self) -> Dispatcher {
        Dispatcher::Shared(self.inner.handle.clone())
    }

    /// Spawns a top-level actor `/user/<name>`. `NameTaken` if one is alive under that
    /// name.
    pub fn spawn<A: Actor>(&self, props: Props<A>, name: &str) -> Result<ActorRef<A::Msg>, GpuError> {
        validate_name(name)?;
        let mut top = self.inner.top.lock().unwrap_or_else(|p| p.into_inner());
        if top.map.contains_key(name) {
            return Err(GpuError::NameTaken(self.inner.root.child(name).to_string()));
        }
        let parent = ParentLink {
            sys: self.inner.guardian.clone(),
        };
        let (r, record) = spawn_cell(self, parent, &self.inner.root, &self.shared_dispatcher(), props, name)?;
        top.map.insert(name.to_string(), record);
        Ok(r)
    }

    /// The live top-level actor called `name`, if its message type is `M`.
    pub fn lookup<M: Send + 'static>(&self, name: &str) -> Option<ActorRef<M>> {
        let top = self.inner.top.lock().unwrap_or_else(|p| p.into_inner());
        top.map.get(name)?.typed.downcast_ref::<ActorRef<M>>().cloned()
    }

    /// Stops every top-level actor (and so every actor) and waits until all have stopped.
    pub async fn shutdown(&self) -> Vec<Terminated> {
        let all = self.inner.top.lock().unwrap_or_else(|p| p.into_inner()).stop_all();
        all.await
    }
}

/// The guardian: supervises top-level actors. Escalation stops there: an escalated
/// failure stops the top-level actor (and is logged).
async fn run_guardian(top: Arc<Mutex<Children>>, mut rx: mpsc::UnboundedReceiver<SystemMsg>) {
    while let Some(msg) = rx.recv().await {
        let mut top = top.lock().unwrap_or_else(|p| p.into_inner());
        match msg {
            SystemMsg::ChildFailed {
                name,
                id,
                failure,
                awaits_directive,
            } => {
                if let Some(escalated) = top.on_child_failed(&name, id, failure, awaits_directive) {
                    tracing::error!(%escalated, "failure escalated to the guardian: stopping the top-level actor");
                    if let Some(rec) = top.map.get(&name).filter(|r| r.id == id) {
                        let _ = rec
                            .control
                            .sys
                            .send(SystemMsg::Supervise(super::supervision::Directive::Stop));
                    }
                }
            }
            SystemMsg::ChildTerminated { name, id } => top.remove(&name, id),
            _ => {}
        }
    }
}
