//! Observability: the timeline records device operations with positive durations and
//! exports valid Chrome trace JSON; metrics count them; every handled message runs in a
//! `message` span named after its handler. On the CPU device and on the GPU.

#[macro_use]
mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::kernel;
use atomr_accel_cuda::observability::{chrome_trace_json, enable_timeline, take_timeline};
use atomr_accel_cuda::prelude::*;
use common::rand_vec;

/// y = 2·y.
#[kernel]
pub fn twice<T: Float>(y: &mut [T]) {
    let i = global_index();
    if i < y.len() {
        y[i] = y[i] + y[i];
    }
}

on_both! {
    the_timeline_exports_a_valid_chrome_trace => timeline;
}

async fn timeline(config: DeviceConfig) {
    enable_timeline(true);
    let sys = ActorSystem::new("obs");
    let d = Device::open(&sys, config).await.unwrap();
    let n = 128;
    let a = d
        .upload(rand_vec(n * n).iter().map(|x| *x as f32).collect::<Vec<_>>())
        .await
        .unwrap();
    let mut c = d.alloc::<f32>(n * n).await.unwrap();
    let before = d.metrics().await.unwrap().latency.count();
    for _ in 0..3 {
        d.gemm(Gemm::<f32>::new(n, n, n), &a, &a, &c).await.unwrap();
        twice::launch::<f32>(&d, LaunchConfig::for_elements(n * n, 128), &mut c)
            .await
            .unwrap();
    }
    // FFT and RNG calls are timed too.
    let z = d.alloc::<c32>(n).await.unwrap();
    d.fft_c2c(&z, &z, &FftShape::new(&[n], 1), false).await.unwrap();
    d.seed_rng(7).await.unwrap();
    d.fill_uniform(&c).await.unwrap();
    let m = d.metrics().await.unwrap();
    assert!(m.latency.count() >= before + 8, "{} timed", m.latency.count());
    assert!(m.memory_total > 0 && m.latency.max_us() > 0.0);
    let events = take_timeline();
    let mine: Vec<_> = events.iter().filter(|e| e.device == 0).collect();
    assert!(
        mine.iter()
            .filter(|e| e.name == "gemm<f32>" && e.lane == "blas")
            .count()
            >= 3
    );
    assert!(mine.iter().filter(|e| e.name == "twice" && e.lane == "kernel").count() >= 3);
    assert!(mine.iter().any(|e| e.name == "fft_c2c" && e.lane == "fft"));
    assert!(mine.iter().any(|e| e.name == "uniform" && e.lane == "rng"));
    assert!(mine.iter().all(|e| e.dur_us > 0.0 && e.start_us >= 0.0));
    // The trace is valid JSON in Chrome's format.
    let json: serde_json::Value = serde_json::from_str(&chrome_trace_json(&events)).unwrap();
    let list = json["traceEvents"].as_array().unwrap();
    let complete: Vec<_> = list.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(complete.len(), events.len());
    for e in &complete {
        assert!(e["name"].is_string() && e["ts"].is_number() && e["dur"].is_number());
        assert!(e["pid"].is_u64() && e["tid"].is_u64());
    }
    assert!(list
        .iter()
        .any(|e| e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "blas"));
    sys.shutdown().await;
}

/// Captures what a `tracing` subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_runs_in_a_span_named_after_its_handler() {
    let out = Captured::default();
    let writer = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // Actors run on threads of their own: the subscriber must be the process's.
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let sys = ActorSystem::new("spans");
    let d = Device::open(&sys, DeviceConfig::cpu()).await.unwrap();
    let x = d.upload(vec![1.0f64; 64]).await.unwrap();
    d.gemm(Gemm::<f64>::new(8, 8, 8), &x, &x, &d.alloc::<f64>(64).await.unwrap())
        .await
        .unwrap();
    let mut y = d.alloc::<f32>(16).await.unwrap();
    twice::launch::<f32>(&d, LaunchConfig::for_elements(16, 16), &mut y)
        .await
        .unwrap();
    // Once the device is ready, every library's requests go straight to its actor —
    // none through the DeviceActor's `submit` (an extra ask per call).
    d.ready().await.unwrap();
    let from = out.0.lock().unwrap().len();
    let z = d.alloc::<c32>(16).await.unwrap();
    d.fft_c2c(&z, &z, &FftShape::new(&[16], 1), false).await.unwrap();
    d.fill_uniform(&y).await.unwrap();
    let spd = d.upload(vec![4.0f64, 1.0, 1.0, 3.0]).await.unwrap();
    d.cholesky(&spd, 2).await.unwrap();
    // Spans close after their reply is sent: read them once every actor has stopped.
    sys.shutdown().await;
    let later = String::from_utf8(out.0.lock().unwrap()[from..].to_vec()).unwrap();
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let handled: Vec<&str> = later.lines().filter(|l| l.contains("message{")).collect();
    for lib in ["fft", "rng", "solver"] {
        assert!(
            handled.iter().any(|l| l.contains(&format!("/{lib}"))),
            "no {lib} message in {later}"
        );
    }
    assert!(
        !handled
            .iter()
            .any(|l| l.contains("handler=submit") || l.contains("handler=\"submit\"")),
        "a request went through the DeviceActor: {later}"
    );
    let spans: Vec<&str> = text.lines().filter(|l| l.contains("message{")).collect();
    let has = |handler: &str| {
        spans
            .iter()
            .any(|l| l.contains(&format!("handler={handler}")) || l.contains(&format!("handler=\"{handler}\"")))
    };
    assert!(has("gemm<f64>") && has("upload<f64>") && has("alloc<f64>"), "{text}");
    // And one per kernel launch, named after the kernel.
    assert!(
        text.lines().any(|l| l.contains("kernel{") && l.contains("twice")),
        "{text}"
    );
}
