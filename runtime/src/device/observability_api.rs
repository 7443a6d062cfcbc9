//! The metrics part of the `Device` client (see `crate::observability`).

use super::Device;
use crate::error::GpuError;
use crate::observability::{histogram_of, Metrics};

impl Device {
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
