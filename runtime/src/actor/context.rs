//! `Context`: what a running actor can do besides handling its message.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{mpsc, watch};

use super::actor_ref::{ActorRef, Control};
use super::actor_trait::Actor;
use super::cell::{run_cell, Cell, ParentLink};
use super::children::{ChildRecord, Children};
use super::failure::Failure;
use super::path::ActorPath;
use super::props::{DispatcherChoice, Props};
use super::system::ActorSystem;
use super::system_msg::SystemMsg;
use super::terminated::Terminated;
use crate::dispatcher::{Dispatcher, GpuDispatcher};
use crate::error::GpuError;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The actor's view of itself and its place in the tree, passed to every handler and
/// hook: its own address and path, its children, watching, and the system.
pub struct Context<A: Actor> {
    pub(crate) path: ActorPath,
    pub(crate) self_ref: ActorRef<A::Msg>,
    pub(crate) self_sys: mpsc::UnboundedSender<SystemMsg>,
    pub(crate) system: ActorSystem,
    pub(crate) dispatcher: Dispatcher,
    pub(crate) children: Children,
}

impl<A: Actor> Context<A> {
    /// This actor's own address (to hand to others, or to send itself messages).
    pub fn self_ref(&self) -> &ActorRef<A::Msg> {
        &self.self_ref
    }

    /// This actor's path.
    pub fn path(&self) -> &ActorPath {
        &self.path
    }

    /// The system this actor belongs to.
    pub fn system(&self) -> &ActorSystem {
        &self.system
    }

    /// The dispatcher this actor runs on.
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    /// Spawns a child called `name`, supervised by this actor's child strategy.
    /// `NameTaken` if a live child already has that name.
    pub fn spawn_child<C: Actor>(&mut self, props: Props<C>, name: &str) -> Result<ActorRef<C::Msg>, GpuError> {
        validate_name(name)?;
        if self.children.map.contains_key(name) {
            return Err(GpuError::NameTaken(self.path.child(name).to_string()));
        }
        let parent = ParentLink {
            sys: self.self_sys.clone(),
        };
        let (r, record) = spawn_cell(&self.system, parent, &self.path, &self.dispatcher, props, name)?;
        self.children.map.insert(name.to_string(), record);
        Ok(r)
    }

    /// The live child called `name`, if its message type is `M`.
    pub fn child<M: Send + 'static>(&self, name: &str) -> Option<ActorRef<M>> {
        self.children
            .map
            .get(name)?
            .typed
            .downcast_ref::<ActorRef<M>>()
            .cloned()
    }

    /// Names of the live children.
    pub fn child_names(&self) -> Vec<String> {
        self.children.map.keys().cloned().collect()
    }

    /// Stops the child called `name` and waits until it has stopped; its name is free
    /// again afterwards. `None` if there is no such child.
    pub async fn stop_child(&mut self, name: &str) -> Option<Terminated> {
        let record = self.children.map.get(name)?;
        let (id, control) = (record.id, record.control.clone());
        control.stop(Default::default());
        let t = control.terminated().await;
        self.children.remove(name, id);
        Some(t)
    }

    /// Restarts the child called `name` as if its supervisor had decided so after a
    /// failure (its `pre_restart` runs, its children stop, a fresh instance starts).
    /// False if there is no such child. For deliberate rebuilds — a device context, say.
    pub fn restart_child(&self, name: &str) -> bool {
        let Some(record) = self.children.map.get(name) else {
            return false;
        };
        let why = Failure::Error(GpuError::Other(format!(
            "restart of {} requested by its parent",
            record.control.path
        )));
        record.control.sys.send(SystemMsg::RestartBySibling(why)).is_ok()
    }

    /// Watches `target`: once it stops, `on_terminated(notice)` is delivered to this
    /// actor as a message. Works for a target that is already dead.
    pub fn watch<M: Send + 'static>(
        &self,
        target: &ActorRef<M>,
        on_terminated: impl FnOnce(Terminated) -> A::Msg + Send + 'static,
    ) {
        let me = self.self_ref.clone();
        let done = target.terminated();
        self.dispatcher.spawn(async move {
            let t = done.await;
            // A watcher that stopped meanwhile gets a dead letter, counted by `send`.
            let _ = me.send(on_terminated(t)).await;
        });
    }
}

/// Actor names become path segments: keep them non-empty and free of `/`.
pub(crate) fn validate_name(name: &str) -> Result<(), GpuError> {
    if name.is_empty() || name.contains('/') {
        return Err(GpuError::invalid(format!(
            "actor name {name:?} must be non-empty and must not contain '/'"
        )));
    }
    Ok(())
}

/// Builds the channels, address and cell of a new actor and starts it on its dispatcher.
pub(crate) fn spawn_cell<C: Actor>(
    system: &ActorSystem,
    parent: ParentLink,
    parent_path: &ActorPath,
    parent_dispatcher: &Dispatcher,
    props: Props<C>,
    name: &str,
) -> Result<(ActorRef<C::Msg>, ChildRecord), GpuError> {
    let path = parent_path.child(name);
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let (tx, mailbox) = mpsc::channel(props.mailbox_capacity);
    let (sys_tx, sys_rx) = mpsc::unbounded_channel();
    let (terminated_tx, terminated_rx) = watch::channel(None);
    let control = Control {
        path: path.clone(),
        sys: sys_tx.clone(),
        terminated: terminated_rx,
    };
    let r = ActorRef::new(
        tx,
        control.clone(),
        system.dead_letters().clone(),
        system.deadlines().clone(),
    );
    let dispatcher = match &props.dispatcher {
        DispatcherChoice::Shared => system.shared_dispatcher(),
        DispatcherChoice::On(d) => d.clone(),
        DispatcherChoice::Parent => parent_dispatcher.clone(),
        DispatcherChoice::DedicatedThread => GpuDispatcher::new(&path.to_string())?.into(),
    };
    let ctx = Context {
        path,
        self_ref: r.clone(),
        self_sys: sys_tx,
        system: system.clone(),
        dispatcher: dispatcher.clone(),
        children: Children::new(props.child_strategy.clone()),
    };
    let props_spec = props.own_strategy.clone();
    let cell = Cell::new(props, ctx, mailbox, sys_rx, parent, name.to_string(), id, terminated_tx);
    dispatcher.spawn(run_cell(cell));
    let record = ChildRecord::new(id, control, Box::new(r.clone()), props_spec);
    Ok((r, record))
}
