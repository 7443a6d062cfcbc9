//! Writes a Chrome / Perfetto trace of a small workload: GEMMs, a `#[kernel]`, a
//! Cholesky factorization and a graph replay, timed on the device (CUDA events on a GPU,
//! host time on the CPU device). Open the file in `chrome://tracing` or ui.perfetto.dev.
//!
//! `cargo run --release --example trace [out.json]` (default `trace.json`).

use atomr_accel_cuda::kernel;
use atomr_accel_cuda::observability::{chrome_trace_json, enable_timeline, take_timeline};
use atomr_accel_cuda::prelude::*;

/// y = max(y, 0).
#[kernel]
pub fn relu<T: Float>(y: &mut [T]) {
    let i = global_index();
    if i < y.len() {
        y[i] = y[i].max(T::zero());
    }
}

#[tokio::main]
async fn main() -> Result<(), GpuError> {
    let out = std::env::args().nth(1).unwrap_or_else(|| "trace.json".into());
    enable_timeline(true);
    let system = ActorSystem::new("trace");
    let device = Device::open(&system, DeviceConfig::auto()).await?;
    let info = device.ready().await?;
    println!("device: {} ({:?})", info.name, info.backend);

    let n = 512;
    let a = device.upload(vec![0.5f32; n * n]).await?;
    let b = device.upload(vec![-0.25f32; n * n]).await?;
    let mut c = device.alloc::<f32>(n * n).await?;
    for _ in 0..4 {
        device.gemm(Gemm::<f32>::new(n, n, n), &a, &b, &c).await?;
        relu::launch::<f32>(&device, LaunchConfig::for_elements(n * n, 256), &mut c).await?;
    }
    let spd: Vec<f64> = (0..64 * 64).map(|i| if i % 65 == 0 { 64.0 } else { 0.5 }).collect();
    let s = device.upload(spd).await?;
    device.cholesky(&s, 64).await?;
    let g = device
        .capture_graph(GraphBuilder::new().gemm(Gemm::<f32>::new(n, n, n), &a, &b, &c))
        .await?;
    device.replay(&g, 10).await?;

    let metrics = device.metrics().await?;
    let events = take_timeline();
    std::fs::write(&out, chrome_trace_json(&events)).map_err(|e| GpuError::Other(format!("{out}: {e}")))?;
    println!(
        "{} operations timed (p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs); trace written to {out}",
        metrics.latency.count(),
        metrics.latency.quantile_us(0.5),
        metrics.latency.quantile_us(0.99),
        metrics.latency.max_us()
    );
    system.shutdown().await;
    Ok(())
}
