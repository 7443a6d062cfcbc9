//! `EventActor`: events recorded after buffers' writes, waited on without blocking the
//! actor, timing between them; typed errors for misuse.

#[macro_use]
mod common;

use atomr_accel_cuda::kernel;
use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::testing::TestHooks;

/// `iters` dependent multiply-adds per element.
#[kernel]
pub fn spin(iters: u32, x: &[f32], y: &mut [f32]) {
    let i = global_index();
    if i < y.len() {
        let mut v = x[i];
        let mut k: u32 = 0;
        while k < iters {
            v = v * 0.999 + 0.001;
            k += 1;
        }
        y[i] = v;
    }
}

async fn timing(config: DeviceConfig) {
    let system = ActorSystem::new("ev");
    let d = Device::open(&system, config).await.unwrap();
    let n = 1 << 16;
    let x = d.upload(vec![0.5f32; n]).await.unwrap();
    let mut y = d.alloc::<f32>(n).await.unwrap();
    let (start, end) = (d.create_event().await.unwrap(), d.create_event().await.unwrap());
    d.record_event(&start, &[&x]).await.unwrap();
    spin::launch(&d, LaunchConfig::for_elements(n, 256), 64, &x, &mut y)
        .await
        .unwrap();
    d.record_event(&end, &[&y]).await.unwrap();
    d.wait_event(&end).await.unwrap();
    assert!(d.event_done(&end).await.unwrap());
    let ms = d.elapsed_ms(&start, &end).await.unwrap();
    assert!(ms >= 0.0, "{ms} ms");
    let mut want = 0.5f32;
    for _ in 0..64 {
        want = want * 0.999 + 0.001;
    }
    let got = d.download(&y).await.unwrap();
    assert!(got.iter().all(|v| (v - want).abs() < 1e-6), "{} vs {want}", got[0]);
    system.shutdown().await;
}

async fn misuse(config: DeviceConfig) {
    let system = ActorSystem::new("ev");
    let d = Device::open(&system, config).await.unwrap();
    let e = d.create_event().await.unwrap();
    for r in [d.event_done(&e).await.map(|_| ()), d.wait_event(&e).await] {
        assert!(
            matches!(r, Err(GpuError::InvalidArgument(ref m)) if m.contains("never recorded")),
            "{r:?}"
        );
    }
    let x = d.upload(vec![1.0f32; 8]).await.unwrap();
    d.record_event(&e, &[&x]).await.unwrap();
    d.rebuild().await.unwrap();
    let r = d.event_done(&e).await;
    assert!(matches!(r, Err(GpuError::Stale { .. })), "{r:?}");
    let fresh = d.create_event().await.unwrap();
    let r = d.record_event(&fresh, &[&x]).await;
    assert!(matches!(r, Err(GpuError::Stale { .. })), "an old buffer: {r:?}");
    let y = d.upload(vec![1.0f32; 8]).await.unwrap();
    d.record_event(&fresh, &[&y]).await.unwrap();
    d.wait_event(&fresh).await.unwrap();
    system.shutdown().await;
}

on_both! {
    events_time_work_between_buffers => timing;
    misuse_is_a_typed_error => misuse;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_of_another_device_is_rejected() {
    let system = ActorSystem::new("ev");
    let a = Device::open(&system, DeviceConfig::cpu()).await.unwrap();
    let b = Device::open(
        &system,
        DeviceConfig {
            device_id: 1,
            ..DeviceConfig::cpu()
        },
    )
    .await
    .unwrap();
    let e = a.create_event().await.unwrap();
    let x = b.upload(vec![1.0f32; 4]).await.unwrap();
    let r = b.record_event(&e, &[&x]).await;
    assert!(matches!(r, Err(GpuError::InvalidArgument(_))), "{r:?}");
    system.shutdown().await;
}

/// A wait on a long kernel does not hold the event actor: queries are answered (false)
/// while it runs, and the wait resolves when it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn waiting_does_not_block_the_event_actor() {
    let system = ActorSystem::new("ev");
    let d = Device::open(&system, DeviceConfig::cuda(0)).await.unwrap();
    let n = 1 << 20;
    let x = d.upload(vec![0.5f32; n]).await.unwrap();
    let mut y = d.alloc::<f32>(n).await.unwrap();
    // Warm up (compile) so the timed launch is only the kernel.
    spin::launch(&d, LaunchConfig::for_elements(n, 256), 1, &x, &mut y)
        .await
        .unwrap();
    let (start, end) = (d.create_event().await.unwrap(), d.create_event().await.unwrap());
    d.record_event(&start, &[&x]).await.unwrap();
    // Long enough (hundreds of ms) that the query below comes while it runs. The test
    // still fails now and then beside the binary's other GPU tests, with this length too:
    // its cause is open (issue note, BENCHMARKS.md).
    let call = spin::call(LaunchConfig::for_elements(n, 256), 40_000_000, &x, &mut y);
    let launch = {
        let d = d.clone();
        tokio::spawn(async move { d.launch_kernel(call).await })
    };
    // Record after the kernel's write: wait until the kernel actor has enqueued it.
    while d.in_flight() == 0 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    d.record_event(&end, &[&y]).await.unwrap();
    let waiter = {
        let (d, end) = (d.clone(), end.clone());
        tokio::spawn(async move { d.wait_event(&end).await })
    };
    let t = std::time::Instant::now();
    let done = d.event_done(&end).await.unwrap();
    let answered_in = t.elapsed();
    assert!(!done, "the long kernel is still running");
    assert!(
        answered_in < std::time::Duration::from_millis(20),
        "query took {answered_in:?}"
    );
    waiter.await.unwrap().unwrap();
    launch.await.unwrap().unwrap();
    assert!(d.event_done(&end).await.unwrap());
    let ms = d.elapsed_ms(&start, &end).await.unwrap();
    println!("long kernel between the events: {ms:.1} ms");
    assert!(ms > 5.0, "{ms} ms");
    system.shutdown().await;
}
