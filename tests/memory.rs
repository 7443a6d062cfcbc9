//! Managed memory: a `GpuRef` from `alloc_managed` works in device operations (GEMM,
//! `#[kernel]`, copies) for every dtype and is read and written in place from the host;
//! prefetch and advice; freeing. Buffers from `alloc_uninit` (not zeroed) serve as any
//! other once written. On the CPU device and on the GPU.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::kernel;
use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::testing::TestHooks;
use common::{gemm_ref, rand_vec, rel_err};

/// y = a·x + y.
#[kernel]
pub fn axpy<T: Float>(a: T, x: &[T], y: &mut [T]) {
    let i = global_index();
    if i < y.len() {
        y[i] = a * x[i] + y[i];
    }
}

on_both! {
    managed_buffers_work_in_device_operations => operations;
    every_dtype_round_trips_through_the_host => dtypes;
    prefetch_and_advice => prefetch_advice;
    managed_memory_is_freed => freed;
    uninitialised_buffers_take_what_is_written => uninit;
}

async fn open(config: DeviceConfig) -> (ActorSystem, Device) {
    let sys = ActorSystem::new("managed");
    let d = Device::open(&sys, config).await.unwrap();
    (sys, d)
}

async fn operations(config: DeviceConfig) {
    let (sys, d) = open(config).await;
    let (m, n, k) = (33, 20, 47);
    let (a, b) = (rand_vec(m * k), rand_vec(k * n));
    let (ma, mb) = (
        d.alloc_managed::<f32>(m * k).await.unwrap(),
        d.alloc_managed::<f32>(k * n).await.unwrap(),
    );
    let mc = d.alloc_managed::<f32>(m * n).await.unwrap();
    assert!(ma.is_managed() || d.ready().await.unwrap().backend == BackendKind::Cpu);
    // Written in place from the host: no upload.
    ma.with_host_mut(|v| v.iter_mut().zip(&a).for_each(|(o, x)| *o = *x as f32))
        .unwrap();
    mb.with_host_mut(|v| v.iter_mut().zip(&b).for_each(|(o, x)| *o = *x as f32))
        .unwrap();
    d.gemm(Gemm::<f32>::new(m, n, k), &ma, &mb, &mc).await.unwrap();
    let (a32, b32): (Vec<f64>, Vec<f64>) = (
        a.iter().map(|x| *x as f32 as f64).collect(),
        b.iter().map(|x| *x as f32 as f64).collect(),
    );
    let mut want = vec![0.0; m * n];
    gemm_ref(false, false, m, n, k, 1.0, &a32, m, &b32, k, 0.0, &mut want, m);
    // Read in place from the host, after the GEMM (with_host waits for it).
    let got: Vec<f64> = mc.with_host(|v| v.iter().map(|x| *x as f64).collect()).unwrap();
    assert!(rel_err(&got, &want) < 1e-5);
    // A kernel on managed buffers, then the host again.
    let mut y = mc.clone();
    let x = d.upload(vec![1.0f32; m * n]).await.unwrap();
    axpy::launch::<f32>(&d, LaunchConfig::for_elements(m * n, 128), 0.5, &x, &mut y)
        .await
        .unwrap();
    let got: Vec<f64> = y.with_host(|v| v.iter().map(|x| *x as f64).collect()).unwrap();
    let want2: Vec<f64> = want.iter().map(|w| w + 0.5).collect();
    assert!(rel_err(&got, &want2) < 1e-5);
    sys.shutdown().await;
}

async fn round_trip<T: DType>(d: &Device, n: usize) {
    let vals: Vec<T> = rand_vec(n).iter().map(|x| T::from_f64((x * 100.0).round())).collect();
    let m = d.alloc_managed::<T>(n).await.unwrap();
    m.with_host(|v| assert!(v.iter().all(|x| *x == T::default()), "{} not zeroed", T::NAME))
        .unwrap();
    m.with_host_mut(|v| v.copy_from_slice(&vals)).unwrap();
    // Through the device (a copy into an ordinary buffer) and back.
    let plain = d.alloc::<T>(n).await.unwrap();
    d.copy(&m, &plain).await.unwrap();
    assert_eq!(d.download(&plain).await.unwrap(), vals, "{}", T::NAME);
}

async fn dtypes(config: DeviceConfig) {
    let (sys, d) = open(config).await;
    round_trip::<f16>(&d, 1001).await;
    round_trip::<bf16>(&d, 1001).await;
    round_trip::<f32>(&d, 1001).await;
    round_trip::<f64>(&d, 1001).await;
    round_trip::<i8>(&d, 1001).await;
    round_trip::<i16>(&d, 1001).await;
    round_trip::<i32>(&d, 1001).await;
    round_trip::<i64>(&d, 1001).await;
    round_trip::<u8>(&d, 1001).await;
    round_trip::<u16>(&d, 1001).await;
    round_trip::<u32>(&d, 1001).await;
    round_trip::<u64>(&d, 1001).await;
    round_trip::<c32>(&d, 1001).await;
    round_trip::<c64>(&d, 1001).await;
    sys.shutdown().await;
}

