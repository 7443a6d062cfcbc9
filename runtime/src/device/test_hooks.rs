//! [`TestHooks`]: what tests and fault drills do to a device that a program does not —
//! rebuild its inner tier on demand, kill an isolated device's worker. Kept out of
//! `Device`'s own methods (and out of the prelude): a test imports the trait.

use std::future::Future;

use super::context_actor::ContextActorMsg;
use super::device_actor::DeviceActorMsg;
use super::route::Inner;
use super::{Device, Status};
use crate::error::GpuError;

/// Fault injection and forced rebuilds, for tests and drills.
pub trait TestHooks {
    /// Makes the inner tier fail and be rebuilt by its supervisor (a new generation:
    /// every older `GpuRef` becomes `Stale`). Resolves with the new generation once it
    /// is ready.
    fn rebuild(&self) -> impl Future<Output = Result<u64, GpuError>> + Send;

    /// Kills an isolated device's worker process (`SIGKILL`), as a crash would; the
    /// device respawns it. `Unsupported` for an in-process device.
    fn kill_worker(&self) -> Result<(), GpuError>;

    /// Makes the device behave as if its stream reported the sticky CUDA error `code`
    /// (700 illegal address, 719 launch failure, …): on the CPU device and the GPU alike,
    /// in-process (the device is lost) or isolated (the worker reports the fault and is
    /// replaced). Resolves with the injected error.
    fn inject_fault(&self, code: i32) -> impl Future<Output = GpuError> + Send;
}

impl TestHooks for Device {
    async fn inject_fault(&self, code: i32) -> GpuError {
        match self.call(|reply| ContextActorMsg::InjectFault { code, reply }).await {
            Err(e) => e,
            Ok(()) => GpuError::Internal("an injected fault was answered with success".into()),
        }
    }

    /// Makes the inner tier fail and be rebuilt by its supervisor (a new
    /// generation: every older `GpuRef` becomes `Stale`). Resolves once the new
    /// generation is ready.
    async fn rebuild(&self) -> Result<u64, GpuError> {
        let before = self.state().generation;
        let timeout = self.shared.config.request_timeout;
        self.outer
            .ask_try(|reply| DeviceActorMsg::Rebuild { reply }, timeout)
            .await?;
        let s = self
            .wait_state(|s| s.generation > before && matches!(s.status, Status::Ready))
            .await?;
        Ok(s.generation)
    }

    /// Kills an isolated device's worker process (`SIGKILL`), as a crash
    /// would; the device respawns it. `Unsupported` for an in-process device.
    fn kill_worker(&self) -> Result<(), GpuError> {
        self.with_route(|r| match r {
            Some(Inner::Worker(link)) => link.kill(),
            Some(Inner::Local(_)) => Err(GpuError::Unsupported("kill_worker on an in-process device".into())),
            None => Err(GpuError::Unsupported(
                "kill_worker while the device is not ready".into(),
            )),
        })
    }
}
