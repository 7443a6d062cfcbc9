//! `WorkerActor`: the inner tier of an isolated device as seen from the user process —
//! it owns the worker process, and fails (to be restarted by the `DeviceActor`'s
//! supervision) when the worker dies. Written with `#[gpu_actor]`.

use std::sync::Arc;

use atomr_accel_cuda_macros::gpu_actor;

use super::link::{LinkShared, OnDeath};
use super::standby::Standby;
use crate::actor::{Context, Failure};
use crate::backend::state::{DeviceShared, RouteSlot, Status};
use crate::device::route::Inner;
use crate::error::GpuError;

/// Owns one worker process at a time; each (re)start spawns a new one in a new
/// generation.
pub struct WorkerActor {
    shared: Arc<DeviceShared>,
    link: Option<Arc<LinkShared>>,
    generation: u64,
    /// The device's warm standby worker (outlives this actor's restarts).
    standby: Arc<Standby>,
}

impl WorkerActor {
    pub(crate) fn new(shared: Arc<DeviceShared>, standby: Arc<Standby>) -> Self {
        WorkerActor {
            shared,
            link: None,
            generation: 0,
            standby,
        }
    }

    /// The worker serving `generation` is gone: tell this actor (which fails, so the
    /// supervisor replaces the worker).
    ///
    /// The notice cannot be lost: with the mailbox full it waits for room (on the
    /// runtime that made the worker); only a stopped actor — whose supervisor is already
    /// replacing it — does not get it.
    fn on_death(ctx: &Context<Self>, generation: u64) -> OnDeath {
        let me = ctx.self_ref().clone();
        let runtime = tokio::runtime::Handle::try_current().ok();
        Box::new(move |error: GpuError| {
            if let Err(full) = me.try_tell(WorkerActorMsg::Died { generation, error }) {
                if matches!(full.error, GpuError::MailboxFull(_)) {
                    match &runtime {
                        Some(rt) => {
                            rt.spawn(async move { me.send(full.msg).await });
                        }
                        None => {
                            tracing::error!("an isolated worker's death notice found the mailbox full and no runtime")
                        }
                    }
                }
            }
        })
    }

    /// The warm standby, promoted to serve `generation`, if one is ready and alive.
    fn promote(
        &self,
        ctx: &Context<Self>,
        generation: u64,
    ) -> Option<(Arc<LinkShared>, crate::backend::state::DeviceInfo)> {
        let (link, info) = self.standby.take()?;
        match link.start_serving(generation, Self::on_death(ctx, generation)) {
            Ok(()) => Some((link, info)),
            Err(e) => {
                tracing::warn!(device = self.shared.config.device_id, error = %e, "the standby worker died before its promotion");
                None
            }
        }
    }

    /// Ends the current worker (if any); its pending requests fail with `why`.
    fn end_worker(&mut self, why: GpuError) {
        if let Some(link) = self.link.take() {
            link.shutdown(why);
        }
        self.shared.publish(|s| {
            s.status = Status::Starting;
            s.inner = None;
        });
    }
}

#[gpu_actor(crate = crate)]
impl WorkerActor {
    /// Promotes the warm standby, or spawns a worker and waits for its device to open;
    /// publishes it, then starts the next standby in the background.
    #[pre_start]
    async fn start(&mut self, ctx: &mut Context<Self>) -> Result<(), GpuError> {
        let generation = self.shared.next_generation();
        self.generation = generation;
        let t0 = std::time::Instant::now();
        let (link, info, how) = match self.promote(ctx, generation) {
            Some((link, info)) => (link, info, "standby promoted"),
            None => {
                let (link, info) = LinkShared::spawn(&self.shared, Self::on_death(ctx, generation)).await?;
                link.start_serving(generation, Self::on_death(ctx, generation))?;
                (link, info, "worker spawned")
            }
        };
        tracing::info!(
            device = self.shared.config.device_id,
            generation,
            pid = link.pid(),
            name = %info.name,
            ms = t0.elapsed().as_secs_f64() * 1e3,
            how,
            "isolated device ready"
        );
        self.link = Some(link.clone());
        self.shared.publish(|s| {
            s.generation = generation;
            s.status = Status::Ready;
            s.info = Some(info);
            s.inner = Some(RouteSlot::new(Inner::Worker(link)));
        });
        self.standby.refill();
        Ok(())
    }

    /// Ends the old worker before a new one starts.
    #[pre_restart]
    async fn restarting(&mut self, _ctx: &mut Context<Self>, failure: &Failure) -> Result<(), GpuError> {
        tracing::warn!(device = self.shared.config.device_id, %failure, "respawning the worker");
        self.end_worker(GpuError::DeviceLost(format!("the worker is being replaced: {failure}")));
        Ok(())
    }

    /// Ends the worker, and the standby, with the device.
    #[post_stop]
    async fn stopped(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.standby.close();
        self.end_worker(GpuError::DeviceLost("the device was stopped".into()));
        Ok(())
    }

    /// The worker of `generation` is gone: fail, so the supervisor respawns it (a
    /// report from an older worker is ignored).
    #[handler(tell)]
    async fn died(&mut self, generation: u64, error: GpuError) -> Result<(), GpuError> {
        if generation != self.generation {
            return Ok(());
        }
        // Replies the worker still sends (its in-flight requests' own errors) reach
        // their askers; whatever is left after a grace period fails.
        if let Some(link) = self.link.take() {
            let why = error.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_secs(2));
                link.shutdown(GpuError::DeviceLost(format!("the worker was replaced after: {why}")));
            });
        }
        self.shared.publish(|s| {
            s.status = Status::Starting;
            s.inner = None;
        });
        Err(error)
    }
}
