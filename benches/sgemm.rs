//! SGEMM through `BlasActor` (ask → cuBLAS → completion → reply) vs raw cudarc cuBLAS
//! (gemm + stream sync) in the same process, interleaved call by call, on GPU 0. Also the tiny round trip (a 1×1×1
//! GEMM) per completion strategy vs raw launch + sync. Prints `RESULT |` lines.
//! Sizes: BENCH_SIZES (default "1024,4096,8192"). Skips with a message without a GPU.

use std::sync::Arc;
use std::time::Instant;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::{CompletionStrategy, Device, DeviceConfig, Gemm};
use cudarc::cublas::{CudaBlas, Gemm as _};
use cudarc::driver::CudaContext;

#[path = "support/alternate.rs"]
mod alternate;

#[path = "support/random.rs"]
mod random;

#[path = "support/gpu_bench.rs"]
mod gpu_bench;

#[path = "support/sgemm_compare.rs"]
mod sgemm_compare;
#[path = "support/tiny_gemm.rs"]
mod tiny_gemm;

use alternate::Order;
use sgemm_compare::{compare_sgemm, iters_for, SgemmTimes};

#[path = "support/stats.rs"]
mod stats;

use stats::percentile;

/// Latencies of `iters` tiny round trips, in µs.
async fn tiny_round_trip(dev: &Device, iters: usize) -> Vec<f64> {
    let a = dev.upload(vec![1.5f32]).await.unwrap();
    let c = dev.alloc::<f32>(1).await.unwrap();
    let g = Gemm::<f32>::new(1, 1, 1);
    let mut lat = vec![];
    for i in 0..iters + 100 {
        let t = Instant::now();
        dev.gemm(g, &a, &a, &c).await.unwrap();
        if i >= 100 {
            lat.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    lat
}

/// Latencies of `iters` raw GEMM + synchronize, in µs.
fn raw_tiny(ctx: &Arc<CudaContext>, iters: usize) -> Vec<f64> {
    let stream = ctx.new_stream().unwrap();
    let blas = CudaBlas::new(stream.clone()).unwrap();
    let a = stream.clone_htod(&[1.5f32]).unwrap();
    let mut c = stream.alloc_zeros::<f32>(1).unwrap();
    let cfg = tiny_gemm::config();
    let mut lat = vec![];
    for i in 0..iters + 100 {
        let t = Instant::now();
        // SAFETY: 1-element buffers for a 1×1×1 GEMM.
        unsafe { blas.gemm(cfg, &a, &a, &mut c) }.unwrap();
        stream.synchronize().unwrap();
        if i >= 100 {
            lat.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    lat
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let sys = ActorSystem::new("bench");
        // BENCH_COMPLETION=polled|hostfn picks the completion strategy of the SGEMM part.
        // BENCH_STREAMS=single puts the BLAS actor on the context's stream (no cross-stream
        // events); the default is a stream per actor.
        let mut config = gpu_bench::with_env_overrides(DeviceConfig::cuda(0));
        match std::env::var("BENCH_COMPLETION").as_deref() {
            Ok("polled") => config = config.with_completion(CompletionStrategy::Polled),
            Ok("hostfn") => config = config.with_completion(CompletionStrategy::HostFn),
            _ => {}
        }
        if std::env::var("BENCH_STREAMS").as_deref() == Ok("single") {
            config = config.with_streams(atomr_accel_cuda::StreamStrategy::Single);
        }
        let dev = match Device::open(&sys, config.clone()).await {
            Ok(d) => d,
            Err(e) => {
                println!("sgemm bench: no usable GPU ({e}); nothing measured");
                return;
            }
        };
        let info = dev.ready().await.unwrap();
        println!("RESULT | info.device | {} {:?}", info.name, info.compute_capability);
        let ctx = CudaContext::new(0).unwrap();
        for n in gpu_bench::sizes("1024,4096,8192") {
            for order in Order::ALL {
                let t = compare_sgemm(&dev, &ctx, n, iters_for(n), order).await.unwrap();
                println!(
                    "RESULT | sgemm.{n} ({order:?}, median of {}) | actor {:.2} TFLOP/s, raw cudarc {:.2} TFLOP/s, ratio {:.3}",
                    iters_for(n),
                    SgemmTimes::tflops(n, t.actor),
                    SgemmTimes::tflops(n, t.raw),
                    t.raw / t.actor
                );
            }
        }
        let iters: usize = std::env::var("BENCH_ITERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(5000);
        let mut raw = raw_tiny(&ctx, iters);
        let (rp50, rp99) = (percentile(&mut raw, 0.5), percentile(&mut raw, 0.99));
        println!("RESULT | tiny.raw gemm1 + sync | p50 {rp50:.2} us, p99 {rp99:.2} us");
        let mut series = vec![("raw cudarc gemm + sync".to_string(), raw)];
        for s in [
            CompletionStrategy::Polled,
            CompletionStrategy::HostFn,
            CompletionStrategy::Blocking,
            CompletionStrategy::Spin,
        ] {
            let sys = ActorSystem::new("tiny");
            let dev = Device::open(&sys, config.clone().with_completion(s))
                .await
                .unwrap();
            let mut lat = tiny_round_trip(&dev, iters).await;
            let (p50, p99) = (percentile(&mut lat, 0.5), percentile(&mut lat, 0.99));
            series.push((format!("actor ask, {s:?}"), lat));
            println!(
                "RESULT | tiny.actor gemm1 ask round trip, {s:?} | p50 {p50:.2} us, p99 {p99:.2} us ({:.2}x raw p50)",
                p50 / rp50
            );
            sys.shutdown().await;
        }
        // BENCH_PLOT_DIR=dir writes the distributions as an SVG (BENCHMARKS.md shows it).
        if let Ok(dir) = std::env::var("BENCH_PLOT_DIR") {
            let refs: Vec<(&str, &[f64])> = series.iter().map(|(l, v)| (l.as_str(), v.as_slice())).collect();
            let svg = atomr_accel_cuda::observability::svg_latency_plot("1×1×1 SGEMM round trip, H200", &refs);
            let path = std::path::Path::new(&dir).join("tiny_round_trip.svg");
            std::fs::write(&path, svg).unwrap();
            println!("plot: {}", path.display());
        }
    });
}
