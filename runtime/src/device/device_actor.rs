//! `DeviceActor`: the outer, stable tier. Supervises the `ContextActor`, holds requests
//! while it (re)starts, and marks the device lost when it is gone for good.

use std::collections::VecDeque;
use std::sync::Arc;

use super::context_actor::ContextActor;
use super::core::ContextCore;
use super::job::Job;
use super::state::{DeviceShared, Status};
use crate::actor::{Actor, Context, Directive, Props, Reply, StopReason, SupervisorStrategy, Terminated};
use crate::dispatcher::GpuDispatcher;
use crate::error::GpuError;
use crate::kernel::blas::BlasCore;

/// A request addressed to one of the inner actors.
pub(crate) enum Routed {
    Ctx(Job<ContextCore>),
    Blas(Job<BlasCore>),
}

/// A core whose jobs the device knows how to route.
pub(crate) trait Routable: Sized + 'static {
    /// Wraps a job for this core.
    fn route(job: Job<Self>) -> Routed;
}

impl Routable for ContextCore {
    fn route(job: Job<Self>) -> Routed {
        Routed::Ctx(job)
    }
}

impl Routable for BlasCore {
    fn route(job: Job<Self>) -> Routed {
        Routed::Blas(job)
    }
}

impl Routed {
    fn fail(self, e: GpuError) {
        // Running a job on an error answers its asker with that error.
        match self {
            Routed::Ctx(j) => drop(j.run(Err(e))),
            Routed::Blas(j) => drop(j.run(Err(e))),
        }
    }
}

pub(crate) enum DeviceMsg {
    /// Deliver now if the inner tier is ready, else queue.
    Submit(Routed, Reply<Result<(), GpuError>>),
    /// The published state changed.
    StateChanged,
    /// The inner tier stopped for good.
    InnerTerminated(Terminated),
}

pub(crate) struct DeviceActor {
    shared: Arc<DeviceShared>,
    queue: VecDeque<Routed>,
}

impl DeviceActor {
    pub(crate) fn new(shared: Arc<DeviceShared>) -> Self {
        DeviceActor {
            shared,
            queue: VecDeque::new(),
        }
    }

    /// The inner tier's supervision: a sticky fault stops it (in-process mode cannot
    /// recover; the device is lost), anything else rebuilds it, at most 5 times a minute.
    pub(crate) fn inner_strategy() -> SupervisorStrategy {
        SupervisorStrategy::one_for_one()
            .with_decider(|f| match f.gpu_error() {
                Some(e) if e.is_sticky() => Directive::Stop,
                _ => Directive::Restart,
            })
            .with_budget(5, std::time::Duration::from_secs(60), crate::actor::Exhausted::Stop)
    }

    async fn deliver(&mut self, routed: Routed) {
        let inner = self.shared.state.borrow().inner.clone();
        match (self.shared.lost(), inner) {
            (Some(e), _) => routed.fail(GpuError::DeviceLost(e.to_string())),
            (None, Some(inner)) => match routed {
                Routed::Ctx(j) => {
                    // A failed send drops the job, which answers its asker (NoReply).
                    let _ = inner.ctx.send(j).await;
                }
                Routed::Blas(j) => match inner.blas {
                    Some(b) => {
                        let _ = b.send(j).await;
                    }
                    None => drop(j.run(Err(GpuError::Unsupported(
                        "BLAS is disabled in this DeviceConfig".into(),
                    )))),
                },
            },
            (None, None) => self.queue.push_back(routed),
        }
    }

    async fn flush(&mut self) {
        let ready = matches!(self.shared.state.borrow().status, Status::Ready | Status::Lost(_));
        if ready {
            while let Some(r) = self.queue.pop_front() {
                self.deliver(r).await;
            }
        }
    }
}

impl Actor for DeviceActor {
    type Msg = DeviceMsg;

    async fn pre_start(&mut self, ctx: &mut Context<Self>) -> Result<(), GpuError> {
        // The context actor gets a GPU thread of its own, kept across its restarts.
        let thread = GpuDispatcher::new(&format!("cuda-ctx-{}", self.shared.config.device_id))?;
        let shared = self.shared.clone();
        let props = Props::new(move || ContextActor::new(shared.clone()))
            .dispatcher(thread)
            .mailbox(self.shared.config.mailbox_capacity)
            .supervise_children(SupervisorStrategy::one_for_one());
        let inner = ctx.spawn_child(props, "context")?;
        ctx.watch(&inner, DeviceMsg::InnerTerminated);
        let mut rx = self.shared.state.subscribe();
        let me = ctx.self_ref().clone();
        ctx.dispatcher().spawn(async move {
            while rx.changed().await.is_ok() {
                if me.send(DeviceMsg::StateChanged).await.is_err() {
                    return;
                }
            }
        });
        Ok(())
    }

    async fn handle(&mut self, _ctx: &mut Context<Self>, msg: DeviceMsg) -> Result<(), GpuError> {
        match msg {
            DeviceMsg::Submit(routed, ack) => {
                let starting = self.shared.state.borrow().inner.is_none() && self.shared.lost().is_none();
                if starting && self.queue.len() >= self.shared.config.queue_capacity {
                    let e = GpuError::Backpressure {
                        capacity: self.shared.config.queue_capacity,
                    };
                    routed.fail(e.clone());
                    ack.send(Err(e));
                } else {
                    self.deliver(routed).await;
                    ack.send(Ok(()));
                }
            }
            DeviceMsg::StateChanged => self.flush().await,
            DeviceMsg::InnerTerminated(t) => {
                let why = match t.reason {
                    StopReason::Failed(f) => f.gpu_error().unwrap_or_else(|| GpuError::DeviceLost(f.to_string())),
                    StopReason::Requested => GpuError::DeviceLost("the device was stopped".into()),
                };
                self.shared.mark_lost(why);
                self.flush().await;
            }
        }
        Ok(())
    }

    async fn post_stop(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.shared
            .mark_lost(GpuError::DeviceLost("the device was stopped".into()));
        while let Some(r) = self.queue.pop_front() {
            r.fail(GpuError::DeviceLost("the device was stopped".into()));
        }
        Ok(())
    }
}
