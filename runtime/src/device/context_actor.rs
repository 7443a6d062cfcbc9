//! `ContextActor`: the inner, restartable tier. Owns the context (or the CPU device) for
//! one generation and the library actors made in it.

use std::sync::Arc;

use super::core::ContextCore;
use super::job::{run_job, Job};
use super::state::{DeviceShared, InnerRefs, Status};
use crate::actor::{Actor, Context, Failure, Props};
use crate::dispatcher::GpuDispatcher;
use crate::error::GpuError;
use crate::kernel::blas::{BlasActor, BlasSeed};

pub(crate) struct ContextActor {
    shared: Arc<DeviceShared>,
    core: Option<ContextCore>,
}

impl ContextActor {
    pub(crate) fn new(shared: Arc<DeviceShared>) -> Self {
        ContextActor { shared, core: None }
    }
}

impl Actor for ContextActor {
    type Msg = Job<ContextCore>;

    /// Builds the context, bumps the generation, starts the library actors and
    /// publishes the device as ready.
    async fn pre_start(&mut self, ctx: &mut Context<Self>) -> Result<(), GpuError> {
        if let Some(d) = self.shared.config.start_delay {
            tokio::time::sleep(d).await;
        }
        let core = ContextCore::build(self.shared.clone()).map_err(|e| self.shared.observe(e))?;
        let blas = if self.shared.config.libraries.blas {
            let seed = BlasSeed::from_engine(self.shared.clone(), core.generation, &core.engine);
            let thread = GpuDispatcher::new(&format!("blas-{}", self.shared.config.device_id))?;
            let props = Props::new(move || BlasActor::new(seed.clone()))
                .dispatcher(thread)
                .mailbox(self.shared.config.mailbox_capacity);
            Some(ctx.spawn_child(props, "blas")?)
        } else {
            None
        };
        let (generation, info) = (core.generation, core.info.clone());
        tracing::info!(device = self.shared.config.device_id, generation, name = %info.name, "device ready");
        let me = ctx.self_ref().clone();
        self.shared.publish(|s| {
            s.generation = generation;
            s.status = Status::Ready;
            s.info = Some(info);
            s.inner = Some(InnerRefs { ctx: me, blas });
        });
        self.core = Some(core);
        Ok(())
    }

    async fn pre_restart(&mut self, _ctx: &mut Context<Self>, failure: &Failure) -> Result<(), GpuError> {
        tracing::warn!(device = self.shared.config.device_id, %failure, "rebuilding the context");
        self.shared.publish(|s| {
            s.status = Status::Starting;
            s.inner = None;
        });
        Ok(())
    }

    async fn handle(&mut self, ctx: &mut Context<Self>, job: Job<ContextCore>) -> Result<(), GpuError> {
        run_job(ctx, &self.shared, self.core.as_mut(), job);
        if let Some(e) = self.shared.lost() {
            // Report the poisoning to the supervisor (the device tier stops us).
            return Err(e);
        }
        if self.core.as_ref().is_some_and(|c| c.rebuild_requested) {
            return Err(GpuError::Other("context rebuild requested".into()));
        }
        Ok(())
    }
}
