//! Chaos on an isolated device: 64 clients run mixed operations (SGEMM, a `#[kernel]`, a
//! cuBLASLt matmul, upload/download round trips), each checked against a reference,
//! while its workers are killed, stopped (`SIGSTOP`: a hang the heartbeat must find) and
//! sticky faults (719, 700) injected at random. Every
//! reply must be right or a typed error of a failure (never a wrong result, never an
//! error about the request itself), none lost or hung; afterwards the device serves,
//! this process's memory is flat and no worker process is left over.
//!
//! On the CPU device in CI (faults injected through `TestHooks::inject_fault`, worker
//! kills with SIGKILL) and on the GPU. `ATOMR_CHAOS_SECS` sets the length (60 s).

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::isolation::IsolationConfig;
use atomr_accel_cuda::kernel::dsl::prelude::*;
use atomr_accel_cuda::module::LaunchConfig;
use atomr_accel_cuda::prelude::{Epilogue, Matmul, SparseOp};
use atomr_accel_cuda::testing::TestHooks;
use atomr_accel_cuda::{gpu_main, kernel, Device, DeviceConfig, Gemm, GpuError};
use common::{gemm_ref, rand_vec, rel_err};

/// `y = a·x + 1`.
#[kernel]
pub fn chaos_axpb(a: f32, x: &[f32], y: &mut [f32]) {
    let i = global_index();
    if i < y.len() {
        y[i] = a * x[i] + 1.0;
    }
}

/// What the clients saw: successes, and typed errors by kind.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    errors: Mutex<BTreeMap<&'static str, u64>>,
    slowest: Mutex<Duration>,
}

impl Tally {
    /// Counts one reply; panics on an error that a failing device must not give.
    fn record(&self, r: Result<(), GpuError>, took: Duration) {
        {
            let mut s = self.slowest.lock().unwrap();
            *s = (*s).max(took);
        }
        let kind = match r {
            Ok(()) => {
                self.ok.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(e) if e.is_sticky() => "ContextPoisoned",
            Err(GpuError::DeviceLost(_)) => "DeviceLost",
            Err(GpuError::Stale { .. }) => "Stale",
            Err(GpuError::NoReply(_)) => "NoReply",
            Err(GpuError::Backpressure { .. }) => "Backpressure",
            Err(GpuError::Timeout(_)) => "Timeout",
            Err(e) => panic!("a request failed with an error that is not a device failure: {e:?}"),
        };
        *self.errors.lock().unwrap().entry(kind).or_default() += 1;
    }
}

/// One checked operation (which one: `i`); `Ok` only if the answer was right.
async fn operation(dev: &Device, i: u64) -> Result<(), GpuError> {
    match i % 6 {
        0 => {
            let n = 48;
            let a = rand_vec(n * n);
            let ga = dev.upload(a.iter().map(|&v| v as f32).collect::<Vec<_>>()).await?;
            let gc = dev.alloc::<f32>(n * n).await?;
            dev.gemm(Gemm::<f32>::new(n, n, n), &ga, &ga, &gc).await?;
            let got: Vec<f64> = dev.download(&gc).await?.iter().map(|&v| v as f64).collect();
            let a32: Vec<f64> = a.iter().map(|&v| v as f32 as f64).collect();
            let mut want = vec![0.0; n * n];
            gemm_ref(false, false, n, n, n, 1.0, &a32, n, &a32, n, 0.0, &mut want, n);
            let e = rel_err(&got, &want);
            assert!(e < 1e-5, "a wrong SGEMM: rel err {e}");
        }
        1 => {
            let x: Vec<f32> = rand_vec(3000).iter().map(|&v| v as f32).collect();
            let gx = dev.upload(x.clone()).await?;
            let mut gy = dev.alloc::<f32>(x.len()).await?;
            chaos_axpb::launch(dev, LaunchConfig::for_elements(x.len(), 256), 2.0, &gx, &mut gy).await?;
            let y = dev.download(&gy).await?;
            for (k, (y, x)) in y.iter().zip(&x).enumerate() {
                assert_eq!(*y, 2.0 * x + 1.0, "a wrong kernel result at {k}");
            }
        }
        2 => {
            let (m, n, k) = (32, 16, 24);
            let bf = |v: Vec<f64>| v.into_iter().map(half::bf16::from_f64).collect::<Vec<_>>();
            let (a, b) = (bf(rand_vec(m * k)), bf(rand_vec(k * n)));
            let wide = |v: &[half::bf16]| v.iter().map(|x| x.to_f64()).collect::<Vec<_>>();
            let (ae, be) = (wide(&a), wide(&b));
            let (ga, gb) = (dev.upload(a).await?, dev.upload(b).await?);
            let gc = dev.alloc::<f32>(m * n).await?;
            dev.matmul(Matmul::new(m, n, k), Epilogue::relu(), &ga, &gb, &gc)
                .await?;
            let got: Vec<f64> = dev.download(&gc).await?.iter().map(|&v| v as f64).collect();
            let mut want = vec![0.0; m * n];
            gemm_ref(false, false, m, n, k, 1.0, &ae, m, &be, k, 0.0, &mut want, m);
            want.iter_mut().for_each(|w| *w = w.max(0.0));
            let e = rel_err(&got, &want);
            assert!(e < 1e-5, "a wrong matmul: rel err {e}");
        }
        3 => {
            // A pinned buffer (shared memory on an isolated device) there and back.
            let v = rand_vec(4096);
            let mut p = dev.pinned_scratch::<f64>(v.len()).await?;
            p.as_mut_slice()?.copy_from_slice(&v);
            let (g, p) = dev.upload_pinned(p).await?;
            dev.scal(-2.0, &g).await?;
            let p = dev.download_pinned(&g, p).await?;
            for (k, (got, x)) in p.as_slice()?.iter().zip(&v).enumerate() {
                assert_eq!(*got, -2.0 * x, "a wrong pinned round trip at {k}");
            }
        }
        4 => {
            // A sparse product: [[x0, 0], [2, x1]] · (1, 3).
            let x = rand_vec(2);
            let a = dev.upload_csr(2, 2, &[0, 1, 3], &[0, 0, 1], &[x[0], 2.0, x[1]]).await?;
            let (gv, gy) = (dev.upload(vec![1.0f64, 3.0]).await?, dev.alloc::<f64>(2).await?);
            dev.spmv(&a, &gv, &gy, SparseOp::new()).await?;
            assert_eq!(dev.download(&gy).await?, vec![x[0], 2.0 + 3.0 * x[1]], "a wrong SpMV");
        }
        _ => {
            let v = rand_vec(5000);
            let g = dev.upload(v.clone()).await?;
            assert_eq!(dev.download(&g).await?, v, "a round trip changed the data");
        }
    }
    Ok(())
}

/// This process's resident memory, in MiB.
fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib >> 10
}

