//! `DeviceActor`: the outer, stable tier. Supervises the `ContextActor`, holds requests
//! while it (re)starts, and marks the device lost when it is gone for good. Written with
//! `#[gpu_actor]`.

use std::collections::VecDeque;
use std::sync::Arc;

use atomr_accel_cuda_macros::gpu_actor;

use super::context_actor::ContextActor;
use super::route::Routed;
use crate::actor::{Context, Directive, StopReason, SupervisorStrategy, Terminated};
use crate::backend::state::{DeviceShared, Status};
use crate::dispatcher::GpuDispatcher;
use crate::error::GpuError;
#[cfg(isolation)]
use crate::isolation::standby::Standby;
#[cfg(isolation)]
use crate::isolation::worker_actor::WorkerActor;

/// The outer tier of one device.
pub struct DeviceActor {
    shared: Arc<DeviceShared>,
    /// Requests (and their origins) waiting for the inner tier.
    queue: VecDeque<(Routed, u64)>,
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
    /// An isolated device's worker is respawned after anything, sticky faults included,
    /// within its restart budget.
    pub(crate) fn inner_strategy(config: &super::DeviceConfig) -> SupervisorStrategy {
        if let Some(iso) = &config.isolation {
            return SupervisorStrategy::one_for_one()
                // A worker program that cannot serve (no #[gpu_main]) will not do better
                // on a restart.
                .with_decider(|f| match f.gpu_error() {
                    Some(GpuError::Unsupported(_)) => Directive::Stop,
                    _ => Directive::Restart,
                })
                .with_budget(iso.max_restarts, iso.restart_window, crate::actor::Exhausted::Stop);
        }
        SupervisorStrategy::one_for_one()
            .with_decider(|f| match f.gpu_error() {
                Some(e) if e.is_sticky() => Directive::Stop,
                _ => Directive::Restart,
            })
            .with_budget(5, std::time::Duration::from_secs(60), crate::actor::Exhausted::Stop)
    }

    /// Turns every change of the published state into a `StateChanged` message (which
    /// delivers what waited for the inner tier).
    fn watch_state(&self, ctx: &mut Context<Self>) {
        let mut rx = self.shared.state.subscribe();
        let me = ctx.self_ref().clone();
        ctx.dispatcher().spawn(async move {
            while rx.changed().await.is_ok() {
                if me.send(DeviceActorMsg::StateChanged {}).await.is_err() {
                    return;
                }
            }
        });
    }

    async fn deliver(&mut self, routed: Routed, origin: u64) {
        let inner = self.shared.state.borrow().inner.clone();
        match (self.shared.lost(), inner) {
            (Some(e), _) => routed.fail(GpuError::lost(self.shared.config.device_id, &e)),
            (None, Some(inner)) => {
                let _ = routed.send_to(inner.get(), origin).await;
            }
            (None, None) => self.queue.push_back((routed, origin)),
        }
    }

    async fn flush(&mut self) {
        let ready = matches!(self.shared.state.borrow().status, Status::Ready | Status::Lost(_));
        if ready {
            while let Some((r, origin)) = self.queue.pop_front() {
                self.deliver(r, origin).await;
            }
        }
    }
}

#[gpu_actor(crate = crate)]
impl DeviceActor {
    /// Starts the inner tier on a GPU thread of its own (kept across its restarts) and
    /// watches the published state.
    #[pre_start]
    async fn start(&mut self, ctx: &mut Context<Self>) -> Result<(), GpuError> {
        // `Device::start` refused an isolated config in a build without isolated devices.
        #[cfg(isolation)]
        if self.shared.config.isolation.is_some() {
            let shared = self.shared.clone();
            let standby = Standby::new(shared.clone(), tokio::runtime::Handle::current());
            let props = WorkerActor::gpu_props(move || WorkerActor::new(shared.clone(), standby.clone()))
                .mailbox(self.shared.config.mailbox_capacity);
            let inner = ctx.spawn_child(props, "context")?;
            ctx.watch(&inner, |terminated| DeviceActorMsg::InnerTerminated { terminated });
            self.watch_state(ctx);
            return Ok(());
        }
        let thread = GpuDispatcher::new(&format!("cuda-ctx-{}", self.shared.config.device_id))?;
        let shared = self.shared.clone();
        let props = ContextActor::gpu_props(move || ContextActor::new(shared.clone()))
            .dispatcher(thread)
            .mailbox(self.shared.config.mailbox_capacity);
        let inner = ctx.spawn_child(props, "context")?;
        ctx.watch(&inner, |terminated| DeviceActorMsg::InnerTerminated { terminated });
        self.watch_state(ctx);
        Ok(())
    }

    /// Fails queued requests once the device stops.
    #[post_stop]
    async fn stopped(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.shared
            .mark_lost(GpuError::DeviceLost("the device was stopped".into()));
        while let Some((r, _)) = self.queue.pop_front() {
            r.fail(GpuError::DeviceLost("the device was stopped".into()));
        }
        Ok(())
    }
    /// Delivers a request (from `origin`: `device::origin`) now if the inner tier is ready,
    /// else queues it (`Backpressure` when the queue is full).
    #[handler]
    async fn submit(&mut self, routed: Routed, origin: u64) -> Result<(), GpuError> {
        let starting = self.shared.state.borrow().inner.is_none() && self.shared.lost().is_none();
        if starting && self.queue.len() >= self.shared.config.queue_capacity {
            let e = GpuError::Backpressure {
                capacity: self.shared.config.queue_capacity,
            };
            routed.fail(e.clone());
            return Err(e);
        }
        self.deliver(routed, origin).await;
        Ok(())
    }

    /// The published state changed: deliver what waited for the inner tier.
    #[handler(tell)]
    async fn state_changed(&mut self) {
        self.flush().await;
    }

    /// The inner tier stopped for good: the device is lost.
    #[handler(tell)]
    async fn inner_terminated(&mut self, terminated: Terminated) {
        let why = match terminated.reason {
            StopReason::Failed(f)
                if self.shared.config.isolation.is_some()
                    && !matches!(f.gpu_error(), Some(GpuError::Unsupported(_))) =>
            {
                let iso = self.shared.config.isolation.as_ref().expect("checked");
                GpuError::DeviceLost(format!(
                    "the worker of device {} failed more than {} times within {:?}; giving up (last failure: {f})",
                    self.shared.config.device_id, iso.max_restarts, iso.restart_window
                ))
            }
            StopReason::Failed(f) => f.gpu_error().unwrap_or_else(|| GpuError::DeviceLost(f.to_string())),
            StopReason::Requested => GpuError::DeviceLost("the device was stopped".into()),
        };
        self.shared.mark_lost(why);
        self.flush().await;
    }

    /// Rebuilds the inner tier (a new generation).
    #[handler]
    async fn rebuild(&mut self, ctx: &mut Context<Self>) -> Result<(), GpuError> {
        if ctx.restart_child("context") {
            Ok(())
        } else {
            Err(GpuError::DeviceLost("the device has no inner tier to rebuild".into()))
        }
    }
}
