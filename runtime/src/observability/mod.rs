//! `observability`: what a running device did, for people and tools.
//!
//! - **Spans**: every message an actor handles runs in a `tracing` span `message` with
//!   the actor's path and the message's name (`gemm<f32>`, `launch`, …); install any
//!   `tracing` subscriber to see them (field `handler`).
//! - **Timeline**: with [`enable_timeline`], GPU operations (kernel and module launches,
//!   GEMMs and matmuls, level-1 BLAS, solver calls, FFTs, RNG fills, graph replays, host
//!   ↔ device copies) are bracketed by CUDA events on their stream, and CPU-device
//!   operations timed on the host; isolated devices' workers time theirs too and hand
//!   them over on the machine's monotonic clock; [`take_timeline`] returns them all and
//!   [`chrome_trace_json`] writes the Chrome / Perfetto trace format (open it in
//!   `chrome://tracing` or ui.perfetto.dev): one process per device, one track per actor.
//! - **Metrics**: `Device::metrics` — requests in flight (the queue depth placement uses),
//!   device memory, generation, and a latency histogram of the timed operations.
//! - **Export**: with `DeviceConfig::metrics`, each device reports requests in flight,
//!   generation, readiness, loss, rebuilds and request latency through the `metrics`
//!   facade, to whatever recorder the program installed (a Prometheus exporter, …).
//! - **Plots**: [`svg_latency_plot`] draws latency distributions as an SVG (the benches
//!   use it for BENCHMARKS.md).
//! - **GPU interrupts**: [`gpu_interrupts`] counts the interrupts the GPU driver took,
//!   which hold a CPU for tens of microseconds in a virtual machine; the runtime's paths
//!   raise none, and the benches report the count next to their timings.
//!
//! Timing costs two event records per operation while the timeline is on, nothing when
//! it is off (the default).

mod export;
mod histogram;
mod interrupts;
mod nvtx;
mod svg;
mod timeline;

pub(crate) use export::DeviceMetrics;
pub use histogram::LatencyHistogram;
pub use interrupts::gpu_interrupts;
pub use svg::svg_latency_plot;
pub use timeline::{chrome_trace_json, enable_timeline, take_timeline, timeline_enabled, TimelineEvent};
pub(crate) use timeline::{cpu_op, gpu_timed, histogram_of};
pub(crate) use timeline::{decode_events, encode_events, register_remote, take_timeline_monotonic, RemoteTimeline};
pub(crate) use timeline::{enable_device, take_device_timeline};

/// A snapshot of one device's state and activity.
#[derive(Debug, Clone)]
pub struct Metrics {
    /// The context generation (bumped by every rebuild).
    pub generation: u64,
    /// Requests sent and not yet answered: the device's queue depth.
    pub in_flight: usize,
    /// Free device memory in bytes (the CPU device's budget on the CPU).
    pub memory_free: u64,
    /// Total device memory in bytes.
    pub memory_total: u64,
    /// GPU (or, on the CPU device, host) time of the operations timed while the timeline
    /// was on.
    pub latency: LatencyHistogram,
}