/// Child processes of this one still alive (workers).
fn live_children() -> usize {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
        .filter(|stat| {
            // pid (comm) state ppid …: the fields after the command's closing paren.
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            let fields: Vec<&str> = rest.split_whitespace().collect();
            fields.get(1) == Some(&me.as_str()) && fields.first() != Some(&"Z")
        })
        .count()
}

fn chaos(config: DeviceConfig) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
    Box::pin(async move {
        let secs: u64 = std::env::var("ATOMR_CHAOS_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(60);
        // A fault every few hundred ms for a minute is far beyond a restart budget meant
        // to stop crash loops.
        let config = config.with_isolation(IsolationConfig {
            max_restarts: 100_000,
            heartbeat: Duration::from_millis(100),
            hang_timeout: Duration::from_secs(1),
            ..Default::default()
        });
        let sys = ActorSystem::new("chaos");
        let dev = Device::open(&sys, config).await.expect("the isolated device opens");
        for i in 0..8 {
            operation(&dev, i).await.expect("a healthy device serves");
        }
        let rss0 = rss_mib();
        let tally = Arc::new(Tally::default());
        let stop = Arc::new(AtomicBool::new(false));
        let mut clients = vec![];
        for c in 0..64u64 {
            let (dev, tally, stop) = (dev.clone(), tally.clone(), stop.clone());
            clients.push(tokio::spawn(async move {
                let mut i = c;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let r = tokio::time::timeout(Duration::from_secs(60), operation(&dev, i))
                        .await
                        .unwrap_or_else(|_| panic!("client {c}: operation {i} hung for 60 s"));
                    tally.record(r, t.elapsed());
                    i += 1;
                }
            }));
        }
        let (mut kills, mut stops, mut faults) = (0u64, 0u64, BTreeMap::<i32, u64>::new());
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut rng = rand_vec(1 << 12).into_iter().cycle();
        while Instant::now() < deadline {
            let pause = 100.0 + 500.0 * (rng.next().unwrap() + 1.0) / 2.0;
            tokio::time::sleep(Duration::from_millis(pause as u64)).await;
            let pick = rng.next().unwrap();
            if pick < -0.5 {
                if dev.kill_worker().is_ok() {
                    kills += 1;
                }
            } else if pick < 0.0 {
                // A hang: the worker stops answering; its heartbeat finds it out.
                if let Some(pid) = dev.worker_pid() {
                    // SAFETY: signals a worker process of this test's device.
                    if unsafe { libc::kill(pid as i32, libc::SIGSTOP) } == 0 {
                        stops += 1;
                    }
                }
            } else {
                let code = if pick < 0.5 { 719 } else { 700 };
                if dev.inject_fault(code).await.is_sticky() {
                    *faults.entry(code).or_default() += 1;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        for c in clients {
            tokio::time::timeout(Duration::from_secs(120), c)
                .await
                .expect("every client finishes: no asker left waiting")
                .expect("no client saw a wrong answer");
        }
        // Serving, correctly, after the storm.
        dev.ready().await.unwrap();
        for i in 0..8 {
            tokio::time::timeout(Duration::from_secs(60), operation(&dev, i))
                .await
                .expect("no hang after the storm")
                .expect("the device serves after the storm");
        }
        let generation = dev.state().generation;
        let rss1 = rss_mib();
        let errors = tally.errors.lock().unwrap().clone();
        println!(
            "    {secs} s: {} replies right, typed errors {errors:?}; {kills} worker kills, {stops} hangs (SIGSTOP), faults {faults:?}; \
             generation {generation}; slowest reply {:?}; resident memory {rss0} → {rss1} MiB",
            tally.ok.load(Ordering::Relaxed),
            *tally.slowest.lock().unwrap(),
        );
        assert!(tally.ok.load(Ordering::Relaxed) > 0, "no request succeeded");
        assert!(
            kills + stops + faults.values().sum::<u64>() > 0,
            "no fault was injected"
        );
        assert!(rss1 < rss0 + 512, "memory grew from {rss0} to {rss1} MiB");
        dev.stop().await;
        drop(sys);
        // The serving worker and the standby exit with the device.
        let t0 = Instant::now();
        while live_children() > 0 && t0.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(live_children(), 0, "worker processes left after the device stopped");
    })
}

#[gpu_main]
fn main() {
    common::harness::run_cases(vec![
        ("cpu::chaos", false, Box::new(|| chaos(DeviceConfig::cpu().isolated()))),
        ("gpu::chaos", true, Box::new(|| chaos(DeviceConfig::cuda(0).isolated()))),
    ])
}
