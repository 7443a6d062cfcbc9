//! `Pipeline` and its `Stream` adapter: results in input order and correct, at most
//! `depth` batches in flight (and more than one when allowed), errors per batch.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use atomr_accel_cuda::kernel;
use atomr_accel_cuda::prelude::*;
use common::rand_vec;
use futures::StreamExt;

/// y = 2x + 1.
#[kernel]
pub fn twice_plus_one(x: &[f32], y: &mut [f32]) {
    let i = global_index();
    if i < y.len() {
        y[i] = 2.0 * x[i] + 1.0;
    }
}

async fn stage(d: Device, x: GpuRef<f32>) -> Result<GpuRef<f32>, GpuError> {
    let mut y = d.alloc::<f32>(x.len()).await?;
    twice_plus_one::launch(&d, LaunchConfig::for_elements(x.len(), 256), &x, &mut y).await?;
    Ok(y)
}

async fn ordered_and_correct(config: DeviceConfig) {
    let system = ActorSystem::new("pipe");
    let d = Device::open(&system, config).await.unwrap();
    let batches: Vec<Vec<f32>> = (0..10)
        .map(|i| rand_vec(1000 + 977 * i).iter().map(|&v| v as f32).collect())
        .collect();
    let p = Pipeline::new(&d, 3, stage).unwrap();
    let out = p.run(batches.clone()).await.unwrap();
    assert_eq!(out.len(), batches.len());
    for (b, o) in batches.iter().zip(&out) {
        let want: Vec<f32> = b.iter().map(|&v| 2.0 * v + 1.0).collect();
        assert_eq!(o, &want, "batch of {} elements", b.len());
    }
    system.shutdown().await;
}

async fn bounded_in_flight(config: DeviceConfig) {
    let system = ActorSystem::new("pipe");
    let d = Device::open(&system, config).await.unwrap();
    let (active, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (a2, p2) = (active.clone(), peak.clone());
    let p = Pipeline::new(&d, 3, move |d: Device, x: GpuRef<f32>| {
        let (active, peak) = (a2.clone(), p2.clone());
        async move {
            let now = active.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let r = stage(d, x).await;
            active.fetch_sub(1, Ordering::SeqCst);
            r
        }
    })
    .unwrap();
    let input = futures::stream::iter((0..8).map(|i| vec![i as f32; 4096]));
    let out: Vec<_> = p.stream(input).collect().await;
    for (i, r) in out.into_iter().enumerate() {
        assert_eq!(r.unwrap(), vec![2.0 * i as f32 + 1.0; 4096]);
    }
    let peak = peak.load(Ordering::SeqCst);
    assert!((2..=3).contains(&peak), "peak batches in compute: {peak}");
    system.shutdown().await;
}

async fn errors_stay_with_their_batch(config: DeviceConfig) {
    let system = ActorSystem::new("pipe");
    let d = Device::open(&system, config).await.unwrap();
    assert!(matches!(
        Pipeline::new(&d, 0, stage).err(),
        Some(GpuError::InvalidArgument(_))
    ));
    let p = Pipeline::new(&d, 2, |d: Device, x: GpuRef<f32>| async move {
        if x.len() == 7 {
            return Err(GpuError::InvalidArgument("seven".into()));
        }
        stage(d, x).await
    })
    .unwrap();
    let input = futures::stream::iter([vec![1.0f32; 5], vec![1.0; 7], vec![3.0; 9]]);
    let out: Vec<_> = p.stream(input).collect().await;
    assert_eq!(out[0].as_ref().unwrap(), &vec![3.0f32; 5]);
    assert!(matches!(&out[1], Err(GpuError::InvalidArgument(m)) if m == "seven"));
    assert_eq!(out[2].as_ref().unwrap(), &vec![7.0f32; 9]);
    system.shutdown().await;
}

on_both! {
    results_are_ordered_and_correct => ordered_and_correct;
    at_most_depth_batches_in_flight => bounded_in_flight;
    an_error_stays_with_its_batch => errors_stay_with_their_batch;
}

/// `pinned_scratch` skips the zero fill; `pinned` still zero-fills a reused buffer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_stays_zeroed_after_scratch_use() {
    let system = ActorSystem::new("pipe");
    let d = Device::open(&system, DeviceConfig::cpu()).await.unwrap();
    let mut s = d.pinned_scratch::<f32>(64).await.unwrap();
    assert_eq!(s.len(), 64);
    s.as_mut_slice().unwrap().fill(7.0);
    drop(s);
    let z = d.pinned::<f32>(64).await.unwrap();
    assert!(z.as_slice().unwrap().iter().all(|&v| v == 0.0));
    system.shutdown().await;
}
