//! Shared by the GPU benches: the median, and opening GPU 0 (or saying why not).
#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::{Device, DeviceConfig};
use cudarc::driver::{CudaContext, CudaStream};

/// The median of `v` (sorted in place).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Seconds per call of `call`: 3 warm-up calls, then the median of 7 rounds of `reps`
/// awaited calls.
pub async fn per_call<F: Future<Output = ()>>(reps: usize, mut call: impl FnMut() -> F) -> f64 {
    for _ in 0..3 {
        call().await;
    }
    let mut rounds = vec![];
    for _ in 0..7 {
        let t = std::time::Instant::now();
        for _ in 0..reps {
            call().await;
        }
        rounds.push(t.elapsed().as_secs_f64() / reps as f64);
    }
    median(&mut rounds)
}

/// Opens GPU 0 with `config`, or prints why the bench measures nothing and returns None.
pub async fn open_gpu(bench: &str, config: DeviceConfig) -> Option<(ActorSystem, Device)> {
    let sys = ActorSystem::new(bench);
    match Device::open(&sys, config).await {
        Ok(d) => Some((sys, d)),
        Err(e) => {
            println!("{bench} bench: no usable GPU ({e}); nothing measured");
            None
        }
    }
}

/// `config` with the overrides a bench run may set in its environment:
/// `BENCH_IDLE_SPIN_US` and `BENCH_REPLY_SPIN_US` (`DeviceConfig::idle_spin` and
/// `reply_spin`, in µs), `BENCH_FFT_GRAPHS=0` (`DeviceConfig::fft_graphs` off),
/// `BENCH_COMPLETION` (`spin`, `blocking`, `polled` or `hostfn`: `DeviceConfig::completion`),
/// `BENCH_WARM_UP=0` (`DeviceConfig::warm_up` off: no library warmed at open, for a
/// profile of one path).
pub fn with_env_overrides(mut config: DeviceConfig) -> DeviceConfig {
    let us = |var: &str| {
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse().ok())
            .map(std::time::Duration::from_micros)
    };
    if let Some(d) = us("BENCH_IDLE_SPIN_US") {
        config.idle_spin = d;
    }
    if let Some(d) = us("BENCH_REPLY_SPIN_US") {
        config.reply_spin = d;
    }
    if std::env::var("BENCH_FFT_GRAPHS").is_ok_and(|v| v == "0") {
        config.fft_graphs = false;
    }
    if std::env::var("BENCH_WARM_UP").is_ok_and(|v| v == "0") {
        config.warm_up = false;
    }
    use atomr_accel_cuda::completion::CompletionStrategy as C;
    match std::env::var("BENCH_COMPLETION").as_deref() {
        Ok("spin") => config.completion = C::Spin,
        Ok("blocking") => config.completion = C::Blocking,
        Ok("polled") => config.completion = C::Polled,
        Ok("hostfn") => config.completion = C::HostFn,
        _ => {}
    }
    config
}

/// The sizes a bench measures: `BENCH_SIZES` (comma-separated), else `default`.
pub fn sizes(default: &str) -> Vec<usize> {
    std::env::var("BENCH_SIZES")
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

/// Runs a bench body on a multi-thread runtime with GPU 0 opened through `config` and, for
/// the raw-cudarc baseline of the same run, a context and a fresh stream on the same GPU.
/// `config` takes the environment's overrides (`with_env_overrides`). Without a usable
/// GPU it prints why and measures nothing.
pub fn run_gpu<F, Fut>(bench: &str, config: DeviceConfig, body: F)
where
    F: FnOnce(Device, Arc<CudaContext>, Arc<CudaStream>) -> Fut,
    Fut: Future<Output = ()>,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let Some((sys, dev)) = open_gpu(bench, with_env_overrides(config)).await else {
            return;
        };
        let ctx = CudaContext::new(0).unwrap();
        let stream = ctx.new_stream().unwrap();
        body(dev, ctx, stream).await;
        sys.shutdown().await;
    });
}
