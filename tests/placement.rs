//! `PlacementActor`: round-robin and least-loaded placement over several devices,
//! skipping lost ones; GEMMs spread through it come back correct.

mod common;

use atomr_accel_cuda::prelude::*;
use common::{gemm_ref, rand_vec, rel_err};

async fn cpu_devices(system: &ActorSystem, n: usize) -> Vec<Device> {
    let mut v = vec![];
    for i in 0..n {
        let config = DeviceConfig {
            device_id: i,
            ..DeviceConfig::cpu()
        };
        v.push(Device::open(system, config).await.unwrap());
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_visits_each_device_in_turn_and_skips_lost_ones() {
    let system = ActorSystem::new("place");
    let devices = cpu_devices(&system, 3).await;
    let d2 = devices.clone();
    let p = PlacementActorRef::spawn(&system, "placement", move || {
        PlacementActor::new(d2.clone(), PlacementPolicy::RoundRobin)
    })
    .unwrap();
    let mut ids = vec![];
    for _ in 0..6 {
        ids.push(p.choose().await.unwrap().id());
    }
    assert_eq!(ids, [0, 1, 2, 0, 1, 2]);
    devices[1].stop().await;
    let mut ids = vec![];
    for _ in 0..4 {
        ids.push(p.choose().await.unwrap().id());
    }
    assert!(!ids.contains(&1), "a stopped device is not chosen: {ids:?}");
    assert!(ids.contains(&0) && ids.contains(&2));
    devices[0].stop().await;
    devices[2].stop().await;
    let e = p.choose().await.unwrap_err();
    assert!(matches!(e, GpuError::DeviceLost(_)), "{e}");
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn least_loaded_avoids_a_busy_device() {
    let system = ActorSystem::new("place");
    let devices = cpu_devices(&system, 2).await;
    let d2 = devices.clone();
    let p = PlacementActorRef::spawn(&system, "placement", move || {
        PlacementActor::new(d2.clone(), PlacementPolicy::LeastLoaded)
    })
    .unwrap();
    // Keep device 0 busy with large GEMMs (in flight while we choose).
    let n = 384;
    let a = devices[0].upload(vec![1.0f64; n * n]).await.unwrap();
    let c = devices[0].alloc::<f64>(n * n).await.unwrap();
    let busy = devices[0].clone();
    let work = tokio::spawn(async move {
        let mut jobs = vec![];
        for _ in 0..4 {
            let (d, a, c) = (busy.clone(), a.clone(), c.clone());
            jobs.push(tokio::spawn(
                async move { d.gemm(Gemm::new(n, n, n), &a, &a, &c).await },
            ));
        }
        for j in jobs {
            j.await.unwrap().unwrap();
        }
    });
    while devices[0].in_flight() == 0 {
        tokio::task::yield_now().await;
    }
    for _ in 0..5 {
        assert_eq!(p.choose().await.unwrap().id(), 1, "the idle device is chosen");
    }
    work.await.unwrap();
    assert_eq!(devices[0].in_flight(), 0);
    system.shutdown().await;
}

/// A burst of choices made before any request is sent spreads over the devices: each
/// `Placement` reserves its place until dropped, and `load` reports it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_choices_spreads_and_reservations_end_with_their_placements() {
    let system = ActorSystem::new("place");
    let devices = cpu_devices(&system, 4).await;
    let d2 = devices.clone();
    let p = PlacementActorRef::spawn(&system, "placement", move || {
        PlacementActor::new(d2.clone(), PlacementPolicy::LeastLoaded)
    })
    .unwrap();
    let mut held = vec![];
    for _ in 0..8 {
        held.push(p.choose().await.unwrap());
    }
    let mut per = [0usize; 4];
    for h in &held {
        per[h.id()] += 1;
    }
    assert_eq!(per, [2, 2, 2, 2], "eight choices over four idle devices");
    let load = p.load().await.unwrap();
    assert_eq!(load.iter().map(|l| l.reserved).collect::<Vec<_>>(), vec![2, 2, 2, 2]);
    assert!(load.iter().all(|l| !l.lost && l.in_flight == 0), "{load:?}");
    // Released: dropping two on device 3 makes it the least loaded.
    held.retain(|h| h.id() != 3);
    assert_eq!(p.choose().await.unwrap().id(), 3);
    let last = held.pop().unwrap();
    let id = last.id();
    let device = last.into_device();
    drop(held);
    assert!(p.load().await.unwrap().iter().all(|l| l.reserved == 0));
    devices[2].stop().await;
    let load = p.load().await.unwrap();
    assert!(load[2].lost && !load[0].lost, "{load:?}");
    assert_eq!(device.id(), id, "into_device keeps the device");
    system.shutdown().await;
}

async fn gemms_spread_over(devices: Vec<Device>, system: ActorSystem) {
    let count = devices.len();
    let d2 = devices.clone();
    let p = PlacementActorRef::spawn(&system, "placement", move || {
        PlacementActor::new(d2.clone(), PlacementPolicy::RoundRobin)
    })
    .unwrap();
    let (m, n, k) = (64, 48, 80);
    let mut jobs = vec![];
    for _ in 0..12 {
        let d = p.choose().await.unwrap();
        jobs.push(tokio::spawn(async move {
            let (a, b) = (rand_vec(m * k), rand_vec(k * n));
            let ga = d.upload(a.iter().map(|&v| v as f32).collect::<Vec<_>>()).await.unwrap();
            let gb = d.upload(b.iter().map(|&v| v as f32).collect::<Vec<_>>()).await.unwrap();
            let gc = d.alloc::<f32>(m * n).await.unwrap();
            d.gemm(Gemm::new(m, n, k), &ga, &gb, &gc).await.unwrap();
            let got: Vec<f64> = d.download(&gc).await.unwrap().iter().map(|&v| v as f64).collect();
            let a32: Vec<f64> = a.iter().map(|&v| v as f32 as f64).collect();
            let b32: Vec<f64> = b.iter().map(|&v| v as f32 as f64).collect();
            let mut want = vec![0.0; m * n];
            gemm_ref(false, false, m, n, k, 1.0, &a32, m, &b32, k, 0.0, &mut want, m);
            assert!(rel_err(&got, &want) < 1e-5);
            d.id()
        }));
    }
    let mut used = vec![];
    for j in jobs {
        used.push(j.await.unwrap());
    }
    used.sort();
    used.dedup();
    assert_eq!(used.len(), count, "work went to every device: {used:?}");
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gemms_spread_over_cpu_devices_are_correct() {
    let system = ActorSystem::new("place");
    let devices = cpu_devices(&system, 3).await;
    gemms_spread_over(devices, system).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn gemms_spread_over_a_gpu_and_a_cpu_device_are_correct() {
    let system = ActorSystem::new("place");
    let gpu = Device::open(&system, DeviceConfig::cuda(0)).await.unwrap();
    let cpu = Device::open(
        &system,
        DeviceConfig {
            device_id: 1,
            ..DeviceConfig::cpu()
        },
    )
    .await
    .unwrap();
    gemms_spread_over(vec![gpu, cpu], system).await;
}
