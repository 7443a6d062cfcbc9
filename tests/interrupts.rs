//! GPU interrupts: the runtime's hot paths must not make the GPU raise any. Each one holds
//! the CPU that takes it for tens of microseconds on the H200 host (a virtual machine),
//! and a spinning actor or caller on that CPU sees its reply that much later
//! (BENCHMARKS.md, "GPU interrupts"). Counted from the nvidia driver's lines of
//! `/proc/interrupts`, over many calls of each path, with the answers checked too.

mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::prelude::*;
use common::{rand_vec, spd};

/// Interrupts the nvidia driver has taken so far (the GPU host lists them).
fn gpu_interrupts() -> u64 {
    atomr_accel_cuda::observability::gpu_interrupts().expect("nvidia lines in /proc/interrupts")
}

/// Calls of each path; one interrupt per call (the regression this guards against)
/// would give this many.
const CALLS: u64 = 200;

/// At most this many interrupts over `CALLS` calls: unrelated driver activity may raise
/// a few, one per call is what must not come back.
const ALLOWED: u64 = CALLS / 10;

/// Small Cholesky factorizations (each reads LAPACK's `info` from host memory the GPU
/// wrote) and pinned uploads and downloads, awaited one by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a CUDA GPU"]
async fn solver_calls_and_pinned_copies_raise_no_gpu_interrupts() {
    let sys = ActorSystem::new("interrupts");
    let d = Device::open(&sys, DeviceConfig::cuda(0)).await.unwrap();
    let n = 16;
    let a: Vec<f32> = spd(n).iter().map(|v| *v as f32).collect();
    let pristine = d.upload(a.clone()).await.unwrap();
    let m = d.upload(a).await.unwrap();
    // Warm-up (first calls load modules and allocate), then the counted calls.
    d.cholesky(&m, n).await.unwrap();
    let before = gpu_interrupts();
    for _ in 0..CALLS {
        d.copy(&pristine, &m).await.unwrap();
        d.cholesky(&m, n).await.unwrap();
    }
    let solver = gpu_interrupts() - before;

    let data: Vec<f32> = rand_vec(4096).iter().map(|v| *v as f32).collect();
    let mut buf = d.pinned::<f32>(data.len()).await.unwrap();
    buf.as_mut_slice().unwrap().copy_from_slice(&data);
    let (r, mut buf) = d.upload_pinned(buf).await.unwrap();
    let before = gpu_interrupts();
    for _ in 0..CALLS / 2 {
        buf = d.download_pinned(&r, buf).await.unwrap();
        buf = d.write_pinned(&r, buf).await.unwrap();
    }
    let pinned = gpu_interrupts() - before;
    assert_eq!(buf.as_slice().unwrap(), &data[..], "pinned round trips kept the data");
    assert_eq!(d.download(&r).await.unwrap(), data);
    assert!(
        solver <= ALLOWED,
        "{solver} GPU interrupts over {CALLS} Cholesky calls (at most {ALLOWED} expected)"
    );
    assert!(
        pinned <= ALLOWED,
        "{pinned} GPU interrupts over {CALLS} pinned copies (at most {ALLOWED} expected)"
    );
    sys.shutdown().await;
}
