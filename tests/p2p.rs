//! Copies between devices (`Device::copy_to`): two devices of one kind (two CPU devices;
//! two `Device`s on one GPU), a device and the CPU device, both ways, checked exactly on
//! fresh random data of odd lengths; a copy is ordered after a slow kernel still writing
//! its source; bad copies (lengths, a buffer of a third device, a stale buffer) are typed
//! errors. On the CPU device and the GPU.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::p2p::Topology;
use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::testing::TestHooks;
use common::rand_vec;
use common::slow::slow_copy;

/// A device of `config` under a system of its own, with its own ordinal on the CPU
/// device (two CPU devices of one ordinal would accept each other's buffers, as two
/// `Device`s on one GPU do: they share its context).
async fn open(config: &DeviceConfig, name: &str, cpu_ordinal: usize) -> (ActorSystem, Device) {
    let sys = ActorSystem::new(name);
    let mut config = config.clone();
    if config.backend == BackendChoice::Cpu {
        config.device_id = cpu_ordinal;
    }
    let dev = Device::open(&sys, config).await.unwrap();
    (sys, dev)
}

/// `src` on `a` copied into a buffer of `b` and back, exactly.
async fn round_trip<T: DType + PartialEq + std::fmt::Debug>(a: &Device, b: &Device, data: Vec<T>) {
    let n = data.len();
    let x = a.upload(data.clone()).await.unwrap();
    let y = b.alloc::<T>(n).await.unwrap();
    a.copy_to(&x, b, &y).await.unwrap();
    assert_eq!(b.download(&y).await.unwrap(), data, "{:?} -> {:?}", a, b);
    let z = a.alloc::<T>(n).await.unwrap();
    b.copy_to(&y, a, &z).await.unwrap();
    assert_eq!(a.download(&z).await.unwrap(), data, "{:?} -> {:?}", b, a);
}

async fn two_devices_of_one_kind(config: DeviceConfig) {
    let (_s1, a) = open(&config, "p2p-a", 3).await;
    let (_s2, b) = open(&config, "p2p-b", 4).await;
    round_trip(&a, &b, rand_vec(1237).iter().map(|&v| v as f32).collect()).await;
    round_trip(&a, &b, rand_vec(4099)).await;
    round_trip(&a, &b, rand_vec(77).iter().map(|&v| (v * 1e6) as i32).collect()).await;

    // Ordered after the work still writing the source: a slow kernel enqueued on an
    // `ActorGpu` of `a` writes `w`, and the copy is asked for at once.
    let x: Vec<f32> = rand_vec(4096).iter().map(|&v| v as f32).collect();
    let gx = a.upload(x.clone()).await.unwrap();
    let mut w = a.alloc::<f32>(x.len()).await.unwrap();
    let gpu = a.actor_gpu();
    slow_copy::enqueue(&gpu, LaunchConfig::for_elements(x.len(), 256), 20_000, &gx, &mut w)
        .await
        .unwrap();
    let y = b.alloc::<f32>(x.len()).await.unwrap();
    a.copy_to(&w, &b, &y).await.unwrap();
    let got = b.download(&y).await.unwrap();
    for (i, (g, v)) in got.iter().zip(&x).enumerate() {
        assert!(
            (g - (v + 1.0)).abs() <= 1e-4,
            "element {i}: {g} after the slow kernel, want {}",
            v + 1.0
        );
    }
}

async fn a_device_and_the_cpu_device(config: DeviceConfig) {
    let (_s1, a) = open(&config, "p2p-dev", 5).await;
    let (_s2, c) = open(&DeviceConfig::cpu(), "p2p-cpu", 6).await;
    round_trip(&a, &c, rand_vec(3001).iter().map(|&v| v as f32).collect()).await;
    round_trip(&c, &a, rand_vec(513)).await;
}

async fn bad_copies(config: DeviceConfig) {
    let (_s1, a) = open(&config, "p2p-bad-a", 7).await;
    let (_s2, b) = open(&DeviceConfig::cpu(), "p2p-bad-b", 8).await;
    let (_s3, third) = open(&DeviceConfig::cpu(), "p2p-bad-c", 9).await;
    let x = a.upload(rand_vec(64)).await.unwrap();
    let short = b.alloc::<f64>(63).await.unwrap();
    let e = a.copy_to(&x, &b, &short).await.unwrap_err();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
    assert!(e.to_string().contains("64") && e.to_string().contains("63"), "{e}");

    // A source that is not the sending device's, a destination that is not the
    // receiver's.
    let foreign = third.upload(rand_vec(64)).await.unwrap();
    let y = b.alloc::<f64>(64).await.unwrap();
    let e = a.copy_to(&foreign, &b, &y).await.unwrap_err();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
    let e = a.copy_to(&x, &b, &foreign).await.unwrap_err();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");

    // A source of an older generation of its device.
    a.rebuild().await.unwrap();
    let e = a.copy_to(&x, &b, &y).await.unwrap_err();
    assert!(matches!(e, GpuError::Stale { .. }), "{e:?}");
    let fresh = a.upload(rand_vec(64)).await.unwrap();
    a.copy_to(&fresh, &b, &y).await.unwrap();
    assert_eq!(b.download(&y).await.unwrap(), a.download(&fresh).await.unwrap());
}

on_both! {
    copies_between_two_devices_of_one_kind_are_exact_and_ordered => two_devices_of_one_kind;
    copies_between_a_device_and_the_cpu_device_are_exact => a_device_and_the_cpu_device;
    bad_copies_between_devices_are_typed_errors => bad_copies;
}

/// The topology answers on any machine: no GPU without a driver; on a GPU machine each
/// GPU reaches itself.
#[test]
fn the_topology_probe_answers_everywhere() {
    let t = Topology::probe().unwrap();
    for g in 0..t.gpus() {
        assert!(t.can_access(g, g));
    }
    assert!(!t.can_access(t.gpus(), 0));
}
