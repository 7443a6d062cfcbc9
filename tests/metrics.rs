//! Device metrics through the `metrics` facade (`DeviceConfig::metrics`): with a recorder
//! installed, a device reports requests in flight, generation, readiness, rebuilds and
//! the latency of each request, labelled by device; with metrics off it reports nothing.
//! On the CPU device (the values do not depend on the backend); its own binary, as a
//! process has one global recorder.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::testing::TestHooks;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use std::collections::HashMap;

/// Everything reported since the last snapshot (a snapshot drains: counters and gauges
/// read back as zero after it), by (name, device label).
fn take(s: &Snapshotter) -> HashMap<(String, String), DebugValue> {
    s.snapshot()
        .into_vec()
        .into_iter()
        .map(|(k, _, _, v)| {
            let key = k.key();
            let device = key
                .labels()
                .find(|l| l.key() == "device")
                .map(|l| l.value().to_string());
            ((key.name().to_string(), device.unwrap_or_default()), v)
        })
        .collect()
}

fn gauge(m: &HashMap<(String, String), DebugValue>, name: &str) -> f64 {
    match m.get(&(name.to_string(), "3".to_string())) {
        Some(DebugValue::Gauge(v)) => v.into_inner(),
        other => panic!("{name}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_reports_its_metrics_to_the_installed_recorder() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    recorder.install().unwrap();
    let sys = ActorSystem::new("metrics");
    let mut config = DeviceConfig::cpu();
    config.device_id = 3;
    config.metrics = true;
    let d = Device::open(&sys, config).await.unwrap();
    let quiet = {
        let mut c = DeviceConfig::cpu();
        c.device_id = 4;
        Device::open(&sys, c).await.unwrap()
    };
    let x = d.upload(common::rand_vec(1000)).await.unwrap();
    for _ in 0..9 {
        d.scal(2.0, &x).await.unwrap();
    }
    quiet.alloc::<f32>(16).await.unwrap();
    let m = take(&snap);
    assert_eq!(gauge(&m, "atomr_device_ready"), 1.0);
    assert_eq!(gauge(&m, "atomr_device_generation"), 1.0);
    assert_eq!(gauge(&m, "atomr_requests_in_flight"), 0.0);
    assert_eq!(gauge(&m, "atomr_device_lost"), 0.0);
    match m.get(&("atomr_request_duration_seconds".to_string(), "3".to_string())) {
        // The upload and nine scals.
        Some(DebugValue::Histogram(v)) => {
            assert!(v.len() >= 10, "{} requests timed", v.len());
            assert!(v.iter().all(|s| s.into_inner() > 0.0 && s.into_inner() < 60.0));
        }
        other => panic!("request latency: {other:?}"),
    }
    // The device with metrics off reported nothing.
    let quiet: Vec<_> = m.keys().filter(|(_, device)| device == "4").collect();
    assert!(quiet.is_empty(), "{quiet:?}");
    d.rebuild().await.unwrap();
    let m = take(&snap);
    assert_eq!(gauge(&m, "atomr_device_generation"), 2.0);
    assert_eq!(gauge(&m, "atomr_device_ready"), 1.0);
    match m.get(&("atomr_device_rebuilds_total".to_string(), "3".to_string())) {
        Some(DebugValue::Counter(1)) => {}
        other => panic!("rebuilds: {other:?}"),
    }
    sys.shutdown().await;
}
