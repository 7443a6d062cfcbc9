//! Metrics a monitoring system scrapes, through the `metrics` facade: each device
//! reports its requests in flight, generation, readiness and loss, how often its inner
//! tier was rebuilt (a worker replaced after a fault included), and the latency of every
//! request (ask → reply). Off by default (`DeviceConfig::metrics`); with it on, the
//! values go to whatever recorder the program installed — `metrics-exporter-prometheus`
//! for a Prometheus endpoint, an OpenTelemetry bridge, … — before it opened the device
//! (without one they go nowhere). Labels: `device` (the ordinal), `backend` (as
//! configured: `cuda`, `cpu`, `auto`) and `isolated` (`true` for a device whose inner
//! tier runs in a worker process).
//!
//! Why a facade rather than an exporter: the runtime does not choose the program's
//! monitoring stack or open ports; the handles are registered once per device, so the
//! request path pays an atomic update, nothing when metrics are off.

use metrics::{Counter, Gauge, Histogram};

/// One device's metric handles (no-ops when the device's metrics are off).
pub(crate) struct DeviceMetrics {
    /// `atomr_requests_in_flight`: requests sent and not yet answered.
    pub(crate) in_flight: Gauge,
    /// `atomr_device_generation`: the inner tier's generation.
    pub(crate) generation: Gauge,
    /// `atomr_device_ready`: 1 while the device serves, 0 while it starts or restarts.
    pub(crate) ready: Gauge,
    /// `atomr_device_lost`: 1 once the device is lost for good.
    pub(crate) lost: Gauge,
    /// `atomr_device_rebuilds_total`: inner tiers built after the first (a context
    /// rebuilt, a worker replaced).
    pub(crate) rebuilds: Counter,
    /// `atomr_request_duration_seconds`: each request from ask to reply.
    pub(crate) request_seconds: Histogram,
    /// Whether requests are timed at all.
    pub(crate) on: bool,
}

impl DeviceMetrics {
    /// The handles of device `device` on `backend` (`isolated` or not), registered with
    /// the installed recorder when `on`.
    pub(crate) fn new(on: bool, device: usize, backend: &'static str, isolated: bool) -> Self {
        if !on {
            return DeviceMetrics {
                in_flight: Gauge::noop(),
                generation: Gauge::noop(),
                ready: Gauge::noop(),
                lost: Gauge::noop(),
                rebuilds: Counter::noop(),
                request_seconds: Histogram::noop(),
                on,
            };
        }
        let labels = [
            ("device", device.to_string()),
            ("backend", backend.to_string()),
            ("isolated", isolated.to_string()),
        ];
        DeviceMetrics {
            in_flight: metrics::gauge!("atomr_requests_in_flight", &labels),
            generation: metrics::gauge!("atomr_device_generation", &labels),
            ready: metrics::gauge!("atomr_device_ready", &labels),
            lost: metrics::gauge!("atomr_device_lost", &labels),
            rebuilds: metrics::counter!("atomr_device_rebuilds_total", &labels),
            request_seconds: metrics::histogram!("atomr_request_duration_seconds", &labels),
            on,
        }
    }
}
