//! Isolation overhead: the same requests to an in-process device and to an isolated one
//! (its inner tier in a worker process), interleaved, in one run: the tiny round trip
//! (a 1×1×1 SGEMM: ask → worker → cuBLAS → completion → reply), SGEMM 4096 and 256 MiB
//! uploads/downloads. Prints `RESULT |` lines. On the GPU when one is found, else on
//! the CPU device (smaller sizes). Pageable copies are timed once; pinned ones best of four. Its own `main` (`#[gpu_main]`): the worker re-enters
//! this executable.

use std::time::Instant;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::device::BackendKind;
use atomr_accel_cuda::{gpu_main, Device, DeviceConfig, Gemm};

#[path = "support/stats.rs"]
mod stats;

use stats::percentile;

/// µs per tiny round trip, `iters` of them after a warm-up.
async fn tiny(dev: &Device, iters: usize) -> Vec<f64> {
    let a = dev.upload(vec![1.5f32]).await.unwrap();
    let c = dev.alloc::<f32>(1).await.unwrap();
    let g = Gemm::<f32>::new(1, 1, 1);
    let mut lat = vec![];
    for i in 0..iters + 200 {
        let t = Instant::now();
        dev.gemm(g, &a, &a, &c).await.unwrap();
        if i >= 200 {
            lat.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    lat
}

/// TFLOP/s of `iters` n×n×n SGEMMs (each awaited).
async fn sgemm(dev: &Device, n: usize, iters: usize) -> f64 {
    let a = dev.upload(vec![0.5f32; n * n]).await.unwrap();
    let c = dev.alloc::<f32>(n * n).await.unwrap();
    let g = Gemm::<f32>::new(n, n, n);
    dev.gemm(g, &a, &a, &c).await.unwrap();
    let t = Instant::now();
    for _ in 0..iters {
        dev.gemm(g, &a, &a, &c).await.unwrap();
    }
    2.0 * (n as f64).powi(3) * iters as f64 / t.elapsed().as_secs_f64() / 1e12
}

/// GB/s of an upload and of a download of `bytes`.
async fn copies(dev: &Device, bytes: usize) -> (f64, f64) {
    let v = vec![1.25f32; bytes / 4];
    let _ = dev.upload(v.clone()).await.unwrap();
    let t = Instant::now();
    let g = dev.upload(v).await.unwrap();
    let up = bytes as f64 / t.elapsed().as_secs_f64() / 1e9;
    let _ = dev.download(&g).await.unwrap();
    let t = Instant::now();
    let back = dev.download(&g).await.unwrap();
    let down = bytes as f64 / t.elapsed().as_secs_f64() / 1e9;
    assert_eq!(back.len(), bytes / 4);
    (up, down)
}

/// GB/s of a pinned upload (`write_pinned`) and a pinned download (`download_pinned`) of
/// `bytes`, best of three each: on an isolated device the pinned buffer is a range of
/// the shared arena the worker page-locked, so both should be one DMA like in-process.
async fn pinned_copies(dev: &Device, bytes: usize) -> (f64, f64) {
    let n = bytes / 4;
    let mut host = dev.pinned::<f32>(n).await.unwrap();
    host.as_mut_slice().unwrap().fill(1.25);
    let g = dev.alloc::<f32>(n).await.unwrap();
    let (mut up, mut down) = (0f64, 0f64);
    for _ in 0..4 {
        let t = Instant::now();
        host = dev.write_pinned(&g, host).await.unwrap();
        up = up.max(bytes as f64 / t.elapsed().as_secs_f64() / 1e9);
        let t = Instant::now();
        host = dev.download_pinned(&g, host).await.unwrap();
        down = down.max(bytes as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    assert!(host.as_slice().unwrap().iter().all(|v| *v == 1.25));
    (up, down)
}

#[gpu_main]
#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let sys = ActorSystem::new("bench-isolation");
    let local = Device::open(&sys, DeviceConfig::auto()).await.unwrap();
    let sys2 = ActorSystem::new("bench-isolation-2");
    let t0 = Instant::now();
    let iso = Device::open(&sys2, DeviceConfig::auto().isolated()).await.unwrap();
    let start = t0.elapsed();
    let info = local.ready().await.unwrap();
    let gpu = info.backend == BackendKind::Cuda;
    println!(
        "device: {} (isolated worker pid {:?}, started in {start:?})",
        info.name,
        iso.worker_pid()
    );
    let (n, gemm_iters, tiny_iters, bytes) = if gpu {
        (4096, 30, 5000, 256 << 20)
    } else {
        (512, 5, 2000, 32 << 20)
    };
    let mut rows = vec![];
    for round in 0..3 {
        let mut l = tiny(&local, tiny_iters).await;
        let mut i = tiny(&iso, tiny_iters).await;
        let (l50, l99, i50, i99) = (
            percentile(&mut l, 0.5),
            percentile(&mut l, 0.99),
            percentile(&mut i, 0.5),
            percentile(&mut i, 0.99),
        );
        let (lt, it) = (sgemm(&local, n, gemm_iters).await, sgemm(&iso, n, gemm_iters).await);
        let ((lu, ld), (iu, id)) = (copies(&local, bytes).await, copies(&iso, bytes).await);
        let ((pu, pd), (qu, qd)) = (pinned_copies(&local, bytes).await, pinned_copies(&iso, bytes).await);
        println!(
            "RESULT | round {round} | pinned upload {pu:.2} / {qu:.2} GB/s ({:.2}x) | pinned download {pd:.2} / {qd:.2} GB/s ({:.2}x)",
            qu / pu,
            qd / pd
        );
        println!(
            "RESULT | round {round} | tiny p50 {l50:.1} / {i50:.1} us (+{:.1}) | tiny p99 {l99:.1} / {i99:.1} us | \
             sgemm {n} {lt:.2} / {it:.2} TFLOP/s ({:.3}x) | upload {lu:.2} / {iu:.2} GB/s ({:.2}x) | download {ld:.2} / {id:.2} GB/s ({:.2}x)",
            i50 - l50,
            it / lt,
            iu / lu,
            id / ld
        );
        rows.push((i50 - l50, it / lt, iu / lu, id / ld));
    }
    println!("RESULT | columns: in-process / isolated; ratios isolated ÷ in-process");
    iso.stop().await;
    local.stop().await;
}