async fn prefetch_advice(config: DeviceConfig) {
    let (sys, d) = open(config).await;
    let gpu = d.ready().await.unwrap().backend == BackendKind::Cuda;
    let n = 1 << 20;
    let m = d.alloc_managed::<f32>(n).await.unwrap();
    m.with_host_mut(|v| v.iter_mut().enumerate().for_each(|(i, x)| *x = i as f32))
        .unwrap();
    d.advise(&m, Advice::ReadMostly(true)).await.unwrap();
    d.advise(&m, Advice::ReadMostly(false)).await.unwrap();
    d.advise(&m, Advice::PreferredLocation(Some(Location::Device)))
        .await
        .unwrap();
    d.advise(&m, Advice::AccessedBy(Location::Host, true)).await.unwrap();
    d.prefetch(&m, Location::Device).await.unwrap();
    let mut y = m.clone();
    let ones = d.upload(vec![1.0f32; n]).await.unwrap();
    axpy::launch::<f32>(&d, LaunchConfig::for_elements(n, 256), 3.0, &ones, &mut y)
        .await
        .unwrap();
    d.prefetch(&m, Location::Host).await.unwrap();
    d.advise(&m, Advice::PreferredLocation(None)).await.unwrap();
    m.with_host(|v| {
        for (i, x) in v.iter().enumerate() {
            assert_eq!(*x, i as f32 + 3.0, "element {i}");
        }
    })
    .unwrap();
    // An ordinary buffer: no managed operations on a GPU (the CPU device's buffers are
    // all host memory).
    let plain = d.alloc::<f32>(16).await.unwrap();
    if gpu {
        assert!(matches!(
            d.prefetch(&plain, Location::Host).await,
            Err(GpuError::InvalidArgument(_))
        ));
        assert!(matches!(
            d.advise(&plain, Advice::ReadMostly(true)).await,
            Err(GpuError::InvalidArgument(_))
        ));
        assert!(matches!(plain.with_host(|_| ()), Err(GpuError::InvalidArgument(_))));
    } else {
        d.prefetch(&plain, Location::Host).await.unwrap();
        plain.with_host(|v| assert_eq!(v.len(), 16)).unwrap();
    }
    // A stale managed buffer.
    d.rebuild().await.unwrap();
    assert!(matches!(
        d.prefetch(&m, Location::Device).await,
        Err(GpuError::Stale { .. })
    ));
    sys.shutdown().await;
}

async fn freed(config: DeviceConfig) {
    let (sys, d) = open(config).await;
    let gpu = d.ready().await.unwrap().backend == BackendKind::Cuda;
    let n = (64 << 20) / 4;
    let (free0, _) = d.memory().await.unwrap();
    for _ in 0..if gpu { 200 } else { 10 } {
        let m = d.alloc_managed::<f32>(n).await.unwrap();
        // Touch it on the device so its pages are really there.
        d.prefetch(&m, Location::Device).await.unwrap();
        drop(m);
    }
    let (free1, _) = d.memory().await.unwrap();
    let grown = free0.saturating_sub(free1);
    assert!(grown < (256 << 20), "memory grew by {grown} bytes");
    sys.shutdown().await;
}

/// `alloc_uninit`: a buffer of the asked length and type that holds what a copy and a
/// kernel write into it (zeros on the CPU device, where it is zeroed).
async fn uninit(config: DeviceConfig) {
    let (sys, d) = open(config).await;
    let n = 4099;
    let (x, y) = (rand_vec(n), rand_vec(n));
    let u = d.alloc_uninit::<f64>(n).await.unwrap();
    assert_eq!(u.len(), n);
    if d.config().backend == atomr_accel_cuda::device::BackendChoice::Cpu {
        assert!(d.download(&u).await.unwrap().iter().all(|&v| v == 0.0));
    }
    d.copy(&d.upload(y.clone()).await.unwrap(), &u).await.unwrap();
    let mut u = u;
    let xd = d.upload(x.clone()).await.unwrap();
    axpy::launch::<f64>(&d, LaunchConfig::for_elements(n, 256), 2.0, &xd, &mut u)
        .await
        .unwrap();
    let want: Vec<f64> = x.iter().zip(&y).map(|(a, b)| 2.0 * a + b).collect();
    assert!(rel_err(&d.download(&u).await.unwrap(), &want) < 1e-15);
    let bytes = d.alloc_uninit::<u8>(7).await.unwrap();
    d.copy(&d.upload(vec![1u8, 2, 3, 4, 5, 6, 7]).await.unwrap(), &bytes)
        .await
        .unwrap();
    assert_eq!(d.download(&bytes).await.unwrap(), vec![1, 2, 3, 4, 5, 6, 7]);
    sys.shutdown().await;
}
