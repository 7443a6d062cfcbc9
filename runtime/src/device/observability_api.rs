//! The metrics part of the `Device` client (see `crate::observability`).

use super::route::Inner;
use super::Device;
use crate::error::GpuError;
use crate::observability::{enable_device, histogram_of, take_device_timeline, Metrics, RemoteTimeline, TimelineEvent};

impl Device {
    /// Times this device's operations (kernel and module launches, GEMMs and matmuls,
    /// level-1 BLAS, solvers, FFTs, RNG fills, graph replays, copies) from now on, or
    /// stops — this device alone (by its ordinal: 0–63), where
    /// `observability::enable_timeline` times every device of the process; an isolated
    /// device's worker is told too (and each worker that replaces it).
    pub fn enable_timeline(&self, on: bool) -> Result<(), GpuError> {
        enable_device(self.shared.config.device_id, on)?;
        self.with_route(|r| {
            if let Some(Inner::Worker(link)) = r {
                link.set_enabled(on);
            }
        });
        Ok(())
    }

    /// This device's timed operations so far (and clears them; other devices' stay for
    /// their own take), in order of their start, on the process's timeline clock —
    /// an isolated device's worker's included. Waits for GPU work still running (off the
    /// caller's task).
    pub async fn take_timeline(&self) -> Result<Vec<TimelineEvent>, GpuError> {
        let device = self.shared.config.device_id;
        tokio::task::spawn_blocking(move || take_device_timeline(device))
            .await
            .map_err(|e| GpuError::Internal(format!("timeline task failed: {e}")))
    }

    /// A snapshot of the device: generation, requests in flight (its queue depth), free
    /// and total memory, and the latency histogram of the operations timed while the
    /// timeline was on (`observability::enable_timeline`).
    pub async fn metrics(&self) -> Result<Metrics, GpuError> {
        let (memory_free, memory_total) = self.memory().await?;
        let device = self.shared.config.device_id;
        // Resolving timed operations may wait for GPU work still running.
        let latency = tokio::task::spawn_blocking(move || histogram_of(device))
            .await
            .map_err(|e| GpuError::Internal(format!("metrics task failed: {e}")))?;
        Ok(Metrics {
            generation: self.state().generation,
            in_flight: self.in_flight(),
            memory_free,
            memory_total,
            latency,
        })
    }
}
