//! The CPU device's kernel emulation: the same work as a plain kernel (threads run one
//! after another) and as a cooperative one (the body synchronises, so every thread of a
//! block is a coroutine switched at each barrier), and a shared-memory reduction.
//! Target (issue 23): a cooperative kernel within 10× its plain twin.
//! Prints `RESULT | key | value` lines. Knob: BENCH_N (1 << 20 elements).

use std::time::Instant;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::kernel;
use atomr_accel_cuda::prelude::*;

/// y = a·x + y, independent threads.
#[kernel]
pub fn axpy_plain(a: f32, x: &[f32], y: &mut [f32]) {
    let i = global_index();
    if i < y.len() {
        y[i] = a * x[i] + y[i];
    }
}

/// The same, with one barrier per thread (cooperative emulation).
#[kernel]
pub fn axpy_coop(a: f32, x: &[f32], y: &mut [f32]) {
    let i = global_index();
    sync_threads();
    if i < y.len() {
        y[i] = a * x[i] + y[i];
    }
}

/// A block sum through shared memory: log2(256) barriers per thread.
#[kernel]
pub fn block_sum(x: &[f32], out: &mut [f32]) {
    let mut tile = shared_array::<f32, 256>();
    let t = thread_idx_x();
    let i = global_index();
    tile[t] = if i < x.len() { x[i] } else { 0.0 };
    sync_threads();
    let mut s = 128;
    while s > 0 {
        if t < s {
            tile[t] += tile[t + s];
        }
        sync_threads();
        s /= 2;
    }
    if t == 0 {
        out[block_idx_x()] = tile[0];
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 20);
    let system = ActorSystem::new("emulation");
    let d = Device::open(&system, DeviceConfig::cpu()).await.unwrap();
    let x = d.upload(vec![1.0f32; n]).await.unwrap();
    let mut y = d.upload(vec![2.0f32; n]).await.unwrap();
    let mut out = d.alloc::<f32>(n.div_ceil(256)).await.unwrap();
    let cfg = LaunchConfig::for_elements(n, 256);
    let (mut plain, mut coop, mut sum) = (vec![], vec![], vec![]);
    for _ in 0..5 {
        let t = Instant::now();
        axpy_plain::launch(&d, cfg, 0.5, &x, &mut y).await.unwrap();
        plain.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        axpy_coop::launch(&d, cfg, 0.5, &x, &mut y).await.unwrap();
        coop.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        block_sum::launch(&d, cfg, &x, &mut out).await.unwrap();
        sum.push(t.elapsed().as_secs_f64());
    }
    let (p, c, s) = (median(&mut plain), median(&mut coop), median(&mut sum));
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    println!(
        "RESULT | CPU emulation, {n} threads, {cores} cores | plain axpy {:.1} ms ({:.1} ns/thread)",
        p * 1e3,
        p * 1e9 / n as f64
    );
    println!(
        "RESULT | CPU emulation, {n} threads | cooperative axpy (one barrier) {:.1} ms | {:.2}x plain (target <= 10x)",
        c * 1e3,
        c / p
    );
    println!(
        "RESULT | CPU emulation, {n} threads | shared-memory block sum (9 barriers) {:.1} ms | {:.2}x plain axpy",
        s * 1e3,
        s / p
    );
    system.shutdown().await;
}
